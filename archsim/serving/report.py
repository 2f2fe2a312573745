"""A serving run as plain data and tables: the JSON record, the rich summary, the Perfetto
request timeline (Chrome trace event format, microseconds), per-instance figures over time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archsim.config.resolved import ResolvedConfig
from archsim.serving.metrics import ServeMetrics, Slo, Stats
from archsim.serving.result import InstanceRun, ServeResult
from archsim.serving.session_metrics import SessionMetrics
from archsim.units import format_seconds

OVER_TIME_POINTS = 1000  # samples per instance kept in the JSON
SESSION_TURN_ROWS = 8  # turn indices shown in the summary table (the JSON has all)


@dataclass(frozen=True, kw_only=True)
class InstanceStats:
    role: str
    index: int
    chip_name: str
    pool_blocks: int
    steps: int
    kv_use_mean: float  # time-averaged fraction of the pool in use
    kv_use_max: float
    batch_mean: float  # sequences per step, averaged over steps
    batch_max: int
    preemptions: int
    busy_share: float  # of the instance's span, time in steps
    queued_share: float  # of its span, time with requests waiting to be admitted
    running_mean: float  # time-averaged requests running


def instance_stats(run: InstanceRun) -> InstanceStats:
    tl, r = run.result.timeline, run.result
    span = tl.end_s - tl.start_s
    busy = tl.steps > 0
    use = tl.kv_blocks / run.pool.blocks
    return InstanceStats(
        role=run.role,
        index=run.index,
        chip_name=run.chip_name,
        pool_blocks=run.pool.blocks,
        steps=r.steps,
        kv_use_mean=float(np.sum(use * span) / np.sum(span)) if np.sum(span) > 0 else 0.0,
        kv_use_max=float(use.max()) if len(use) else 0.0,
        batch_mean=float(np.sum(tl.batch * tl.steps) / np.sum(tl.steps)) if busy.any() else 0.0,
        batch_max=int(tl.batch.max()) if len(tl.batch) else 0,
        preemptions=int(r.preemptions.sum()),
        busy_share=r.busy_s / float(np.sum(span)) if np.sum(span) > 0 else 0.0,
        queued_share=float(np.sum(span * (tl.waiting > 0)) / np.sum(span)) if np.sum(span) > 0 else 0.0,
        running_mean=float(np.sum(span * tl.running) / np.sum(span)) if np.sum(span) > 0 else 0.0,
    )


def _over_time(run: InstanceRun) -> dict:
    tl = run.result.timeline
    keep = np.unique(np.linspace(0, len(tl.start_s) - 1, min(len(tl.start_s), OVER_TIME_POINTS)).astype(int))
    return {
        "t_s": tl.start_s[keep].tolist(),
        "kv_cache_use": (tl.kv_blocks[keep] / run.pool.blocks).tolist(),
        "batch_size": tl.batch[keep].tolist(),
        "running": tl.running[keep].tolist(),
        "waiting": tl.waiting[keep].tolist(),
    }


def metrics_dict(m: ServeMetrics, slo: Slo) -> dict:
    d = {k: (v.as_dict() if isinstance(v, Stats) else v) for k, v in m.__dict__.items()}
    d["slo"] = {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s}
    d["littles_law"] = {
        "mean_in_system": d.pop("mean_in_system"),
        "arrival_rate_x_mean_e2e": d.pop("littles_law_in_system"),
    }
    return d


def serve_dict(result: ServeResult, m: ServeMetrics, slo: Slo, resolved: ResolvedConfig) -> dict:
    instances = []
    for run in result.instances:
        s = instance_stats(run)
        instances.append(
            {
                **s.__dict__,
                "block_size": run.pool.block_size,
                "pool_bytes": run.pool.pool_bytes,
                "weights_bytes": run.pool.weights_bytes,
                "activations_bytes": run.pool.activations_bytes,
                "computed_tokens": run.result.computed_tokens,
                "recomputed_tokens": run.result.recomputed_tokens,
                "over_time": _over_time(run),
            }
        )
    stats = [instance_stats(r) for r in result.instances]
    return {
        "config_hash": resolved.hash,
        **metrics_dict(m, slo),
        "kv_cache": {
            "use_mean": float(np.mean([s.kv_use_mean for s in stats])),
            "use_max": max(s.kv_use_max for s in stats),
        },
        "batch_size": {"mean": float(np.mean([s.batch_mean for s in stats])), "max": max(s.batch_max for s in stats)},
        "instances": instances,
        **({} if (sm := result.session_metrics()) is None else {"sessions": sm.as_dict()}),
        "config": resolved.as_dict(),
    }


def summary_tables(result: ServeResult, m: ServeMetrics, slo: Slo, title: str):
    """Two rich tables: latency distributions, then throughput, goodput and the instances."""
    from rich.table import Table

    lat = Table(title=title, title_justify="left")
    for col in ("latency", "mean", "p50", "p90", "p99"):
        lat.add_column(col, justify="left" if col == "latency" else "right")
    for name, s in (
        ("time to first token", m.ttft_s),
        ("time per output token", m.tpot_s),
        ("inter-token latency", m.itl_s),
        ("end-to-end", m.e2e_s),
        ("queueing delay", m.queue_s),
    ):
        lat.add_row(name, *(_seconds(v) for v in (s.mean, s.p50, s.p90, s.p99)))
    sm = result.session_metrics()
    if sm is not None:
        for name, s in _session_rows(sm):
            lat.add_row(name, *(_seconds(v) for v in (s.mean, s.p50, s.p90, s.p99)))
    t = Table(show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    t.add_row("requests served / refused", f"{m.requests:,} / {m.rejected:,}")
    t.add_row("duration", f"{m.duration_s:,.0f} s" if m.duration_s >= 100 else format_seconds(m.duration_s))
    t.add_row("request throughput", f"{m.requests_per_s:,.2f} requests/s")
    t.add_row("output token throughput", f"{m.throughput_tokens_per_s:,.0f} tokens/s")
    t.add_row("input token throughput", f"{m.input_tokens_per_s:,.0f} tokens/s")
    slos = (
        ", ".join(
            f"{k} <= {format_seconds(v)}" for k, v in (("TTFT", slo.ttft_s), ("TPOT", slo.tpot_s)) if v is not None
        )
        or "none set"
    )
    t.add_row(f"goodput ({slos})", f"{m.goodput_requests_per_s:,.2f} requests/s ({100 * m.slo_attainment:.1f}% attain)")
    t.add_row("preemptions", f"{m.preemptions:,}" + (f" ({m.swaps:,} by swap)" if m.swaps else ""))
    t.add_row("host share of the time between tokens", f"{100 * m.host_share:.1f}%")
    if m.cached_tokens or m.offload_hit_tokens:
        host = f", {m.offload_hit_tokens:,} of them from host memory" if m.offload_hit_tokens else ""
        t.add_row(
            "prefix cache: prompt tokens found",
            f"{100 * m.prefix_hit_rate:.1f}% ({m.cached_tokens + m.offload_hit_tokens:,} tokens{host})",
        )
    if sm is not None:
        t.add_row("sessions / turns served", f"{sm.sessions:,} / {sm.turns:,}")
        t.add_row(
            "sessions: earlier turns' context found cached",
            f"{100 * sm.context_hit_rate:.1f}% ({sm.reused_tokens:,} of {sm.context_tokens:,} tokens)",
        )
    if m.tokens_per_verify is not None:
        t.add_row("speculative decoding: tokens per verify", f"{m.tokens_per_verify:.2f}")
    if np.isfinite(m.mean_in_system):
        t.add_row(
            "requests in system: mean / rate x mean e2e", f"{m.mean_in_system:.2f} / {m.littles_law_in_system:.2f}"
        )
    for run in result.instances:
        st = instance_stats(run)
        alone = st.role == "colocated" and len(result.instances) == 1
        name = "" if alone else f"{st.role} {st.index}: "
        t.add_row(
            f"{name}KV cache use mean / max",
            f"{100 * st.kv_use_mean:.0f}% / {100 * st.kv_use_max:.0f}% of {st.pool_blocks:,} blocks"
            + (f" (and {run.pool.state_slots:,} state slots)" if run.pool.state_slots else ""),
        )
        t.add_row(f"{name}sequences per step mean / max", f"{st.batch_mean:.1f} / {st.batch_max} ({st.steps:,} steps)")
        t.add_row(
            f"{name}utilisation: in steps / requests queued",
            f"{100 * st.busy_share:.0f}% / {100 * st.queued_share:.0f}% of the time",
        )
    return lat, t


def _session_rows(sm: SessionMetrics) -> list[tuple[str, Stats]]:
    """TTFT by turn index (the first SESSION_TURN_ROWS - 1 and the last; over all turns it is
    the requests' TTFT) and the sessions' durations."""
    by = sm.ttft_by_turn
    shown = by if len(by) <= SESSION_TURN_ROWS else (*by[: SESSION_TURN_ROWS - 1], by[-1])
    rows = [(f"time to first token, turn {t.turn} ({t.count:,})", t.ttft_s) for t in shown]
    return rows + [("session duration", sm.duration_s)]


def _seconds(t: float) -> str:
    return "-" if not np.isfinite(t) else "0" if t == 0 else format_seconds(t)


def perfetto_trace(result: ServeResult) -> dict:
    """Each request a track (queued, prefill, KV transfer, decode); per instance, counters of
    sequences per step and KV blocks in use. Load it in https://ui.perfetto.dev."""
    us = 1e6
    t = result.times
    events: list[dict] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "requests"}}]
    for p, run in enumerate(result.instances, start=1):
        events.append(
            {"ph": "M", "pid": p, "name": "process_name", "args": {"name": f"{run.role} {run.index} ({run.chip_name})"}}
        )
        tl = run.result.timeline
        for start, batch, kv in zip(tl.start_s.tolist(), tl.batch.tolist(), tl.kv_blocks.tolist()):
            events.append({"ph": "C", "pid": p, "name": "sequences per step", "ts": start * us, "args": {"n": batch}})
            events.append({"ph": "C", "pid": p, "name": "KV blocks in use", "ts": start * us, "args": {"n": kv}})
    transfer = result.kv_transfer_s
    for i, req in enumerate(result.served.tolist()):
        args = {
            "request": req,
            "prompt_tokens": int(t.prompt_tokens[i]),
            "output_tokens": int(t.output_tokens[i]),
            "preemptions": int(result.preemptions[i]),
        }
        spans = [
            ("queued", t.arrival_s[i], t.first_scheduled_s[i]),
            ("prefill", t.first_scheduled_s[i], t.first_token_s[i]),
        ]
        if transfer is not None and np.isfinite(transfer[i, 0]):
            spans += [("kv transfer", transfer[i, 0], transfer[i, 1]), ("decode", transfer[i, 1], t.finish_s[i])]
        else:
            spans.append(("decode", t.first_token_s[i], t.finish_s[i]))
        for name, a, b in spans:
            if b > a:
                events.append(
                    {
                        "ph": "X",
                        "pid": 0,
                        "tid": req,
                        "name": name,
                        "ts": float(a) * us,
                        "dur": float(b - a) * us,
                        "args": args,
                    }
                )
    return {"traceEvents": events, "displayTimeUnit": "ms"}
