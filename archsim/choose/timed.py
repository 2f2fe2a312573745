"""An op's time and energy on a chip under a measurement condition, from the program `choose`
picked (pick.py) at the clock its power held (clock.py): its cycles, fixed costs, bound, energy
by unit and its kernels' power, as an OpTiming; the kernels' durations as a profiler lists them;
and the chosen program played again with its timelines kept, for traces. Memoised by (op, chip,
condition).
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.choose import fidelity
from archsim.choose.clock import at_clock, played_activity
from archsim.choose.conditions import Condition, fixed_cost_s, prologue_s
from archsim.choose.pick import Choice, choose
from archsim.choose.staging import staging_utilisation
from archsim.choose.writeback import with_writeback
from archsim.engine.simulate import PhaseTimeline, ProgramResult, play_program
from archsim.engine.timing import UNIT_BOUND, Bound, OpTiming, binding_unit
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.memory import l2_pool_bandwidth
from archsim.hardware.power import Activity, EnergySplit, energy_split
from archsim.memo import memo
from archsim.program import Family, Program

# The SRAM unit's bytes: each byte the cores load is read out of their SRAM once by the arrays or
# lanes, and that read is what a tile step's time charges to the SRAM's bandwidth
# (compiler/tiles.py: the operands' bytes over `sram.bandwidth`). The sourced bandwidth is the
# banks' rate to a warp's requests (H200: 32 banks x 4 B a cycle [WP]); the loads' fills reach the
# SRAM at the L2's rate, which the l2 and hbm units count, and are not charged to it: counting the
# write too (power.SRAM_ACCESSES_PER_BYTE, as the energy does: each access costs energy) put an SM
# of 8 tensor cores at 103-149% of a peak its timing never exceeded. docs/MODEL.md, "The bound".
SRAM_READS_PER_BYTE = 1


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
    kernel = energy_split(p, played_activity(program, played), kernel_s, clock_hz)
    floor = energy_split(p, Activity(), fixed_s, clock_hz)
    return kernel.scaled(kernels) + floor, kernel.total_j / kernel_s if kernel_s > 0 else 0.0


@dataclass(frozen=True)
class OpCost:
    """An op's time and energy by unit on one chip and its kernels' power: a TimedOp's without
    the rest of its timing (what a decode's attention at every KV length needs)."""

    time_s: float
    energy: EnergySplit
    kernel_power_w: float


@dataclass(frozen=True)
class _Played:
    """An op's chosen program played under a condition: the choice, the program and its plays at
    the clock its power held and at the chip's, its kernels, its fixed cost (seconds and whole
    cycles of the chip's clock) and its played cycles counted at the chip's clock."""

    choice: Choice
    program: Program
    played: ProgramResult
    unheld: ProgramResult
    kernels: int
    overhead_s: float
    overhead: int
    played_cycles: int

    def cost(self, chip: Chip) -> OpCost:
        """Its time (its cycles at the chip's clock), energy and kernel power."""
        c, k = self.choice, self.kernels
        time_s = (self.played_cycles + self.overhead) / chip.clock_hz
        energy, kernel_w = op_energy_split(chip, c.program, self.played, c.clock_hz, k, self.overhead_s)
        return OpCost(time_s, energy, kernel_w)


def _play(op: Op, chip: Chip, condition: Condition, first: bool) -> _Played:
    c = choose(op, chip)
    r, k = c.played, op.kernels
    unheld, program = c.unheld, c.program
    if condition is Condition.STANDALONE and c.program.matrix:
        flushed = program = with_writeback(c.program, chip.l2.capacity_bytes, chip.l2.flush_dirty)
        r = play_program(flushed, at_clock(chip, c.clock_hz))
        unheld = r if c.clock_hz == chip.clock_hz else play_program(flushed, chip)
    overhead_s = k * fixed_cost_s(chip, c.launches, c.program.family, condition, False)
    overhead_s += fixed_cost_s(chip, 0, Family.STREAM, condition, first)
    # cycles are counted at the chip's clock; a kernel the power limit slowed to c.clock_hz
    # takes proportionally more of them
    played_cycles = round(k * r.cycles * (chip.clock_hz / c.clock_hz))
    return _Played(c, program, r, unheld, k, overhead_s, round(overhead_s * chip.clock_hz), played_cycles)


def time_op(op: Op, chip: Chip, condition: Condition = Condition.GRAPH, first: bool = True) -> TimedOp:
    """Time and energy of one execution of `op` on `chip` measured under `condition` (`first`:
    the first kernel of a timed region, which pays a lone launch or the host's cost), at the
    fidelity simulations run at (fidelity.py)."""
    return _time_op(op, chip, condition, first, fidelity.current())


def op_cost(op: Op, chip: Chip) -> OpCost:
    """`time_op(op, chip)`'s time, energy and kernel power, the same numbers, without the rest of
    its timing (its time by cause and units' utilisations)."""
    return _op_cost(op, chip, fidelity.current())


@memo(maxsize=65536)
def _op_cost(op: Op, chip: Chip, _at: fidelity.Fidelity) -> OpCost:
    return _play(op, chip, Condition.GRAPH, True).cost(chip)


@memo(maxsize=65536)
def _time_op(op: Op, chip: Chip, condition: Condition, first: bool, _at: fidelity.Fidelity) -> TimedOp:
    run = _play(op, chip, condition, first)
    c, r, k, unheld, program = run.choice, run.played, run.kernels, run.unheld, run.program
    scale = chip.clock_hz / c.clock_hz
    overhead, played_cycles = run.overhead, run.played_cycles
    compute, stall = round(k * r.compute_cycles * scale), round(k * r.stall_cycles * scale)
    total_cycles = played_cycles + overhead
    cost = run.cost(chip)
    time_s, energy, kernel_w = cost.time_s, cost.energy, cost.kernel_power_w
    hbm_bytes, l2_bytes, flops = k * r.hbm_bytes, k * r.l2_bytes, k * c.program.flops
    moved = (hbm_bytes, l2_bytes, flops)
    causes = time_by_cause(unheld, k, played_cycles, overhead, chip.clock_hz)
    use = unit_utilisation(at_clock(chip, c.clock_hz), op, c.program, time_s, moved, overhead / max(total_cycles, 1))
    use["latency"] = causes["memory_latency_s"] / time_s if time_s > 0 else 0.0
    use["staging"] = staging_utilisation(program, at_clock(chip, c.clock_hz), k, time_s)
    timing = OpTiming(
        cycles=total_cycles,
        time_s=time_s,
        compute_cycles=compute,
        stall_cycles=stall,
        overhead_cycles=overhead,
        busy_core_cycles=k * r.busy_core_cycles * scale,
        core_cycles=k * r.core_cycles * scale,
        hbm_bytes=hbm_bytes,
        l2_bytes=l2_bytes,
        flops=flops,
        min_bytes=k * c.program.min_bytes,
        kernels=k * c.launches,
        active_cores=r.active_cores,
        bound=Bound(UNIT_BOUND[binding_unit(use)]),
        clock_hz=c.clock_hz,
        energy_j=energy.total_j,
        **causes,
        **{f"{unit}_utilisation": u for unit, u in use.items()},
    )
    return TimedOp(timing, energy, kernel_w)


def time_by_cause(unheld: ProgramResult, k: int, played_cycles: int, overhead: int, clock_hz: float) -> dict:
    """The terms of an op's time by cause, in seconds (OpTiming's, docs/MODEL.md "Time by
    cause"), from `k` runs of its program played at the chip's clock `clock_hz` (`unheld`), its
    cycles at the clock its power held (`played_cycles`, counted at the chip's clock) and its
    fixed cycles: the critical cores' compute, stalls by the cause of the load each waited on,
    and stores (the rest of their cycles); the held clock's extra cycles; the fixed cycles. They
    add up to (played_cycles + overhead) / clock_hz, and none is negative: where the play at the
    held clock comes out a few cycles shorter than at the chip's (its events fall otherwise: 44 of
    17,858 cycles of an H200 GEMM 3841 x 4096 x 128 held at 98% of its clock), the held clock adds
    nothing and the other terms split the held play's cycles in the unheld play's proportions."""
    u = unheld
    latency, hbm, l2 = k * u.latency_stall_cycles, k * u.hbm_stall_cycles, k * u.l2_stall_cycles
    compute, stall, cycles = k * u.compute_cycles, k * u.stall_cycles, k * u.cycles
    issue = max(0.0, stall - latency - hbm - l2)  # the stalls' rest; never below 0 for the terms' rounding
    share = played_cycles / cycles if 0 < played_cycles < cycles else 1.0
    cycles_by_cause = {
        "compute_s": share * compute,
        "hbm_bandwidth_s": share * hbm,
        "memory_latency_s": share * latency,
        "l2_s": share * l2,
        "load_issue_s": share * issue,
        "stores_s": share * (cycles - compute - stall),
        "held_clock_s": max(0, played_cycles - cycles),
        "fixed_s": overhead,
    }
    return {name: c / clock_hz for name, c in cycles_by_cause.items()}


def unit_utilisation(
    chip: Chip, op: Op, program: Program, time_s: float, moved: tuple[float, float, float], fixed_share: float
) -> dict[str, float]:
    """Each unit's utilisation of its own peak over an op's `time_s` (docs/MODEL.md, "The bound"),
    on `chip` at the clock the op ran at (the cores' peaks scale with it; the power limit that
    held it is the op's `held_clock_s`): FLOPs over the matrix units' peak (in the op's format) or the vector lanes'; HBM bytes over
    the HBM's peak bandwidth; the bytes that hit in L2 over the L2's bandwidth (on a chiplet chip,
    the dies' own L2s and the fabric together: memory.l2_pool_bandwidth; the pool the event loop
    shares between them: HBM bytes pass the L2 at the HBM's rate and draw on the HBM's
    pool); every byte to or from the cores, read out once, over the cores' SRAM bandwidth (the
    bytes a tile step's time charges to it: compiler/tiles.py); and the share of the time its fixed costs take. `moved` is (HBM bytes, L2 bytes,
    FLOPs). (The share of the time spent waiting on memory latency, the `latency` unit, is
    `time_op`'s, from the op's time by cause.)"""
    hbm_bytes, l2_bytes, flops = moved
    if time_s <= 0:
        return {"fixed": fixed_share}
    core_bytes = hbm_bytes + l2_bytes
    sram_peak = chip.core.sram.bandwidth_bytes_per_cycle * chip.cores * chip.clock_hz
    vector_peak = float(chip.core.vector.lanes) * chip.cores * chip.clock_hz
    return {
        "matrix": flops / (time_s * chip.peak_flops(op.dtype)) if program.matrix else 0.0,
        "vector": 0.0 if program.matrix else flops / (time_s * vector_peak),
        "hbm": hbm_bytes / (time_s * chip.hbm.peak_bandwidth_bytes_per_s),
        "l2": l2_bytes / (time_s * l2_pool_bandwidth(chip, program.local_l2_share if chip.dies else 0.0)),
        "sram": SRAM_READS_PER_BYTE * core_bytes / (time_s * sram_peak) if sram_peak > 0 else 0.0,
        "link": 0.0,
        "fixed": fixed_share,
    }


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


@memo(maxsize=256)
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
