"""Evaluate points (in a worker): check the constraints, run the generation, record objectives.

Each point becomes one row: its `config_hash`, the `fidelity` it was simulated at, a `status` (`ok`; `infeasible`: a constraint
ruled it out, or it does not fit in HBM; `failed`: an invalid design or an error while
simulating, whose message is in `error`), its parameter and derived values, and its objectives
(null unless it ran). Constraints on design facts are checked before simulating; those that read
what a run reports (`power_w <= 700`) once it has run, and a point they rule out keeps the
objectives it computed. A point that fails never stops the others.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archsim.errors import DoesNotFitError, reraise_interrupt
from archsim.sweep.directions import Objective
from archsim.sweep.expr import UNIT_CONSTANTS, Expr
from archsim.sweep.metrics import FACT_NAMES, design_facts, metric_names, missing_section, run_metrics
from archsim.sweep.points import PointTask
from archsim.sweep.sampling import Value

if TYPE_CHECKING:  # workers import this module without the spec's loading and schemas
    from archsim.sweep.spec import SweepSpec

OK, INFEASIBLE, FAILED = "ok", "infeasible", "failed"


@dataclass(frozen=True)
class Evaluation:
    """What a worker needs besides the points: small, picklable, the same for every chunk."""

    constraints: tuple[Expr, ...]  # on the design: checked before simulating
    objectives: tuple[Objective, ...]
    kv_stride: int
    run_constraints: tuple[Expr, ...] = ()  # on what the run reports: checked after it
    use_cache: bool = True  # the on-disk op cache (archsim/opcache.py), as the sweep's process has it
    fidelity: str = "full"  # what each point is simulated at (archsim/choose/fidelity.py): full or screen
    version: str = ""  # the sweep's archsim (opcache.code_version): a worker of another refuses its chunks

    @property
    def reads(self) -> frozenset[str]:
        """Every name the constraints and objectives read, less the unit constants (`40 * MiB`):
        each is a fact, a run metric or a sweep value."""
        exprs = (*self.constraints, *self.run_constraints, *(o.expr for o in self.objectives))
        return frozenset(n for e in exprs for n in e.names if n not in UNIT_CONSTANTS)

    @property
    def reads_energy(self) -> bool:
        """Whether an objective or a constraint checked after the run reads what only the run's
        energy gives (`energy_j`, `power_w`, `energy.by_unit.hbm_j`, ...): where none does, the
        energy is not worked out (archsim/runner/energy.py, about 2% of a point's time)."""
        return any(missing_section(n) == "power" for n in self.reads - FACT_NAMES)

    @classmethod
    def of(cls, spec: SweepSpec, fidelity: str = "full") -> Evaluation:
        from archsim import opcache

        before, after = split_constraints(spec.constraints)
        return cls(before, spec.objectives, spec.kv_stride, after, opcache.enabled(), fidelity, opcache.code_version())


def split_constraints(constraints: tuple[Expr, ...]) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
    """The constraints that read only the design (parameters, derived values, design facts) and
    those that read what a run reports."""
    metrics = metric_names() - FACT_NAMES
    late = tuple(c for c in constraints if c.names & metrics)
    return tuple(c for c in constraints if c not in late), late


def missing(exprs, env: dict) -> str | None:
    """Why a name the expressions read has no value for this point (a section the chip file lacks)."""
    for e in exprs:
        for name in sorted(e.names):
            section = missing_section(name)
            if name not in env and section is not None:
                return f"{name}: the chip file has no {section} section ({e.text})"
    return None


def _show(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def unmet_constraint(constraints: tuple[Expr, ...], env: Mapping[str, Value]) -> str | None:
    """The first constraint `env` does not meet, with the values it read; None if all are met."""
    for c in constraints:
        if not c.evaluate(env):
            shown = ", ".join(f"{n} = {_show(env[n])}" for n in sorted(c.names) if n in env)
            return f"constraint not met: {c.text}" + (f" ({shown})" if shown else "")
    return None


def evaluate_point(task: PointTask, ev: Evaluation) -> dict:
    """The row of one point."""
    from archsim.graph.model import scenario_too_long
    from archsim.runner.energy import run_energy
    from archsim.runner.generation import run_generation

    row = {
        "config_hash": task.config_hash,
        "status": FAILED,
        "error": task.error,
        "fidelity": ev.fidelity,
        **dict(task.values),
    }
    row.update({o.name: None for o in ev.objectives})
    if task.design is None:
        return row
    system, w = task.design.system, task.design.workload
    try:
        env: dict[str, Value] = {**design_facts(system, w, ev.reads), **task.known_values()}
        if why := missing(ev.constraints, env):
            return {**row, "error": why}
        unmet = unmet_constraint(ev.constraints, env)
        if unmet:
            return {**row, "status": INFEASIBLE, "error": unmet}
        positions = w.model.max_positions
        if too_long := scenario_too_long(w, (positions, "model.max_positions") if positions else None):
            return {**row, "status": INFEASIBLE, "error": too_long}  # as `run` refuses it
        result = run_generation(w, system, kv_stride=ev.kv_stride, fidelity=ev.fidelity)
        if result.interrupted:  # run_generation turns Ctrl-C into a partial result: not a result here
            raise KeyboardInterrupt
        energy = run_energy(result, w, system, ev.kv_stride) if ev.reads_energy else None
        env.update(run_metrics(result, system, energy, ev.reads - env.keys()))
        if why := missing(ev.run_constraints + tuple(o.expr for o in ev.objectives), env):
            return {**row, "error": why}
        objectives = {}
        for o in ev.objectives:
            value = o.expr.evaluate(env)
            env[o.name] = objectives[o.name] = float(value)
            if not math.isfinite(objectives[o.name]):  # no front ranks it: recorded as failed, with why
                return {**row, "error": f"objective {o.name} is {objectives[o.name]}, not a finite number"}
        unmet = unmet_constraint(ev.run_constraints, env)
    except DoesNotFitError as err:
        return {**row, "status": INFEASIBLE, "error": str(err)}
    except Exception as err:
        reraise_interrupt(err)  # Ctrl-C inside a compiled kernel: the sweep stops, the point is not failed
        return {**row, "error": f"{type(err).__name__}: {err}"}
    if unmet:
        return {**row, **objectives, "status": INFEASIBLE, "error": unmet}
    return {**row, **objectives, "status": OK}


def evaluate_chunk(tasks: list[PointTask], ev: Evaluation) -> tuple[list[dict], float]:
    """The rows of a chunk of points, in order, and the CPU seconds the worker spent on them.
    A worker whose archsim is not the sweep's (a Dask worker installed apart) computes nothing:
    its rows would be another model's, recorded as this one's."""
    from archsim import opcache

    if ev.version and ev.version != opcache.code_version():
        raise RuntimeError(
            f"this worker runs archsim {opcache.code_version()} and the sweep {ev.version}:"
            " install the same archsim on every worker"
        )
    start = time.process_time()
    if opcache.enabled() != ev.use_cache:
        opcache.set_enabled(ev.use_cache)
    rows = [evaluate_point(t, ev) for t in tasks]
    return rows, time.process_time() - start
