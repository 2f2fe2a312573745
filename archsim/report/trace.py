"""Chrome trace-event JSON of simulated steps and ops: open it in Perfetto (ui.perfetto.dev).

Timestamps and durations are in microseconds. Each traced step is one process with tracks for
the step, its ops (one after another, each as long as its `OpTiming`), its kernels (program
phases and the fixed overhead before each launch), and a compute and a DMA track per core. The
engine simulates identical cores once, so each group of identical cores is drawn once, on the
tracks of its first core, its spans labelled `cores i-j (N identical)`. Counters give HBM read
and write bandwidth, the share of cores busy on matrix or vector units, and the chip's power
(`counters.py`): each op's kernels at their average power (archsim/choose/timed.py) and the floor at
its clock between them, so that it integrates to the op's energy.

Ops that repeat (once per layer) are drawn in full for one layer; one span on the ops track
stands for the other repeats, so the step span equals the simulated step time. When a trace
would exceed the event budget, consecutive tiles of a core group are merged into one span.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from archsim.engine.timing import OpTiming
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.power import EnergySplit, floor_power_w
from archsim.report.counters import COUNTER_POINTS, POWER_COUNTER, moved_bytes, phase_counters
from archsim.report.export import write_text
from archsim.report.replay import OpReplay, replay_op
from archsim.runner.generation import StepResult

if TYPE_CHECKING:
    from archsim.engine.simulate import PhaseTimeline
    from archsim.program import Phase

US_PER_S = 1e6
EVENT_BUDGET = 250_000  # tile spans at most: ~140 bytes each keeps a trace near 35 MB, under 50 MB
DIGITS = 3  # decimals of a microsecond timestamp: whole ns, the resolution Perfetto keeps

STEP_TID, OPS_TID, KERNELS_TID, FIRST_CORE_TID = 1, 2, 3, 10


@dataclass(frozen=True, eq=False)
class TracedOp:
    op: Op
    timing: OpTiming
    replay: OpReplay
    energy: EnergySplit = field(default_factory=EnergySplit)
    kernel_power_w: float = 0.0  # its kernels' average power, floor included


def traced(op: Op, timing: OpTiming, chip: Chip, standalone: bool = False) -> TracedOp:
    from archsim.choose import Condition, time_op

    t = time_op(op, chip, Condition.STANDALONE if standalone else Condition.GRAPH)
    return TracedOp(op, timing, replay_op(op, chip), t.energy, t.kernel_power_w)


@dataclass(frozen=True, eq=False)
class _Plan:
    title: str
    start_s: float
    ops: tuple[TracedOp, ...]
    standalone: bool
    step: StepResult | None


class _Track:
    """The events of one process (one traced step or op) on named tracks, times in cycles."""

    def __init__(self, pid: int, clock_hz: float, events: list[dict[str, Any]]):
        self.pid, self.clock_hz, self.events = pid, clock_hz, events
        self.core_tracks: dict[str, tuple[int, tuple[int, bool]]] = {}  # label -> (tid, (first core, DMA))

    def us(self, cycles: float) -> float:
        return round(cycles / self.clock_hz * US_PER_S, DIGITS)

    def span(self, tid: int, name: str, start: float, end: float, args: dict[str, Any] | None = None) -> None:
        ts = self.us(start)
        ev: dict[str, Any] = {
            "name": name,
            "ph": "X",
            "ts": ts,
            "dur": round(max(0.0, self.us(end) - ts), DIGITS),
            "pid": self.pid,
            "tid": tid,
        }
        if args:
            ev["args"] = args
        self.events.append(ev)

    def spans(
        self,
        tid: int,
        name: str,
        starts: np.ndarray,
        ends: np.ndarray,
        keep: np.ndarray,
        args: list[dict[str, Any]],
    ) -> None:
        """Many spans on one track at once (the `keep` ones), rounded as `span` rounds them."""
        ts = np.round(starts / self.clock_hz * US_PER_S, DIGITS)
        dur = np.round(np.maximum(np.round(ends / self.clock_hz * US_PER_S, DIGITS) - ts, 0.0), DIGITS)
        pid = self.pid
        self.events.extend(
            {"name": name, "ph": "X", "ts": a, "dur": d, "pid": pid, "tid": tid, "args": g}
            for a, d, g, k in zip(ts.tolist(), dur.tolist(), args, keep.tolist())
            if k
        )

    def counter(self, name: str, times: np.ndarray, values: np.ndarray) -> None:
        """Samples of a counter `what (unit)`: Perfetto names its track `what unit`."""
        what, _, unit = name.rpartition(" (")
        key = unit.rstrip(")") if what else "value"
        what = what or name
        out: list[dict[str, Any]] = []
        for t, v in zip(times.tolist(), values.tolist()):
            ts, v = self.us(t), round(v, 3)
            if out and out[-1]["ts"] == ts:  # within a nanosecond: the later value holds
                out.pop()
            if not out or out[-1]["args"][key] != v:
                out.append({"name": what, "ph": "C", "ts": ts, "pid": self.pid, "tid": 0, "args": {key: v}})
        self.events.extend(out)

    def core_tid(self, first: int, dma: bool) -> int:
        """The compute or DMA track of core `first`, which also draws the cores identical to it."""
        label = f"core {first} " + ("DMA" if dma else "compute")
        if label not in self.core_tracks:
            self.core_tracks[label] = (FIRST_CORE_TID + len(self.core_tracks), (first, dma))
        return self.core_tracks[label][0]

    def metadata(self, name: str, sort_index: int) -> list[dict[str, Any]]:
        def meta(kind: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
            return {"name": kind, "ph": "M", "ts": 0, "pid": self.pid, "tid": tid, "args": args}

        out = [meta("process_name", 0, {"name": name}), meta("process_sort_index", 0, {"sort_index": sort_index})]
        named = [(STEP_TID, "step"), (OPS_TID, "ops"), (KERNELS_TID, "kernels")]
        ordered = sorted(self.core_tracks.items(), key=lambda kv: kv[1][1])
        named += [(tid, label) for label, (tid, _) in ordered]
        for i, (tid, label) in enumerate(named):
            out += [meta("thread_name", tid, {"name": label}), meta("thread_sort_index", tid, {"sort_index": i})]
        return out


def core_group(first: int, count: int) -> str:
    """Label of a group of identical cores: `cores 0-119 (120 identical)` or `core 5`."""
    return f"core {first}" if count == 1 else f"cores {first}-{first + count - 1} ({count} identical)"


def _draw_phase(track: _Track, phase: Phase, tl: PhaseTimeline, start: float, merge: int, name: str) -> None:
    """Compute and DMA spans of every group of identical cores, on the tracks of its first core;
    `merge` consecutive tiles per span."""
    first_core = 0
    loaded = phase.hbm_bytes + phase.l2_bytes
    for s, weight in enumerate(phase.core_weight.tolist()):
        lo, hi = int(phase.core_start[s]), int(phase.core_start[s + 1])
        first, group, first_core = first_core, core_group(first_core, weight), first_core + weight
        if hi == lo:
            continue
        heads = np.arange(lo, hi, merge)
        tails = np.minimum(heads + merge, hi) - 1
        tiles = [str(h) if h == t else f"{h}-{t}" for h, t in zip((heads - lo).tolist(), (tails - lo).tolist())]
        busy = np.add.reduceat(phase.compute_cycles[lo:hi], heads - lo)
        c_start = tl.compute_end[heads] - phase.compute_cycles[heads]
        track.spans(
            track.core_tid(first, dma=False),
            name,
            start + c_start,
            start + tl.compute_end[tails],
            busy > 0,
            [{"cores": group, "tile": t, "busy cycles": b} for t, b in zip(tiles, busy.tolist())],
        )
        nbytes = np.add.reduceat(loaded[lo:hi], heads - lo)
        track.spans(
            track.core_tid(first, dma=True),
            f"load {name}",
            start + tl.load_issue[heads],
            start + tl.load_done[tails],
            nbytes > 0,
            [{"cores": group, "tile": t, "bytes": b} for t, b in zip(tiles, nbytes.tolist())],
        )


def _op_args(t: TracedOp) -> dict[str, Any]:
    tm, op = t.timing, t.op
    return {
        "kind": op.kind.value,
        "repeat": op.repeat,
        "bound": tm.bound.value,
        "time (us)": tm.time_s * US_PER_S,
        "cycles": tm.cycles,
        "compute cycles": tm.compute_cycles,
        "stall cycles": tm.stall_cycles,
        "overhead cycles": tm.overhead_cycles,
        "HBM bytes": tm.hbm_bytes,
        "FLOPs": tm.flops,
        "utilisation": round(tm.utilisation, 4),
        "binding unit": tm.binding_unit,
        "unit utilisation": {u: round(x, 4) for u, x in tm.unit_utilisation.items()},
        "time by cause (us)": {k.removesuffix("_s"): v * US_PER_S for k, v in tm.by_cause.as_dict().items() if v},
        "kernels": tm.kernels,
        "program": f"best of {t.replay.candidates} candidates, {len(t.replay.program.phases)} phases",
    }


def _draw_op(track: _Track, t: TracedOp, start: float, merge: int, standalone: bool, chip: Chip, points: int) -> float:
    """The op span, its kernels and tiles from cycle `start`; returns the cycle it ends."""
    op, tm, program = t.op, t.timing, t.replay.program
    end = start + tm.cycles
    track.span(OPS_TID, op.name or op.kind.value, start, end, _op_args(t))
    k = max(1, op.kernels)
    lead = chip.overheads.launch_s * chip.clock_hz if standalone else 0.0
    n_launch = k * t.replay.launches
    gap = max(0.0, (tm.cycles - k * t.replay.played_cycles - lead) / n_launch) if n_launch else 0.0
    cur = start
    power = chip.power is not None
    floor_w = floor_power_w(chip.power, tm.clock_hz or chip.clock_hz) if chip.power else 0.0
    if power:
        track.counter(POWER_COUNTER, np.array([start]), np.array([floor_w]))
    if lead:
        track.span(KERNELS_TID, "launch (standalone)", cur, cur + lead)
        cur += lead
    for _ in range(k):
        for phase, tl in zip(program.phases, t.replay.timelines):
            if phase.new_kernel and gap > 0:
                track.span(KERNELS_TID, "kernel overhead", cur, cur + gap)
                if power:
                    track.counter(POWER_COUNTER, np.array([cur]), np.array([floor_w]))
                cur += gap
            played = int(tl.total_cycles)
            track.span(
                KERNELS_TID,
                phase.label or op.name,
                cur,
                cur + played,
                {"active cores": phase.active_cores, "tiles of distinct cores": phase.entries},
            )
            if phase.entries:
                _draw_phase(track, phase, tl, cur, merge, op.name or op.kind.value)
                for name, (x, v) in phase_counters(phase, tl, chip, program.matrix, points).items():
                    track.counter(name, cur + x, v)
                if power:
                    watts = np.array([t.kernel_power_w, floor_w])
                    track.counter(POWER_COUNTER, np.array([cur, cur + played]), watts)
            cur += played
    return end


def _draw_repeats(track: _Track, ops: tuple[TracedOp, ...], start: float, chip: Chip) -> float:
    """One span for the repeats of per-layer ops not drawn; counters at their mean meanwhile."""
    rep = [t for t in ops if t.op.repeat > 1]
    cycles = sum((t.op.repeat - 1) * t.timing.cycles for t in rep)
    repeats = sorted({t.op.repeat for t in rep})
    label = f"layers 2-{repeats[0]} (as layer 1)" if len(repeats) == 1 else "other repeats of the per-layer ops"
    track.span(OPS_TID, label, start, start + cycles, {"ops": [t.op.name for t in rep], "cycles": cycles})
    layer_cycles = sum(t.timing.cycles for t in rep) or 1
    moved = [[max(1, t.op.kernels) * b for b in moved_bytes(t.replay.program)] for t in rep]
    mean = {"HBM read (GB/s)": sum(m[0] for m in moved), "HBM write (GB/s)": sum(m[1] for m in moved)}
    mean = {k: v / layer_cycles * chip.clock_hz / 1e9 for k, v in mean.items()}
    for matrix, name in ((True, "matrix"), (False, "vector")):
        busy = sum(t.timing.busy_core_cycles for t in rep if t.replay.program.matrix is matrix)
        mean[f"{name} units busy (% of cores)"] = 100.0 * busy / (chip.cores * layer_cycles)
    for name, value in mean.items():
        track.counter(name, np.array([start, start + cycles]), np.array([value, 0.0]))
    if chip.power is not None and cycles > 0:
        joules = sum((t.op.repeat - 1) * t.energy.total_j for t in rep)
        track.counter(POWER_COUNTER, np.array([start]), np.array([joules / cycles * chip.clock_hz]))
    return start + cycles


def _span_count(plans: list[_Plan]) -> int:
    return sum(
        2 * max(1, t.op.kernels) * sum(ph.entries for ph in t.replay.program.phases) for p in plans for t in p.ops
    )


class TraceBuilder:
    """Collects steps and ops to trace, then lays them out as one trace-event document."""

    def __init__(self, chip: Chip, event_budget: int = EVENT_BUDGET):
        self.chip, self.event_budget = chip, event_budget
        self.plans: list[_Plan] = []

    def add_step(self, result: StepResult, title: str, start_s: float = 0.0) -> None:
        ops = tuple(traced(r.op, r.timing, self.chip) for r in result.ops)
        self.plans.append(_Plan(title, start_s, ops, False, result))

    def add_op(self, op: Op, timing: OpTiming, title: str, standalone: bool = False) -> None:
        self.plans.append(_Plan(title, 0.0, (traced(op, timing, self.chip, standalone),), standalone, None))

    def document(self) -> dict[str, Any]:
        merge = max(1, math.ceil(_span_count(self.plans) / self.event_budget))
        points = max(16, COUNTER_POINTS // merge)
        events: list[dict[str, Any]] = []
        notes = [
            "timestamps in microseconds",
            "identical cores are simulated once: a span on core i's tracks stands for the group of "
            "identical cores named in its 'cores' argument (e.g. 'cores 0-119 (120 identical)')",
            "HBM read and write counters are the bandwidth the engine's fair sharing gave all cores",
        ]
        if self.chip.power is not None:
            notes.append(
                "chip power: each op's kernels at their average power and the floor (static and idle "
                "power) at its clock between them; it integrates to the op's energy (per-layer repeats "
                "at their mean). How power varies within a kernel is not modelled"
            )
        if merge > 1:
            notes.append(
                f"tiles merged: each span on a core track covers up to {merge} consecutive tiles "
                f"(the trace would have had {_span_count(self.plans):,} tile spans)"
            )
        steps = []
        for i, plan in enumerate(self.plans):
            track = _Track(i + 1, self.chip.clock_hz, events)
            steps.append(self._draw_plan(track, plan, merge, points))
            events += track.metadata(plan.title, i)
            if steps[-1].get("note"):
                notes.append(f"{plan.title}: {steps[-1]['note']}")
        return {
            "traceEvents": events,
            "displayTimeUnit": "ns",
            "otherData": {
                "generator": "archsim",
                "chip": self.chip.name,
                "clock_hz": self.chip.clock_hz,
                "tiles_merged": merge,
                "steps": steps,
                "notes": notes,
            },
        }

    def _draw_plan(self, track: _Track, plan: _Plan, merge: int, points: int) -> dict[str, Any]:
        start = cur = plan.start_s * self.chip.clock_hz
        last_rep = max((i for i, t in enumerate(plan.ops) if t.op.repeat > 1), default=-1)
        for i, t in enumerate(plan.ops):
            cur = _draw_op(track, t, cur, merge, plan.standalone, self.chip, points)
            if i == last_rep:
                cur = _draw_repeats(track, plan.ops, cur, self.chip)
        info: dict[str, Any] = {
            "title": plan.title,
            "start_us": track.us(start),
            "time_us": round(track.us(cur) - track.us(start), DIGITS),
        }
        if plan.step is not None:
            info["simulated_time_us"] = plan.step.time_s * US_PER_S
        if last_rep >= 0:
            reps = sorted({t.op.repeat for t in plan.ops if t.op.repeat > 1})
            info["note"] = (
                f"per-layer ops (repeat {', '.join(map(str, reps))}) drawn for one layer; "
                f"one span on the ops track stands for the other repeats"
            )
        if plan.step is not None or len(plan.ops) > 1:
            track.span(STEP_TID, plan.title, start, cur, {k: v for k, v in info.items() if k != "title"})
        return info


def write_trace(path: str | Path, document: dict[str, Any]) -> None:
    """Write a trace document as compact JSON, atomically."""
    write_text(path, json.dumps(document, separators=(",", ":"), allow_nan=False))
