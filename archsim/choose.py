"""Choose the program an op runs as, as a tuned library would, and time it: the one place above
the compiler and the engine.

`choose(op, chip)` compiles every candidate mapping of the op (archsim.compiler), plays each on
the engine (archsim.engine) and keeps the fastest, counting its fixed costs: one kernel overhead
per launched phase and the prologue of a matrix-unit kernel (`Overheads.program_s`), as an
autotuning library picks the kernel that is fastest end to end. The first of equals wins.
`simulate_op` turns the choice into an OpTiming under a measurement `Condition`: how the time of
the op's `kernels` launches is counted (back to back in a CUDA graph, one launch timed alone after
an L2 flush, a profiler's kernel durations, or the host's wall clock), and the bound (compute,
memory or overhead: whichever the critical core spent most of its time on). Runner, serving, validation, traces and reports all go
through here, so every caller sees the same program. Results are memoised by (op, chip): ops are
frozen and compare by kind and shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

import numpy as np

from archsim.compiler.compile import compile_candidates
from archsim.engine.simulate import PhaseTimeline, ProgramResult, play_program
from archsim.engine.timing import Bound, OpTiming
from archsim.graph.ops import Op
from archsim.hardware import Chip, System
from archsim.hardware.power import Activity, EnergySplit, energy_split, held_clock_hz, power_w
from archsim.program import Family, Phase, Program


class Condition(str, Enum):
    """How an op's time is measured, each modelled physically:

    GRAPH       kernels back to back (a CUDA graph, a serving step): a gap per launch
    STANDALONE  one launch timed alone (events around it) after the L2 was flushed by writing a
                buffer larger than it: the lone launch's cost, and the lines a matrix kernel's
                bulk (TMA) loads and writes allocate evict dirty lines, written back to HBM
                (`dirty_evicted_bytes`: random victims, so the write-back saturates at the L2's
                capacity); streaming vector kernels and copies do not pay it (measured on the
                H200: a 64 MiB copy and an 8192 x 4096 add after the flush run at 3.6-3.8 TB/s,
                faster than they could with the write-back, while GEMVs run slower than back to
                back by what the write-back adds); later kernels of the timed region follow back
                to back
    KERNEL      a profiler's summed kernel durations: no gap between kernels
    HOST        the host's wall clock around launch and synchronize: the host round trip
    """

    GRAPH = "graph"
    STANDALONE = "standalone"
    KERNEL = "kernel"
    HOST = "host"


MAX_HELD_PLAYS = 8  # plays of a kernel on the way to the clock its power holds, at most (see play_held)


@dataclass(frozen=True, eq=False)
class Choice:
    """The program an op runs as, the clock its power held, how it played at that clock, and
    how many candidates it was chosen from."""

    program: Program
    played: ProgramResult
    candidates: int
    clock_hz: float

    @property
    def launches(self) -> int:
        """Kernels one run of the program launches (phases that start a new kernel)."""
        return sum(1 for ph in self.program.phases if ph.new_kernel)


def program_time_s(program: Program, played: ProgramResult, chip: Chip, clock_hz: float | None = None) -> float:
    """One run of a played program back to back with others: its cycles at the clock it ran
    at (default the chip's) plus its fixed costs."""
    launches = sum(1 for ph in program.phases if ph.new_kernel)
    clock = clock_hz or chip.clock_hz
    return played.cycles / clock + fixed_cost_s(chip, launches, program.family, Condition.GRAPH, False)


def at_clock(chip: Chip, clock_hz: float) -> Chip:
    """The chip running at `clock_hz` (its memory system and overheads in seconds unchanged)."""
    return chip if clock_hz == chip.clock_hz else replace(chip, clock_hz=clock_hz)


def played_activity(program: Program, played: ProgramResult) -> Activity:
    """The program's actions with the bytes it moved when played (every byte to or from the
    cores passes the L2)."""
    return replace(program.activity, l2_bytes=played.hbm_bytes + played.l2_bytes, hbm_bytes=played.hbm_bytes)


def play_held(program: Program, chip: Chip, played: ProgramResult | None = None) -> tuple[float, ProgramResult]:
    """The program played at the clock its power holds (archsim/hardware/power.py): the chip's
    clock unless the kernel would draw more than the limit there (`played`: already played at
    the chip's clock). The time at another clock f is estimated as the critical core's compute
    scaling as 1/f and the rest as fixed; the program is played again at the clock found, twice,
    each play correcting the estimate, and on while a play still draws more than the limit (the
    estimate errs high, as the stalls shrink too at a lower clock; MAX_HELD_PLAYS bounds it)."""
    played = played or play_program(program, chip)
    p, f_max = chip.power, chip.clock_hz
    if p is None or played.cycles == 0:
        return f_max, played
    a = played_activity(program, played)
    if power_w(p, a, played.cycles / f_max, f_max, f_max) <= p.limit_w:
        return f_max, played
    clock = f_max
    for replays in range(MAX_HELD_PLAYS - 1):
        compute_s, total_s = played.compute_cycles / clock, played.cycles / clock
        if replays >= 2 and power_w(p, a, total_s, clock, f_max) <= p.limit_w:
            break

        def time_at(
            f: float, compute_s: float = compute_s, other_s: float = total_s - compute_s, at: float = clock
        ) -> float:
            return compute_s * at / f + other_s

        before, clock = clock, held_clock_hz(p, a, time_at, f_max)
        if clock == before:  # the same clock plays the same: nothing to correct
            break
        played = play_program(program, at_clock(chip, clock))
        a = played_activity(program, played)
    return clock, played


def same_play(a: Program, b: Program) -> bool:
    """Whether two programs play, cost and draw power alike, so that neither need be played once
    the other is: the same phases (every entry array bit for bit, buffers, bytes in flight and
    launches), matrix units, family and actions. (Two tilings can compile to the same program:
    a 128 x 256 and a 256 x 128 tile of a square-typed GEMM move the same bytes per step.)"""
    if (a.matrix, a.family, a.activity, len(a.phases)) != (b.matrix, b.family, b.activity, len(b.phases)):
        return False
    return all(_same_phase(x, y) for x, y in zip(a.phases, b.phases, strict=True))


def _same_phase(x: Phase, y: Phase) -> bool:
    if (x.stages, x.inflight_bytes, x.new_kernel, x.entries) != (y.stages, y.inflight_bytes, y.new_kernel, y.entries):
        return False
    columns = ("core_start", "core_weight", "compute_cycles", "hbm_bytes", "l2_bytes")
    for name in (*columns, "store_bytes", "store_l2_bytes", "load_trips"):
        u, v = getattr(x, name), getattr(y, name)
        if u.dtype != v.dtype or u.shape != v.shape:
            return False
        if not np.array_equal(np.ascontiguousarray(u).view(np.uint8), np.ascontiguousarray(v).view(np.uint8)):
            return False  # bit for bit: -0.0 is not 0.0 here
    return True


@lru_cache(maxsize=65536)
def choose(op: Op, chip: Chip) -> Choice:
    """The fastest of the op's candidate programs on `chip` (fixed costs included)."""
    if op.kind.is_collective:
        raise ValueError(f"{op.kind.value} runs over the interconnect: time it with simulate_collective")
    candidates = compile_candidates(op, chip)
    # every candidate at the chip's clock; then, fastest first, at the clock its power holds,
    # until the next one is slower even unthrottled (a lower clock never makes a kernel faster).
    # A candidate that plays as an earlier one (`same_play`) takes that one's play, and is not
    # held again: its time would equal the earlier one's, and the first of equals wins
    at_max: list[tuple[float, int, Program, ProgramResult, int]] = []
    for i, p in enumerate(candidates):
        twin = next((j for j in range(i) if same_play(candidates[j], p)), i)
        played = play_program(p, chip) if twin == i else at_max[twin][3]
        at_max.append((program_time_s(p, played, chip), i, p, played, twin))
    at_max.sort(key=lambda x: (x[0], x[1]))
    best: tuple[float, Program, ProgramResult, float] | None = None
    for fast_s, i, program, played, twin in at_max:
        if best is not None and fast_s >= best[0]:
            break
        if twin != i:
            continue
        clock, held = play_held(program, chip, played)
        total_s = program_time_s(program, held, chip, clock)
        if best is None or total_s < best[0]:
            best = (total_s, program, held, clock)
    assert best is not None, "every op compiles to at least one program"
    return Choice(best[1], best[2], len(candidates), best[3])


def prologue_s(chip: Chip, family: Family) -> float:
    """The prologue of a program's first kernel: a matrix-unit or fused-attention kernel's setup."""
    o = chip.overheads
    return {Family.GEMM: o.matrix_setup_s, Family.ATTENTION: o.attention_setup_s}.get(family, 0.0)


def fixed_cost_s(chip: Chip, launches: int, family: Family, condition: Condition, first: bool) -> float:
    """Fixed cost of one run of a program of `launches` kernels measured under `condition`
    (`first`: the first kernel of the timed region): each kernel's own fixed duration and the
    matrix-unit prologue, a gap between kernels unless only kernel durations are summed, and a
    lone launch's or the host's cost."""
    o = chip.overheads
    cost = launches * o.kernel_s + (prologue_s(chip, family) if launches else 0.0)
    if condition is Condition.KERNEL:
        return cost
    cost += launches * o.gap_s
    if first and condition is Condition.STANDALONE:
        cost += o.launch_s
    if first and condition is Condition.HOST:
        if o.host_s <= 0:
            raise ValueError(f"{chip.name} states no host launch-and-synchronize cost (overheads.host)")
        cost += o.host_s
    return cost


def dirty_evicted_bytes(allocated_bytes: float, capacity_bytes: float) -> float:
    """Dirty bytes written back while `allocated_bytes` of new lines enter an L2 of
    `capacity_bytes` that a flush left all dirty, the victim of each allocation taken at random
    (the L2's slices hash addresses and do not keep an LRU order across them): a dirty line
    survives each allocation with probability 1 - line/C, so after A bytes C exp(-A/C) remain
    dirty and C (1 - exp(-A/C)) were written back. Like A for A << C; all of C once A >> C."""
    return capacity_bytes * -math.expm1(-allocated_bytes / capacity_bytes) if capacity_bytes > 0 else 0.0


def with_writeback(program: Program, capacity_bytes: float) -> Program:
    """The program after an L2 write-flush: the bytes its loads from HBM and its stores allocate
    in L2 evict dirty lines, written back to HBM (`dirty_evicted_bytes`); the write-backs are
    spread over the entries in proportion to what they allocate."""
    allocated = sum(float(np.sum((ph.hbm_bytes + ph.store_bytes) * ph.entry_weights)) for ph in program.phases)
    if allocated <= 0:
        return program
    share = dirty_evicted_bytes(allocated, capacity_bytes) / allocated
    phases = tuple(
        replace(ph, store_bytes=ph.store_bytes + share * (ph.hbm_bytes + ph.store_bytes)) for ph in program.phases
    )
    return replace(program, phases=phases)


@dataclass(frozen=True)
class TimedOp:
    """An op's timing and its energy by unit on one chip (the busiest, in a multi-chip step),
    and the power its kernels drew while they ran (the power limit's subject)."""

    timing: OpTiming
    energy: EnergySplit
    kernel_power_w: float = 0.0


def op_energy_split(
    chip: Chip, program: Program, played: ProgramResult, clock_hz: float, kernels: int, fixed_s: float
) -> tuple[EnergySplit, float]:
    """Energy of `kernels` runs of a played program at `clock_hz` (its actions and the floor over
    its cycles) and of the chip's floor over the op's fixed-cost time `fixed_s`, when no kernel
    computes; and the kernels' power. Zero without a power model."""
    p = chip.power
    if p is None:
        return EnergySplit(), 0.0
    kernel_s = played.cycles / clock_hz
    kernel = energy_split(p, played_activity(program, played), kernel_s, clock_hz, chip.clock_hz)
    floor = energy_split(p, Activity(), fixed_s, clock_hz, chip.clock_hz)
    return kernel.scaled(kernels) + floor, kernel.total_j / kernel_s if kernel_s > 0 else 0.0


@lru_cache(maxsize=65536)
def time_op(op: Op, chip: Chip, condition: Condition = Condition.GRAPH, first: bool = True) -> TimedOp:
    """Time and energy of one execution of `op` on `chip` measured under `condition` (`first`:
    the first kernel of a timed region, which pays a lone launch or the host's cost)."""
    c = choose(op, chip)
    r, k = c.played, op.kernels
    if condition is Condition.STANDALONE and c.program.matrix:
        r = play_program(with_writeback(c.program, chip.l2.capacity_bytes), at_clock(chip, c.clock_hz))
    overhead_s = k * fixed_cost_s(chip, c.launches, c.program.family, condition, False)
    overhead_s += fixed_cost_s(chip, 0, Family.STREAM, condition, first)
    # cycles are counted at the chip's clock; a kernel the power limit slowed to c.clock_hz
    # takes proportionally more of them
    scale = chip.clock_hz / c.clock_hz
    overhead = round(overhead_s * chip.clock_hz)
    compute, stall = round(k * r.compute_cycles * scale), round(k * r.stall_cycles * scale)
    played_cycles = round(k * r.cycles * scale)
    waiting = played_cycles - compute
    parts = ((compute, Bound.COMPUTE), (waiting, Bound.MEMORY), (overhead, Bound.OVERHEAD))
    bound = max(parts, key=lambda x: x[0])[1]
    total_cycles = played_cycles + overhead
    energy, kernel_w = op_energy_split(chip, c.program, r, c.clock_hz, k, overhead_s)
    timing = OpTiming(
        cycles=total_cycles,
        time_s=total_cycles / chip.clock_hz,
        compute_cycles=compute,
        stall_cycles=stall,
        overhead_cycles=overhead,
        busy_core_cycles=k * r.busy_core_cycles * scale,
        core_cycles=k * r.core_cycles * scale,
        hbm_bytes=k * r.hbm_bytes,
        l2_bytes=k * r.l2_bytes,
        flops=k * c.program.flops,
        min_bytes=k * c.program.min_bytes,
        kernels=k * c.launches,
        active_cores=r.active_cores,
        bound=bound,
        clock_hz=c.clock_hz,
        energy_j=energy.total_j,
    )
    return TimedOp(timing, energy, kernel_w)


def kernel_durations_s(op: Op, chip: Chip) -> tuple[float, ...]:
    """The duration of each kernel one execution of `op` launches, as a profiler records each
    (Condition.KERNEL): the played cycles of the phases it runs, at the clock its power held,
    and its fixed cost (the kernel overhead; the prologue on its program's first kernel). They
    add up to `simulate_op(op, chip, Condition.KERNEL).time_s`, but for the cycle each op's
    total is rounded to."""
    c = choose(op, chip)
    durations: list[float] = []
    for phase, played in zip(c.program.phases, c.played.phases, strict=True):
        if phase.new_kernel:
            setup = prologue_s(chip, c.program.family) if not durations else 0.0
            durations.append(chip.overheads.kernel_s + setup)
        elif not durations:  # a program whose first phase launches nothing: no fixed cost
            durations.append(0.0)
        durations[-1] += int(played.total_cycles) / c.clock_hz
    return tuple(durations) * op.kernels


def simulate_op(op: Op, chip: Chip, condition: Condition = Condition.GRAPH, first: bool = True) -> OpTiming:
    """Time of one execution of `op` on `chip` measured under `condition` (see `time_op`)."""
    return time_op(op, chip, condition, first).timing


def op_energy(op: Op, chip: Chip, condition: Condition = Condition.GRAPH, first: bool = True) -> EnergySplit:
    """Energy by unit of one execution of `op` on `chip` (see `time_op`)."""
    return time_op(op, chip, condition, first).energy


@lru_cache(maxsize=256)
def replay(op: Op, chip: Chip) -> tuple[Choice, tuple[PhaseTimeline, ...]]:
    """The chosen program of `op` played again keeping every entry's cycles (for traces)."""
    c = choose(op, chip)
    played = play_program(c.program, at_clock(chip, c.clock_hz), trace=True)
    scale = chip.clock_hz / c.clock_hz  # timelines in cycles of the chip's clock, as OpTiming counts
    timelines = tuple(
        PhaseTimeline(
            t.load_issue * scale,
            t.load_done * scale,
            t.compute_end * scale,
            t.total_cycles * scale,
            t.event_cycles * scale,
            t.hbm_read / scale,
            t.hbm_write / scale,
        )
        for t in (p.timeline for p in played.phases)
        if t is not None
    )
    return c, timelines


@lru_cache(maxsize=4096)
def time_collective(op: Op, system: System) -> TimedOp:
    """Time of a collective op on the system's interconnect (archsim.hardware.collectives), as an
    OpTiming: all of it link time (counted as overhead cycles: no core computes or loads), bound
    by communication; its energy: every link of the chip at its line rate while the transfer runs,
    and the chip's floor over the whole time."""
    from archsim.hardware.collectives import Collective, collective_time, system_fabric

    chip = system.chip
    t = collective_time(system_fabric(system, op.ranks), Collective(op.kind.value), op.ranks, op.bytes, op.chunks)
    cycles = math.ceil(t.time_s * chip.clock_hz)
    energy, power = EnergySplit(), 0.0
    if chip.power is not None and system.interconnect is not None:
        i = system.interconnect
        line_bytes = t.transfer_s * i.links_per_chip * i.link_bandwidth_bytes_per_s
        energy = energy_split(chip.power, Activity(link_bytes=line_bytes), t.time_s, chip.clock_hz, chip.clock_hz)
        power = energy.total_j / t.time_s if t.time_s > 0 else 0.0
    timing = OpTiming(
        cycles=cycles,
        time_s=t.time_s,
        compute_cycles=0,
        stall_cycles=0,
        overhead_cycles=cycles,
        busy_core_cycles=0.0,
        core_cycles=0.0,
        hbm_bytes=0.0,
        l2_bytes=0.0,
        flops=0.0,
        min_bytes=0.0,
        kernels=op.chunks,
        active_cores=0,
        bound=Bound.COMMUNICATION,
        clock_hz=chip.clock_hz,
        energy_j=energy.total_j,
    )
    return TimedOp(timing, energy, power)


def simulate_collective(op: Op, system: System) -> OpTiming:
    """Time of a collective op on the system's interconnect (see `time_collective`)."""
    return time_collective(op, system).timing


def collective_energy(op: Op, system: System) -> EnergySplit:
    """Energy by unit of a collective op on the system's busiest chip (see `time_collective`)."""
    return time_collective(op, system).energy


def clear_caches() -> None:
    """Forget every memoised choice and timing (benchmarks time simulations from scratch)."""
    from archsim.compiler.attention import _decode_layout, combine_phase, core_groups, item_shape, kv_splits
    from archsim.compiler.gemm import clear_layout_memos, shortlist
    from archsim.compiler.tiles import step_cycles, vector_step_cycles
    from archsim.engine.simulate import replayed_phase
    from archsim.graph.parallel import sharded_workload
    from archsim.hardware.memory import memory_params

    memos = (choose, time_op, replay, time_collective, step_cycles, vector_step_cycles, shortlist, memory_params)
    for memo in (*memos, sharded_workload, replayed_phase):
        memo.cache_clear()
    clear_layout_memos()
    for attention_memo in (core_groups, item_shape, combine_phase, kv_splits, _decode_layout):
        attention_memo.cache_clear()
