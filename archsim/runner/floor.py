"""How close any physical model can come to a set of measurements: the error floor.

More work never takes less time: on a fixed chip, a GEMM with more rows, a copy or all-reduce
of more bytes, an attention over a longer KV cache does not finish sooner. A model that honours
this (whatever its mechanisms and parameters) predicts a time that never falls as the case's
size grows, all else equal. Where the measurements themselves fall as the size grows (launch
skew between ranks, a library's heuristic switching kernels, a timer's resolution), every such
model errs, and `floor_pct` says by how much at least:

    floor = min over p, non-decreasing in size within each chain, of mean_i |p_i - m_i| / m_i

A chain is the cases of one kind that agree on every field but the size (SIZE_FIELD) and the
measurement; cases of equal size in a chain get one prediction (the same inputs give the same
time). Minimising a weighted sum of absolute deviations under an order constraint has an
optimum among the measured values themselves (L1 isotonic regression; Robertson, Wright and
Dykstra, "Order Restricted Statistical Inference", 1988), so a dynamic programme over a
chain's sizes and its measured values finds it exactly. Kinds without a size axis (a model
step) and chains of one size have a floor of zero.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

SIZE_FIELD = {
    "gemm": "M",
    "vector": "M",
    "copy": "bytes",
    "allreduce": "bytes",
    "attention_decode": "kv_len",
    "attention_prefill": "seq",
}
NOT_INPUTS = ("id", "measured_ms")  # fields of a case that are not what the model is given


def chain_key(case: dict) -> str | None:
    """Which chain a case belongs to: its kind and every input but its size, or None (no size axis)."""
    size = SIZE_FIELD.get(case["kind"])
    if size is None:
        return None
    rest = {k: v for k, v in case.items() if k not in NOT_INPUTS and k != size}
    return json.dumps(rest, sort_keys=True, default=str)


def chain_floor(sizes: list[float], measured: list[float]) -> float:
    """The least sum of relative absolute errors of predictions non-decreasing in size (equal
    sizes, one prediction) on one chain. Dynamic programme over the sizes in order: best[v] is
    the least cost so far with the last prediction at most candidate value v."""
    order = np.argsort(sizes, kind="stable")
    s, m = np.asarray(sizes, dtype=float)[order], np.asarray(measured, dtype=float)[order]
    values = np.unique(m)
    best = np.zeros(len(values))
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        cost = np.abs(values[:, None] - m[None, i:j]) / m[None, i:j]
        best = np.minimum.accumulate(best) + cost.sum(axis=1)
        i = j
    return float(best.min())


def floor_by_kind(cases: list[dict]) -> dict[str, float]:
    """Per kind, the least mean absolute error (percent) of any model whose time never falls as
    a case's size grows, all else equal (module docstring)."""
    chains: dict[tuple[str, str], list[dict]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        counts[case["kind"]] += 1
        key = chain_key(case)
        if key is not None:
            chains[(case["kind"], key)].append(case)
    total: dict[str, float] = defaultdict(float)
    for (kind, _key), chain in chains.items():
        size = SIZE_FIELD[kind]
        total[kind] += chain_floor([float(c[size]) for c in chain], [float(c["measured_ms"]) for c in chain])
    return {kind: 100.0 * total[kind] / n for kind, n in sorted(counts.items())}
