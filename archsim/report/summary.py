"""The summary `archsim run` prints by default: TTFT and TPOT first, throughput, memory, energy,
what bounds prefill and decode, and one line of diagnosis, all in plain words (the per-op
tables behind `--ops`). Times in seconds, shares of a step's or the run's time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from archsim.engine.timing import UNIT_BOUND, TimeByCause
from archsim.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from archsim.runner.energy import RunEnergy
    from archsim.runner.generation import RunResult, StepResult

UNIT_WORDS = {  # a binding unit (archsim/engine/timing.py UNITS) in words
    "matrix": "the matrix units",
    "vector": "the vector units",
    "hbm": "HBM bandwidth",
    "l2": "L2 bandwidth",
    "sram": "SRAM bandwidth",
    "latency": "memory latency",
    "staging": "the SRAM stages' feed",
    "link": "the chip-to-chip links",
    "fixed": "fixed per-kernel costs",
}

CAUSE_WORDS = {  # a term of TimeByCause (without `_s`) in words
    "compute": "computing",
    "hbm_bandwidth": "waiting on HBM bandwidth",
    "memory_latency": "waiting on memory latency",
    "l2": "waiting on L2 bandwidth",
    "load_issue": "waiting for loads to be issued",
    "stores": "draining stores",
    "held_clock": "running at the clock the power limit holds down",
    "fixed": "fixed per-kernel costs (launches, gaps, prologues)",
    "link": "collectives on the links",
    "schedule": "the step's schedule (a pipeline's bubble)",
}

REMEDY = {  # what would shorten a phase whose time goes mostly to a cause
    "compute": "a higher matrix peak or fp8 would help",
    "hbm_bandwidth": "more HBM bandwidth, a larger batch or fp8 weights would help",
    "memory_latency": "more requests in flight per core or less latency would help",
    "l2": "more L2 bandwidth or more reuse in L2 would help",
    "load_issue": "more load bandwidth per core would help",
    "stores": "faster stores would help",
    "held_clock": "a higher power limit or less energy per operation would help",
    "fixed": "fewer kernels (fusion) or a larger batch would help",
    "link": "faster links or another layout would help",
    "schedule": "more micro-batches or fewer pipeline stages would help",
}


def binding_shares(step: StepResult) -> list[tuple[str, float]]:
    """The step's op time by the unit that binds each op, as shares of the ops' total time,
    largest first: [("hbm", 0.83), ("fixed", 0.12), ...]."""
    by_unit: dict[str, float] = {}
    for r in step.ops:
        unit = r.timing.binding_unit
        by_unit[unit] = by_unit.get(unit, 0.0) + r.time_s
    total = sum(by_unit.values())
    if total <= 0:
        return []
    return sorted(((u, t / total) for u, t in by_unit.items()), key=lambda s: -s[1])


def bound_line(step: StepResult) -> str:
    """What bounds a step, e.g. "memory: HBM bandwidth, 83% of its time" (the ops it binds)."""
    shares = binding_shares(step)
    if not shares:
        return "-"
    unit, share = shares[0]
    return f"{UNIT_BOUND[unit]}: {UNIT_WORDS[unit].removeprefix('the ')}, {100 * share:.0f}% of its time"


def largest_cause(by: TimeByCause) -> tuple[str, float]:
    """The largest term of a time by cause and its share of the total."""
    total = by.total_s
    name = by.largest
    return name, (getattr(by, name + "_s") / total if total > 0 else 0.0)


def diagnosis(r: RunResult) -> str:
    """One line: the phase that takes most of the run, where its time goes and what would move it."""
    decode_s = r.decode_time_s
    phase, step = ("decode", r.decode) if r.decode is not None and decode_s > r.ttft_s else ("prefill", r.prefill)
    phase_s = decode_s if phase == "decode" else r.ttft_s
    share_of_run = phase_s / r.total_time_s if r.total_time_s > 0 else 1.0
    cause, share = largest_cause(step.by_cause)
    return (
        f"diagnosis: {phase} ({100 * share_of_run:.0f}% of the run) spends {100 * share:.0f}% of its "
        f"time {CAUSE_WORDS.get(cause, cause)}: {REMEDY[cause]}"
    )


def run_summary(r: RunResult, chip_name: str, model_name: str, energy: RunEnergy | None = None) -> Table:
    """The run at a glance: TTFT and TPOT in its first rows, then throughput, memory, energy and
    the bound of each phase."""
    from archsim.report.energy import format_joules

    t = Table(
        title=f"{model_name} on {chip_name}: batch {r.batch}, prompt {r.prompt_tokens}, generate {r.output_tokens}",
        show_header=False,
        title_justify="left",
    )
    t.add_column(style="bold", no_wrap=True)
    t.add_column(justify="left")
    t.add_row("TTFT, time to first token", format_seconds(r.ttft_s))
    t.add_row("TPOT, time per output token", format_seconds(r.tpot_s))
    t.add_row("decode throughput", f"{r.decode_tokens_per_s:,.0f} tokens/s")
    t.add_row("end-to-end throughput", f"{r.throughput_tokens_per_s:,.0f} tokens/s")
    t.add_row("total time", format_seconds(r.total_time_s))
    if len(r.decode_step_s):
        t.add_row(
            "decode step, first / last", f"{format_seconds(r.decode_step_s[0])} / {format_seconds(r.decode_step_s[-1])}"
        )
    fp = r.footprint
    t.add_row(
        "memory used",
        f"{format_bytes(fp.total_bytes)} of {format_bytes(fp.capacity_bytes)} "
        f"({100 * fp.total_bytes / fp.capacity_bytes:.0f}%)",
    )
    t.add_row(
        "  weights + KV + activations",
        f"{format_bytes(fp.weights_bytes)} + {format_bytes(fp.kv_cache_bytes)} + {format_bytes(fp.activations_bytes)}",
    )
    if energy is not None:
        t.add_row(
            "energy",
            f"{format_joules(energy.energy_j)}, {energy.tokens_per_j:,.3g} tokens/J, "
            f"{energy.average_power_w:,.0f} W avg, {energy.limit_w:,.0f} W limit",
        )
    t.add_row("prefill bound by", bound_line(r.prefill))
    if r.decode is not None:
        t.add_row("decode bound by", bound_line(r.decode))
    if r.interrupted:
        t.add_row("[red]interrupted[/red]", f"{len(r.decode_step_s)} decode steps simulated")
    return t
