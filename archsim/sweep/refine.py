"""Which screened points a sweep re-runs at full fidelity (`--fidelity auto`): every point that
could be on the Pareto front of the spec's objectives, each ranked its own way (maximised or
minimised, archsim/sweep/directions.py), once every point is simulated at full fidelity.

Screen fidelity (archsim/choose/fidelity.py) is within SCREEN_TOLERANCE of full on every objective
it simulates (docs/performance.md measures it); an objective of the design alone (`die_mm2:
area_mm2`) is exact. A point p is dropped only when another q beats it even with q at its worst
and p at its best within those bounds (q's objectives each moved by the tolerance against it,
p's for it): at full fidelity q then still dominates p, so p is not on the front. Every point not
so dropped is re-run: the front of the full-fidelity rows is then that of a sweep run at full
fidelity throughout (a dropped point is dominated, through a chain of dropped points, by one
re-run). Finding them: p is dominated by a pessimistic q iff by one on the front of the
pessimistic values (dominance is transitive), so it costs one front and one comparison of every
point with it.
"""

from __future__ import annotations

import numpy as np

from archsim.sweep.pareto import pareto_mask

SCREEN_TOLERANCE = 0.02  # relative: screen fidelity's bound on each simulated objective


def refine_mask(
    values: np.ndarray, maximize: list[bool], simulated: list[bool], tolerance: float = SCREEN_TOLERANCE
) -> np.ndarray:
    """Rows of `values` (n points x k objectives, column j maximised if `maximize[j]`) that may be
    on the front at full fidelity, where the objectives marked `simulated` may each be off by
    `tolerance` of their value and the others are exact."""
    n, k = values.shape
    if n == 0:
        return np.zeros(0, dtype=bool)
    slack = np.abs(values) * np.where(np.asarray(simulated, dtype=bool), tolerance, 0.0)
    sign = np.where(np.asarray(maximize, dtype=bool), -1.0, 1.0)  # to minimise
    best, worst = sign * values - slack, sign * values + slack  # each point at its best and worst
    front = worst[pareto_mask(worst, [False] * k)]
    beaten = [bool(np.any(np.all(front <= b, axis=1) & np.any(front < b, axis=1))) for b in best]
    return ~np.array(beaten, dtype=bool)
