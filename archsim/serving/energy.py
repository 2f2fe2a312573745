"""Energy and power of a serving run, from each instance's timeline: joules per request and per
output token, average power over the trace, and power over time.

A timeline sample is an idle gap (the chip at its lowest clock: `idle_power_w`) or `steps`
steps of `batch` sequences and `tokens` tokens each. A step's energy is its parts' as the step
model composes its time (archsim/runner/steps.py): the ops on its tokens and the LM head on its
sequences, each simulated on the same grid of shapes and interpolated (their energy, as their
time, with the hardware model's `records_energy`), and attention for the rest of the step's
time. Attention's energy is affine in its time for a given batch (both are affine in the KV
blocks it streams), so it is read off the line through two simulated KV lengths: decode
attention of `batch` sequences, or, in a step with prompt tokens, a prefill chunk of the step's
tokens beyond one per sequence. A sample's time beyond its GPU work (the host's work the GPU
waits through: archsim/serving/host.py) is at the chip's floor, its static and idle power at the
full clock. The parts are one chip's of the instance's layout, as the step model times them
(attention and the LM head of one rank); an instance, or under expert parallelism each rank,
of n = tp x pp chips draws n times its busiest chip's. Joules, watts, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from archsim.compiler.gemm_phases import plans_kept_within
from archsim.graph.mixed import decode_attention_ops, head_ops, prefill_attention_ops, token_ops
from archsim.graph.model import Scenario, Workload
from archsim.graph.parallel import Parallelism
from archsim.hardware import System
from archsim.hardware.power import floor_power_w, idle_power_w
from archsim.runner.energy import energy_sum
from archsim.runner.generation import op_costs
from archsim.runner.steps import DECODE_BATCH_FACTOR, QUERY_FACTOR, bracket
from archsim.serving.simulate import SERVE_PLAN_BYTES

if TYPE_CHECKING:
    from archsim.graph.ops import Op
    from archsim.serving.result import InstanceRun, ServeResult
    from archsim.serving.setup import ServeSetup

LINE_KV = (1024, 4096)  # KV lengths (decode) or past tokens (prefill, less the chunk) of the attention line


def _timed_j(ops: list[Op], system: System) -> tuple[float, float]:
    """(seconds, joules) of the ops on the system's busiest chip."""
    costs, hidden = op_costs(ops, system)
    time_s = sum(op.repeat * c.time_s for op, c in costs) - hidden
    return time_s, energy_sum(((op.repeat, c.energy) for op, c in costs), system, hidden).total_j


class StepEnergyModel:
    """Memoised energies of the parts of a serving step on one instance (see the module docstring)."""

    def __init__(self, w: Workload, system: System, resolution: int, par: Parallelism | None):
        self.w, self.system, self.resolution = w, system, resolution
        par = par if par is not None and not par.is_single else None
        self.tok = replace(par, micro_batches=1) if par is not None else None  # as the step model's parts
        self.seq = replace(par, ep=1, micro_batches=1) if par is not None else None
        self._parts: dict[tuple, tuple[float, float]] = {}

    def _part(self, key: tuple) -> tuple[float, float]:
        v = self._parts.get(key)
        if v is None:
            kind, n, m = key
            w, tok, seq = self.w, self.tok, self.seq
            ops = {
                "tokens": lambda: token_ops(w, n, tok),
                "head": lambda: head_ops(w, n, seq),
                "decode": lambda: decode_attention_ops(w, n, m, seq),
                "prefill": lambda: prefill_attention_ops(w, n, m, 1, seq),
            }[kind]()
            v = self._parts[key] = _timed_j(ops, self.system)
        return v

    def _interp(self, kind: str, n: int, res: int, m: int = 0) -> tuple[float, float]:
        lo, hi = bracket(n, res, knots=True)
        a = self._part((kind, lo, m))
        if lo == hi:
            return a
        b, f = self._part((kind, hi, m)), (n - lo) / (hi - lo)
        return a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f

    def attention_j(self, sequences: int, tokens: int, time_s: float) -> float:
        """Energy of a step's attention that took `time_s` (see the module docstring)."""
        chunk = tokens - sequences + 1
        if chunk > 1:
            kind, n, res = "prefill", chunk, self.resolution * QUERY_FACTOR
        else:
            kind, n, res = "decode", sequences, self.resolution * DECODE_BATCH_FACTOR
        (t1, e1), (t2, e2) = (self._interp(kind, n, res, m) for m in LINE_KV)
        slope = (e2 - e1) / (t2 - t1) if t2 > t1 else (e1 / t1 if t1 > 0 else 0.0)
        return max(0.0, e1 + slope * (time_s - t1))

    def step_j(self, sequences: int, tokens: int, step_s: float) -> float:
        """Energy of one step of `sequences` sequences and `tokens` tokens that took `step_s`."""
        t_tok, e_tok = self._interp("tokens", tokens, self.resolution)
        t_head, e_head = self._interp("head", sequences, self.resolution)
        return e_tok + e_head + self.attention_j(sequences, tokens, max(0.0, step_s - t_tok - t_head))


