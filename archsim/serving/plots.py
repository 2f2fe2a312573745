"""Figures of a serving run (matplotlib with the Agg backend, imported only when plotting):
latency CDFs, KV-cache use over time and sequences per step over time."""

from __future__ import annotations

import numpy as np

from archsim.serving.simulate import ServeResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _cdf(ax, values: np.ndarray, weights: np.ndarray | None, label: str) -> None:
    values = np.asarray(values, dtype=float)
    weights = np.ones(len(values)) if weights is None else weights.astype(float)
    keep = np.isfinite(values)
    values, weights = values[keep], weights[keep]
    if len(values) == 0:
        ax.set_title(f"{label}: no samples")
        return
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    ax.step(values[order] * 1e3, cum / cum[-1], where="post")
    ax.set_xlabel(f"{label} (ms)")
    ax.set_ylabel("fraction of samples")
    ax.grid(alpha=0.3)


def latency_cdfs(result: ServeResult, title: str):
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    t = result.times
    _cdf(axes[0, 0], t.ttft_s, None, "time to first token")
    _cdf(axes[0, 1], t.tpot_s, None, "time per output token")
    _cdf(axes[1, 0], result.itl_s, result.itl_weight, "inter-token latency")
    _cdf(axes[1, 1], t.e2e_s, None, "end-to-end latency")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def over_time(result: ServeResult, title: str, what: str):
    """`what`: 'kv' (fraction of the KV pool in use) or 'batch' (sequences per step)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    for run in result.instances:
        tl = run.result.timeline
        y = tl.kv_blocks / run.pool.blocks if what == "kv" else tl.batch
        ax.step(tl.start_s, y, where="post", linewidth=0.8, label=f"{run.role} {run.index}")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KV cache in use (fraction of pool)" if what == "kv" else "sequences per step")
    if len(result.instances) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    ax.set_title(title)
    fig.tight_layout()
    return fig
