"""An op's time and energy on a chip under a measurement condition, from the program `choose`
picked (pick.py) at the clock its power held (clock.py): its cycles, fixed costs, bound, energy
by unit and its kernels' power, as an OpTiming; the kernels' durations as a profiler lists them;
and the chosen program played again with its timelines kept, for traces. Memoised by (op, chip,
condition).
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.choose.clock import at_clock, played_activity
from archsim.choose.conditions import Condition, fixed_cost_s, prologue_s
from archsim.choose.pick import Choice, choose
from archsim.choose.writeback import with_writeback
from archsim.engine.simulate import PhaseTimeline, ProgramResult, play_program
from archsim.engine.timing import Bound, OpTiming
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.power import Activity, EnergySplit, energy_split
from archsim.memo import memo
from archsim.program import Family, Program


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


@memo(maxsize=65536)
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
