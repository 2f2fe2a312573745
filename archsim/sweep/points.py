"""The points of a sweep, resolved: parameter values -> derived values -> overrides of the base
files -> a validated design keyed by the hash of its resolved configuration.

A point whose values make an invalid design (an SRAM too small for any tile, a derived value
that divides by zero) is kept, with its error, so that it is recorded as failed; it is keyed by
the hash of what it asked for. Points that resolve to the same configuration are one point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from archsim.config.resolved import config_hash, run_options
from archsim.errors import ConfigError
from archsim.sweep.design import Design, DesignCache, KeyPath, config_value, resolve_file
from archsim.sweep.sampling import Value
from archsim.sweep.spec import SweepSpec


@dataclass(frozen=True)
class PointTask:
    """One point as a worker gets it: its key, its column values, and the design or its error."""

    config_hash: str
    values: tuple[tuple[str, Value], ...]  # parameters and derived values, in column order
    design: Design | None
    error: str | None = None


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


@lru_cache(maxsize=256)
def _file(value: str, root: str, spec_dir: str) -> str:
    return resolve_file(value, "hw_configs" if root == "hardware" else "workloads", Path(spec_dir))


def overrides(spec: SweepSpec, values: dict[str, Value]) -> tuple[dict[str, str], dict[str, list]]:
    """The base file of each root (`hardware`, `workload`) and the (path, value) set below it."""
    files = {"hardware": spec.hardware, "workload": spec.workload}
    over: dict[str, list[tuple[KeyPath, Any]]] = {"hardware": [], "workload": []}
    spec_dir = str(Path(spec.source).parent)
    for path, value in spec.fixed:
        over[path[0]].append((path[1:], value))
    units = {p.name: (p.path, p.unit) for p in spec.parameters} | {d.name: (d.path, d.unit) for d in spec.derived}
    for name, (path, unit) in units.items():
        if path is None:
            continue
        if len(path) == 1:
            files[path[0]] = _file(str(values[name]), path[0], spec_dir)
        else:
            over[path[0]].append((path[1:], config_value(values[name], unit)))
    return files, over


def resolve_point(spec: SweepSpec, values: dict[str, Value], cache: DesignCache) -> PointTask:
    """The task of one point: validated and hashed, or failed with the reason."""
    try:
        full = derived_values(spec, values)
    except (ArithmeticError, ValueError, TypeError) as err:
        row = tuple((n, values.get(n)) for n, _, role in spec.columns() if role != "objective")
        return PointTask(
            config_hash({"invalid": {k: repr(v) for k, v in values.items()}}),
            row,
            None,
            f"derived values: {type(err).__name__}: {err}",
        )
    row = tuple((n, full[n]) for n, _, role in spec.columns() if role != "objective")
    files, over = overrides(spec, full)
    try:
        design = cache.design(
            files["hardware"],
            tuple(over["hardware"]),
            files["workload"],
            tuple(over["workload"]),
            run_options(spec.kv_stride),
        )
    except ConfigError as err:
        asked = {"files": files, **{k: [[".".join(p), repr(v)] for p, v in o] for k, o in over.items()}}
        reason = "; ".join(f"{p.key}: {p.message}" if p.key else p.message for p in err.problems)
        return PointTask(config_hash({"invalid": asked}), row, None, f"invalid design: {reason}")
    return PointTask(design.config_hash, row, design)


def resolve_points(spec: SweepSpec, progress: Callable[[int, int], None] | None = None) -> list[PointTask]:
    """Every point of the sweep, once per distinct configuration, in sweep order."""
    cache = DesignCache()
    samples = spec.sample()
    seen: set[str] = set()
    tasks = []
    for i, values in enumerate(samples):
        task = resolve_point(spec, values, cache)
        if task.config_hash not in seen:
            seen.add(task.config_hash)
            tasks.append(task)
        if progress and (i % 256 == 0 or i == len(samples) - 1):
            progress(i + 1, len(samples))
    return tasks
