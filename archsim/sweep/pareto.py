"""Pareto fronts of sweep results: the designs no other design beats on every objective.

A design *dominates* another when it is at least as good on every objective and better on one
(Deb 2001, ch. 2). After sorting the candidates lexicographically by the objectives (each turned
into one to minimise), a design can only be dominated by one before it, and if it is dominated
at all then a design already on the front dominates it; so one pass that checks each candidate
against the front so far finds the front in O(n x front size). Designs with equal objectives
are all kept.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archsim.errors import ConfigError
from archsim.sweep.store import READABLE, read_manifest, read_results

FIXED_COLUMNS = ("config_hash", "status", "error", "fidelity")


class ParetoError(ConfigError, ValueError):
    """An objective that is not a numeric column of the results, or no usable rows."""


@dataclass(frozen=True)
class Goal:
    column: str
    maximize: bool

    @property
    def label(self) -> str:
        return f"{self.column} ({'max' if self.maximize else 'min'})"


def pareto_mask(values: np.ndarray, maximize: list[bool]) -> np.ndarray:
    """Rows of `values` (n x k) on the front, as a boolean mask; column j is maximised if `maximize[j]`."""
    cost = np.where(np.asarray(maximize, dtype=bool), -values, values).astype(np.float64)
    order = np.lexsort(cost.T[::-1]) if len(cost) else np.zeros(0, dtype=np.int64)
    front: list[int] = []
    for i in order:
        if front:
            f = cost[front]
            if np.any(np.all(f <= cost[i], axis=1) & np.any(f < cost[i], axis=1)):
                continue
        front.append(int(i))
    mask = np.zeros(len(cost), dtype=bool)
    mask[front] = True
    return mask


@dataclass(frozen=True)
class Front:
    """The ok rows of a results folder and which of them are on the front."""

    goals: tuple[Goal, ...]
    design_columns: tuple[str, ...]  # parameters and derived values: what a design is
    rows: list[dict]  # every ok row with finite objectives
    on_front: np.ndarray  # bool per row

    def front_rows(self) -> list[dict]:
        """The front, best first on the first goal."""
        first = self.goals[0]
        rows = [r for r, on in zip(self.rows, self.on_front) if on]
        return sorted(rows, key=lambda r: (-r[first.column] if first.maximize else r[first.column], r["config_hash"]))


def design_columns(table, manifest: dict) -> tuple[str, ...]:
    """The parameter and derived columns (from the manifest; else every column not fixed or numeric
    objective-like is taken as describing the design)."""
    roles = {c[0]: c[2] for c in manifest.get("settings", {}).get("columns", [])}
    if roles:
        return tuple(n for n in table.column_names if roles.get(n) in ("parameter", "derived"))
    return tuple(n for n in table.column_names if n not in FIXED_COLUMNS)


def find_front(out_dir: str | Path, goals: list[Goal]) -> Front:
    """Read a results folder and find the front over `goals` (ParetoError on a bad column)."""
    table = read_results(out_dir)
    manifest = read_manifest(out_dir, READABLE)
    numeric = [f.name for f in table.schema if f.name not in FIXED_COLUMNS and _is_numeric(f.type)]
    for g in goals:
        if g.column not in numeric:
            hint = difflib.get_close_matches(g.column, numeric, n=1)
            raise ParetoError(
                f"{g.column!r} is not a numeric column of {out_dir}"
                + (f"; did you mean {hint[0]!r}?" if hint else f"; columns: {', '.join(numeric)}")
            )
    rows = [
        r
        for r in table.to_pylist()
        if r["status"] == "ok" and all(r[g.column] is not None and np.isfinite(r[g.column]) for g in goals)
    ]
    if not rows:
        raise ParetoError(f"{out_dir} holds no successful points with {', '.join(g.column for g in goals)}")
    values = np.array([[float(r[g.column]) for g in goals] for r in rows])
    return Front(tuple(goals), design_columns(table, manifest), rows, pareto_mask(values, [g.maximize for g in goals]))


def _is_numeric(arrow_type) -> bool:
    import pyarrow.types as t

    return t.is_integer(arrow_type) or t.is_floating(arrow_type)
