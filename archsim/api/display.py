"""How the API's results show themselves: a one-line `repr` (well under 2,000 characters, never
the arrays or per-op records a result holds) and a small HTML table for notebooks; and the
command line's syntax for a value given in Python (`"200ms"` for seconds, as `--slo-ttft`
takes it)."""

from __future__ import annotations

from html import escape
from typing import Any

from archsim.units import format_seconds

MAX_REPR = 400  # characters of a one-line repr (the longest names cut with '…')


def short(text: str, limit: int = MAX_REPR) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def html_table(title: str, rows: list[tuple[str, str]]) -> str:
    """A two-column HTML table under a caption, every text escaped."""
    body = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<table><caption style='text-align:left'><b>{escape(title)}</b></caption>{body}</table>"


def run_rows(report: Any) -> list[tuple[str, str]]:
    """The headline numbers of a RunReport, as `archsim run`'s summary gives them."""
    from archsim.units import format_bytes

    r = report.result
    fp = r.footprint
    rows = [
        ("TTFT (prefill)", format_seconds(r.ttft_s)),
        ("TPOT (mean decode step)", format_seconds(r.tpot_s)),
        ("decode throughput", f"{r.decode_tokens_per_s:,.0f} tokens/s"),
        ("end-to-end throughput", f"{r.throughput_tokens_per_s:,.0f} tokens/s"),
        ("memory used", f"{format_bytes(fp.total_bytes)} of {format_bytes(fp.capacity_bytes)}"),
    ]
    if report.energy_j is not None:
        rows.append(("energy", f"{report.energy_j:,.3g} J, {report.tokens_per_j:,.3g} tokens/J"))
    rows.append(("config hash", report.config_hash))
    return rows


def run_title(report: Any) -> str:
    s = report.workload.workload.scenario
    layout = "" if report.parallelism.is_single else f", {report.parallelism.label()}"
    return (
        f"{report.workload.name} on {report.hardware.name}{layout}: batch {s.batch}, prompt {s.prompt_tokens}, "
        f"generate {s.output_tokens}"
    )


def run_repr(report: Any) -> str:
    r = report.result
    return short(
        f"RunReport({run_title(report)}: TTFT {format_seconds(r.ttft_s)}, TPOT {format_seconds(r.tpot_s)}, "
        f"{r.decode_tokens_per_s:,.0f} tokens/s decode, config {report.config_hash})"
    )


def serve_rows(report: Any) -> list[tuple[str, str]]:
    m = report.metrics
    return [
        ("requests served / rejected", f"{m.requests} / {m.rejected}"),
        ("TTFT mean / p99", f"{format_seconds(m.ttft_s.mean)} / {format_seconds(m.ttft_s.p99)}"),
        ("TPOT mean / p99", f"{format_seconds(m.tpot_s.mean)} / {format_seconds(m.tpot_s.p99)}"),
        ("output tokens/s", f"{m.throughput_tokens_per_s:,.0f}"),
        ("goodput", f"{m.goodput_requests_per_s:,.3g} requests/s"),
        ("SLO attainment", f"{100 * m.slo_attainment:.1f}%"),
        ("config hash", report.config_hash),
    ]


def serve_repr(report: Any) -> str:
    m = report.metrics
    return short(
        f"ServeReport({m.requests} requests: TTFT p99 {format_seconds(m.ttft_s.p99)}, TPOT p99 "
        f"{format_seconds(m.tpot_s.p99)}, {m.throughput_tokens_per_s:,.0f} output tokens/s, "
        f"SLO attainment {100 * m.slo_attainment:.1f}%, config {report.config_hash})"
    )
