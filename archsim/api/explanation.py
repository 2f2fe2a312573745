"""Why a run or an op takes the time it does, and what would move it: its time split into named
terms (computing, HBM bandwidth, memory latency, L2, launches, the power-held clock, ...), the
resource that binds it, and the elasticity of its time to each resource, measured by what-if
simulations with that resource doubled (halved for fixed costs) and said in plain sentences.

Elasticity e = ln(t_before / t_after) / ln(factor): the share of a resource's gain that shows
up as speed. e = 1: doubling the resource halves the time (it binds alone); e = 0: it does not
matter. A run is explained by its prefill step (TTFT) and its first decode step (TPOT), each
simulated once more per resource: cheap what-ifs, not whole runs. Times in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from archsim.engine.timing import UNIT_BOUND, TimeByCause
from archsim.errors import ConfigError
from archsim.report.summary import UNIT_WORDS
from archsim.units import format_seconds

if TYPE_CHECKING:
    from archsim.api.inputs import Hardware
    from archsim.choose import Condition
    from archsim.graph.ops import Op

DOUBLED = 2.0  # the what-if factor of a rate (bandwidth, peak, clock, power limit)
HALVED = 0.5  # and of a fixed cost (per-kernel overheads)
SHOWN_TERM = 0.005  # terms below this share of the time are left out of the sentences

TERM_WORDS = {  # TimeByCause's terms (without `_s`) in words
    "compute": "computing",
    "hbm_bandwidth": "HBM bandwidth",
    "memory_latency": "memory latency",
    "l2": "L2 bandwidth",
    "load_issue": "issuing loads",
    "stores": "draining stores",
    "held_clock": "the power-held clock",
    "fixed": "launches and fixed per-kernel costs",
    "link": "collectives on the links",
    "schedule": "the schedule (bubble, hidden collectives)",
}


@dataclass(frozen=True)
class Lever:
    """A resource, the what-if that changes it, and the time before and after."""

    resource: str  # "HBM bandwidth"
    setting: str  # what the what-if set, e.g. "hbm.bandwidth=9.6 TB/s"
    factor: float  # the resource multiplied by this (2: doubled; 0.5: a cost halved)
    before_s: float
    after_s: float

    @property
    def speedup(self) -> float:
        return self.before_s / self.after_s if self.after_s > 0 else math.inf

    @property
    def elasticity(self) -> float:
        """ln(before / after) / ln(gain), the gain being the factor of a rate and 1/factor of a cost."""
        gain = self.factor if self.factor > 1 else 1 / self.factor
        return math.log(self.speedup) / math.log(gain) if self.after_s > 0 else math.inf

    def sentence(self) -> str:
        change = "doubling" if self.factor == DOUBLED else "halving" if self.factor == HALVED else f"x{self.factor:g}"
        return (
            f"{change} {self.resource} would make it {format_seconds(self.after_s)} "
            f"({self.speedup:.2f}x faster; elasticity {self.elasticity:.2f})"
        )


@dataclass(frozen=True)
class Part:
    """One step of a run, or one op: its time by cause, what binds it, and its levers."""

    name: str
    time_s: float
    by_cause: TimeByCause
    binding_unit: str  # UNITS
    binding_share: float  # that unit's utilisation (an op), or the share of the time its ops take (a step)
    levers: tuple[Lever, ...]
    skipped: tuple[str, ...] = ()  # what-ifs this chip cannot take, and why
    step: bool = False  # a step of ops (binding_share: a share of its time), not one op

    @property
    def bound(self) -> str:
        return UNIT_BOUND[self.binding_unit]

    def terms(self) -> list[tuple[str, float]]:
        """The named terms of its time, largest first: [("HBM bandwidth", seconds), ...]."""
        named = [(f.name.removesuffix("_s"), getattr(self.by_cause, f.name)) for f in fields(self.by_cause)]
        return sorted(((TERM_WORDS[n], s) for n, s in named if s != 0.0), key=lambda t: -abs(t[1]))

    def best(self) -> Lever | None:
        return max(self.levers, key=lambda lv: lv.elasticity, default=None)

    def sentences(self) -> list[str]:
        total = self.time_s or 1.0
        shown = [
            f"{w} {format_seconds(s)} ({100 * s / total:.0f}%)" for w, s in self.terms() if abs(s) >= SHOWN_TERM * total
        ]
        unit, share = UNIT_WORDS[self.binding_unit], f"{100 * self.binding_share:.0f}%"
        lines = [
            f"{self.name} takes {format_seconds(self.time_s)}: " + ", ".join(shown) + ".",
            f"It is {self.bound}-bound: "
            + (f"ops bound by {unit} take {share} of its time." if self.step else f"{unit} at {share} of its peak."),
        ]
        lines += [f"  {lv.sentence()}." for lv in sorted(self.levers, key=lambda lv: -lv.elasticity)]
        best = self.best()
        if best is not None:
            lines.append(
                f"What moves it most: {best.resource} (each 1% more gives {best.elasticity:.2f}% less time)."
                if best.elasticity >= 0.1
                else "No single resource moves it much: its time is spread over several causes."
            )
        lines += [f"  (no what-if of {s})" for s in self.skipped]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "time_s": self.time_s,
            "by_cause": self.by_cause.as_dict(),
            "bound": self.bound,
            "binding_unit": self.binding_unit,
            "binding_share": self.binding_share,
            "levers": [
                {
                    "resource": lv.resource,
                    "setting": lv.setting,
                    "factor": lv.factor,
                    "before_s": lv.before_s,
                    "after_s": lv.after_s,
                    "speedup": lv.speedup,
                    "elasticity": lv.elasticity,
                }
                for lv in self.levers
            ],
            "skipped": list(self.skipped),
        }


@dataclass(frozen=True)
class Explanation:
    """Why a run (its prefill and first decode step) or an op takes its time, in sentences."""

    title: str
    parts: tuple[Part, ...] = field(default=())

    def lines(self) -> list[str]:
        out = [self.title]
        for part in self.parts:
            out += ["", *part.sentences()]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return f"Explanation({self.title!r}, {len(self.parts)} parts)"

    def _repr_html_(self) -> str:
        from html import escape

        return "<pre>" + escape(str(self)) + "</pre>"

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "parts": [p.to_dict() for p in self.parts]}


def levers(hardware: Hardware) -> list[tuple[str, float, dict[str, str]]]:
    """The what-ifs of a chip: (resource, factor, the values set), each a file value or a total
    (archsim/config/derived.py) doubled, or a fixed cost halved."""
    from archsim.dtypes import DType

    chip = hardware.system.chip
    o = chip.overheads
    out = [
        ("HBM bandwidth", DOUBLED, {"hbm.bandwidth": f"{DOUBLED * chip.hbm.peak_bandwidth_bytes_per_s!r} B/s"}),
        ("the matrix peak", DOUBLED, {"cores.matrix_units.peak": f"{DOUBLED * chip.peak_flops(DType.BF16)!r} FLOP/s"}),
        ("L2 bandwidth", DOUBLED, {"l2.bandwidth": f"{DOUBLED * chip.l2.bandwidth_bytes_per_s!r} B/s"}),
    ]
    clock = {"clock": f"{DOUBLED * chip.clock_hz!r} Hz"}
    if chip.power is not None:
        clock["power.max_clock"] = f"{DOUBLED * chip.power.max_clock_hz!r} Hz"
        out.append(("the power limit", DOUBLED, {"power.limit": f"{DOUBLED * chip.power.limit_w!r} W"}))
    out.append(("the clock", DOUBLED, clock))
    costs = {f"overheads.{k}": f"{HALVED * v!r} s" for k, v in (("kernel", o.kernel_s), ("gap", o.gap_s)) if v}
    costs |= {f"overheads.{k}": f"{HALVED * v!r} s" for k, v in (("launch", o.launch_s),) if v}
    prologues = (("matrix_setup", o.matrix_setup_cycles), ("attention_setup", o.attention_setup_cycles))
    costs |= {f"overheads.{k}": f"{HALVED * v!r} cycles" for k, v in prologues if v}
    if costs:
        out.append(("the fixed per-kernel costs", HALVED, costs))
    return out


def what_ifs(hardware: Hardware, time_at: Callable[[Hardware], float], before_s: float) -> tuple[tuple, tuple]:
    """(levers, skipped): `time_at` on the hardware with each what-if applied."""
    from archsim.api.inputs import with_params

    done, skipped = [], []
    for resource, factor, values in levers(hardware):
        try:
            changed = with_params(hardware, values, "explain")
        except ConfigError as err:  # a what-if this chip's file cannot take (a bound it would pass)
            skipped.append(f"{resource}: {err.problems[0].message}")
            continue
        setting = ", ".join(f"{k}={v}" for k, v in values.items())
        done.append(Lever(resource, setting, factor, before_s, time_at(changed)))
    return tuple(done), tuple(skipped)


def explain_run(report: Any) -> Explanation:
    """A RunReport's prefill step (TTFT) and first decode step (TPOT), each explained (see the
    module). (Typed loosely: archsim.api.results imports this module for `RunReport.explain`.)"""
    from archsim.report.summary import binding_shares
    from archsim.runner.generation import simulate_step

    w, par = report.workload.workload, report.parallelism
    r = report.result
    steps = [("prefill step (TTFT)", r.prefill)]
    if r.decode is not None:
        steps.append((f"first decode step (TPOT; KV {r.decode.step.kv_len})", r.decode))
    parts = []
    for name, step in steps:

        def time_at(hw: Hardware, step=step) -> float:
            return simulate_step(w, hw.system, step.step, par).time_s

        shares = binding_shares(step)
        unit, share = shares[0] if shares else ("fixed", 0.0)
        done, skipped = what_ifs(report.hardware, time_at, step.time_s)
        parts.append(Part(name, step.time_s, step.by_cause, unit, share, done, skipped, step=True))
    s = w.scenario
    title = (
        f"{w.model.name} on {report.hardware.name}: batch {s.batch}, prompt {s.prompt_tokens}, "
        f"generate {s.output_tokens}: TTFT {format_seconds(r.ttft_s)}, TPOT {format_seconds(r.tpot_s)}; decode "
        f"takes {100 * r.decode_time_s / r.total_time_s if r.total_time_s else 0:.0f}% of the run"
    )
    return Explanation(title, tuple(parts))


def explain_op(op: Op, hardware: Hardware, condition: Condition | None = None, label: str = "") -> Explanation:
    """One op on a chip explained (see the module); `label` names it (default: its kind and shape)."""
    from archsim.choose import Condition, simulate_op

    cond = Condition.GRAPH if condition is None else condition

    def time_at(hw: Hardware) -> float:
        return simulate_op(op, hw.system.chip, cond).time_s

    t = simulate_op(op, hardware.system.chip, cond)
    done, skipped = what_ifs(hardware, time_at, t.time_s)
    name = label or op_label(op)
    unit = t.binding_unit
    part = Part(name, t.time_s, t.by_cause, unit, t.unit_utilisation[unit], done, skipped)
    return Explanation(f"{name} on {hardware.name}", (part,))


def op_label(op: Op) -> str:
    from archsim.graph.ops import OpKind

    if op.kind is OpKind.GEMM:
        return f"gemm {op.m}x{op.k}x{op.n} ({op.dtype.value})"
    if op.kind is OpKind.ATTENTION:
        return f"attention batch {op.batch}, {op.heads} heads, q {op.q_len}, KV {op.kv_len} ({op.dtype.value})"
    return f"{op.kind.value} ({op.dtype.value})"