@lru_cache(maxsize=16)
def energy_model(w: Workload, system: System, resolution: int, par: Parallelism | None) -> StepEnergyModel:
    return StepEnergyModel(w, system, resolution, par)


@dataclass(frozen=True, eq=False)
class InstanceEnergy:
    """One instance: each timeline sample's joules (on all its chips) and their total."""

    role: str
    index: int
    chips: int
    start_s: np.ndarray
    end_s: np.ndarray
    sample_j: np.ndarray

    @property
    def energy_j(self) -> float:
        return float(np.sum(self.sample_j))

    @property
    def power_w(self) -> np.ndarray:
        """Power of each sample (all the instance's chips)."""
        span = self.end_s - self.start_s
        return np.divide(self.sample_j, span, out=np.zeros(len(span)), where=span > 0)


@dataclass(frozen=True, eq=False)
class ServeEnergy:
    instances: tuple[InstanceEnergy, ...]
    requests: int
    output_tokens: int
    duration_s: float
    limit_w: float  # per chip
    chips: int = field(default=1)

    @property
    def energy_j(self) -> float:
        return sum(i.energy_j for i in self.instances)

    @property
    def j_per_request(self) -> float:
        return self.energy_j / self.requests if self.requests else 0.0

    @property
    def j_per_output_token(self) -> float:
        return self.energy_j / self.output_tokens if self.output_tokens else 0.0

    @property
    def average_power_w(self) -> float:
        """Mean power of all chips of all instances over the run (first arrival to last finish)."""
        return self.energy_j / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def average_power_per_chip_w(self) -> float:
        return self.average_power_w / self.chips if self.chips else 0.0

    @property
    def peak_power_per_chip_w(self) -> float:
        return max((float(np.max(i.power_w)) / i.chips for i in self.instances if len(i.power_w)), default=0.0)


def instance_energy(
    run: InstanceRun, w: Workload, system: System, par: Parallelism, resolution: int, duration_s: float
) -> InstanceEnergy:
    """Joules of each sample of one instance's (or rank's) timeline on `par`'s chips, idle gaps
    and the idle time after its last step until the run ends included."""
    tl, chip, chips = run.result.timeline, system.chip, par.tp * par.pp
    if chip.power is None:
        raise ValueError(f"{chip.name} has no power model to price a serving run with")
    model, idle_w = energy_model(_bare(w), system, resolution, par), idle_power_w(chip.power)
    floor_w = floor_power_w(chip.power, chip.clock_hz)
    span = tl.end_s - tl.start_s
    joules = np.zeros(len(span))
    samples = zip(tl.steps.tolist(), tl.batch.tolist(), tl.tokens.tolist(), span.tolist(), tl.gpu_s.tolist())
    for i, (steps, batch, tokens, s, gpu) in enumerate(samples):
        if steps > 0 and batch > 0:
            joules[i] = steps * model.step_j(batch, tokens, gpu / steps) + floor_w * max(0.0, s - gpu)
        else:
            joules[i] = idle_w * s
    start, end = tl.start_s, tl.end_s
    tail = duration_s - (float(end[-1]) if len(end) else 0.0)
    if tail > 0:
        start = np.append(start, end[-1] if len(end) else 0.0)
        end, joules = np.append(end, duration_s), np.append(joules, idle_w * tail)
    return InstanceEnergy(run.role, run.index, chips, start, end, joules * chips)


def _bare(w: Workload) -> Workload:
    """The workload without its scenario (step energies do not depend on it)."""
    return replace(w, scenario=Scenario(1, 1, 1), source="")


def serve_energy(result: ServeResult, setup: ServeSetup) -> ServeEnergy | None:
    """The serving run's energy (None when a chip it runs on has no power model), its step
    shapes' GEMMs planned as serving plans them (`SERVE_PLAN_BYTES`)."""
    with plans_kept_within(SERVE_PLAN_BYTES):
        return _serve_energy(result, setup)


def _serve_energy(result: ServeResult, setup: ServeSetup) -> ServeEnergy | None:
    d = setup.disaggregation
    systems = {"colocated": setup.system}
    if d is not None:
        systems = {"prefill": d.prefill_system, "decode": d.decode_system}
    powers = [s.chip.power for s in systems.values() if s.chip.power is not None]
    if len(powers) < len(systems):
        return None
    from archsim.serving.setup import layout

    t = result.times
    finished = t.finish_s[np.isfinite(t.finish_s)]
    duration = float(finished.max()) if len(finished) else 0.0
    layouts = {role: layout(setup, setup.workload, s) for role, s in systems.items()}
    instances = tuple(
        instance_energy(run, setup.workload, systems[run.role], layouts[run.role], setup.resolution, duration)
        for run in result.instances
    )
    chips = sum(i.chips for i in instances)
    limit = max(p.limit_w for p in powers)
    return ServeEnergy(instances, len(result.served), int(np.sum(t.output_tokens)), duration, limit, chips)
