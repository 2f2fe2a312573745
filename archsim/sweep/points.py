"""The points of a sweep, resolved: parameter values -> derived values -> overrides of the base
files -> a validated design keyed by the hash of its resolved configuration.

A point whose values make an invalid design (an SRAM too small for any tile, a derived value
that divides by zero, a whole number that does not fit a 64-bit column) is kept, with its error,
so that it is recorded as failed; it is keyed by the hash of what it asked for. Points that
resolve to the same configuration are one point; parameters without a path (inputs of derived
values and objectives only) enter the key besides the configuration, so their values stay apart.
Points are resolved one at a time, as the sweep runs (`iter_points`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archsim.config.resolved import config_hash, run_options
from archsim.errors import ConfigError
from archsim.sweep.design import Design, DesignCache, KeyPath, config_value, resolve_file
from archsim.sweep.sampling import Value

if TYPE_CHECKING:  # a worker gets PointTasks without loading specs (their schemas: 0.2 s of imports)
    from archsim.sweep.spec import SweepSpec


@dataclass(frozen=True)
class PointTask:
    """One point as a worker gets it: its key, its column values, and the design or its error."""

    config_hash: str
    # parameters and derived values, in column order; None where a failed point has no value
    # (a derived value it could not compute, a whole number too wide to store)
    values: tuple[tuple[str, Value | None], ...]
    design: Design | None
    error: str | None = None

    def known_values(self) -> dict[str, Value]:
        """The values the point has (all of them when it has a design)."""
        return {name: value for name, value in self.values if value is not None}


def derived_values(spec: SweepSpec, values: dict[str, Value]) -> dict[str, Value]:
    """The parameter values with each derived value added, in order."""
    out = dict(values)
    for d in spec.derived:
        value = d.expr.evaluate(out)
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            raise ValueError(f"derived {d.name} = {d.expr.text} is not a number (got {value!r:.40})")
        out[d.name] = round(value) if d.integer else float(value)
    return out


INT64 = (-(2**63), 2**63 - 1)


@dataclass
class Resolution:
    """How far resolving a sweep's samples has gone: samples seen, distinct points, repeats."""

    samples: int = 0
    points: int = 0
    duplicates: int = 0
    hashes: set[str] = field(default_factory=set)


@lru_cache(maxsize=256)
def _file(value: str, root: str, spec_dir: str, allowed: tuple[str, ...] = ()) -> str:
    return resolve_file(value, "hw_configs" if root == "hardware" else "workloads", Path(spec_dir), allowed)


def _too_wide(spec: SweepSpec, row: tuple[tuple[str, Value], ...]) -> str | None:
    """Why a column value cannot be stored (a whole number beyond 64 bits), or None."""
    types = {name: kind for name, kind, _ in spec.columns()}
    for name, value in row:
        if isinstance(value, bool) or not isinstance(value, int):  # only whole numbers can be too wide
            continue
        if not INT64[0] <= value <= INT64[1] and types.get(name) in ("int", "float"):
            return f"{name}: a {value.bit_length()}-bit whole number does not fit a 64-bit column"
    return None


def _reason(err: ConfigError) -> str:
    return "; ".join(f"{p.key}: {p.message}" if p.key else p.message for p in err.problems)


def overrides(spec: SweepSpec, values: dict[str, Value]) -> tuple[dict[str, str], dict[str, list]]:
    """The base file of each root (`hardware`, `workload`) and the (path, value) set below it."""
    files = {"hardware": spec.hardware, "workload": spec.workload}
    over: dict[str, list[tuple[KeyPath, Any]]] = {"hardware": [], "workload": []}
    spec_dir = str(Path(spec.source).parent)
    for fixed_path, value in spec.fixed:
        over[fixed_path[0]].append((fixed_path[1:], value))
    units: dict[str, tuple[KeyPath | None, str | None]] = {p.name: (p.path, p.unit) for p in spec.parameters}
    units |= {d.name: (d.path, d.unit) for d in spec.derived}
    for name, (path, unit) in units.items():
        if path is None:
            continue
        if len(path) == 1:
            files[path[0]] = _file(str(values[name]), path[0], spec_dir, spec.allowed)
        else:
            over[path[0]].append((path[1:], config_value(values[name], unit)))
    return files, over


def resolve_point(spec: SweepSpec, values: dict[str, Value], cache: DesignCache) -> PointTask:
    """The task of one point: validated and hashed, or failed with the reason."""
    try:
        full = derived_values(spec, values)
    except (ArithmeticError, ValueError, TypeError) as err:
        given = tuple((n, values.get(n)) for n, _, role in spec.columns() if role != "objective")
        return PointTask(
            config_hash({"invalid": {k: repr(v) for k, v in values.items()}}),
            given,
            None,
            f"derived values: {type(err).__name__}: {err}",
        )
    row = tuple((n, full[n]) for n, _, role in spec.columns() if role != "objective")
    inputs = {n: repr(values[n]) for n in spec.keyed_inputs}
    wide = _too_wide(spec, row)
    if wide:
        stored = tuple((n, None if _too_wide(spec, ((n, v),)) else v) for n, v in row)
        return PointTask(config_hash({"invalid": {k: repr(v) for k, v in full.items()}}), stored, None, wide)
    try:
        files, over = overrides(spec, full)
    except ConfigError as err:  # a file the point names cannot be used
        named = {k: repr(v) for k, v in full.items()}
        return PointTask(config_hash({"invalid": named}), row, None, f"invalid design: {_reason(err)}")
    try:
        design = cache.design(
            files["hardware"],
            tuple(over["hardware"]),
            files["workload"],
            tuple(over["workload"]),
            run_options(spec.kv_stride),
        )
    except ConfigError as err:
        asked: dict[str, object] = {"files": files}
        asked |= {k: [[".".join(p), repr(v)] for p, v in o] for k, o in over.items()}
        invalid = {"invalid": asked, "inputs": inputs} if inputs else {"invalid": asked}
        return PointTask(config_hash(invalid), row, None, f"invalid design: {_reason(err)}")
    key = config_hash({"config_hash": design.config_hash, "inputs": inputs}) if inputs else design.config_hash
    return PointTask(key, row, design)


def iter_points(spec: SweepSpec, state: Resolution | None = None) -> Iterator[PointTask]:
    """Every point of the sweep, once per distinct key, in sweep order, resolved one at a time;
    `state` counts the samples seen and the repeats."""
    cache = DesignCache()
    state = state if state is not None else Resolution()
    for values in spec.iter_samples():
        state.samples += 1
        task = resolve_point(spec, values, cache)
        if task.config_hash in state.hashes:
            state.duplicates += 1
            continue
        state.hashes.add(task.config_hash)
        state.points += 1
        yield task


def resolve_points(spec: SweepSpec, progress: Callable[[int, int], None] | None = None) -> list[PointTask]:
    """Every point of the sweep, once per distinct configuration, in sweep order."""
    total = spec.sample_count()
    state = Resolution()
    tasks = []
    for task in iter_points(spec, state):
        tasks.append(task)
        if progress and state.samples % 256 == 1:
            progress(state.samples, total)
    if progress:
        progress(state.samples, total)
    return tasks
