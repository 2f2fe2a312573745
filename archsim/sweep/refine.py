"""Which screened points a sweep re-runs at full fidelity (`--fidelity auto`): every point that
could be on a Pareto front of the spec's objectives once every point is simulated at full
fidelity, whichever way each objective is ranked (a spec names its objectives, not whether each
is maximised: `archsim pareto` is told that).

Screen fidelity (archsim/choose/fidelity.py) is within SCREEN_TOLERANCE of full on every objective
it simulates (docs/performance.md measures it); an objective of the design alone (`die_mm2:
area_mm2`) is exact. A point p is dropped only when another q beats it even with q at its worst
and p at its best within those bounds (q's objectives each moved by the tolerance against it,
p's for it): at full fidelity q then still dominates p, so p is on no front. Every point not so
dropped, for some ranking, is re-run: the fronts of the full-fidelity rows are then those of a
sweep run at full fidelity throughout (a dropped point is dominated, through a chain of dropped
points, by one re-run). Finding them: p is dominated by a pessimistic q iff by one on the front
of the pessimistic values (dominance is transitive), so each ranking costs one front and one
comparison of every point with it.
"""

from __future__ import annotations

import itertools

import numpy as np

from archsim.sweep.pareto import pareto_mask

SCREEN_TOLERANCE = 0.02  # relative: screen fidelity's bound on each simulated objective


def refine_mask(values: np.ndarray, simulated: list[bool], tolerance: float = SCREEN_TOLERANCE) -> np.ndarray:
    """Rows of `values` (n points x k objectives) that may be on a front of the objectives at full
    fidelity, for some ranking of each (maximised or minimised), where the objectives marked
    `simulated` may each be off by `tolerance` of their value and the others are exact."""
    n, k = values.shape
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    slack = np.abs(values) * np.where(np.asarray(simulated, dtype=bool), tolerance, 0.0)
    for maximize in itertools.product((True, False), repeat=k):
        sign = np.where(np.asarray(maximize), -1.0, 1.0)  # to minimise
        best, worst = sign * values - slack, sign * values + slack  # each point at its best and worst
        front = worst[pareto_mask(worst, [False] * k)]
        for i in np.flatnonzero(~keep):
            beaten = np.all(front <= best[i], axis=1) & np.any(front < best[i], axis=1)
            keep[i] = not beaten.any()
    return keep
