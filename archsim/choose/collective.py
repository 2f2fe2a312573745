"""A collective op's time and energy on the system's interconnect (archsim.hardware.collectives):
link time only, bound by communication, with the links' energy at their line rate.
"""

from __future__ import annotations

import math

from archsim.choose.timed import TimedOp
from archsim.engine.timing import Bound, OpTiming
from archsim.graph.ops import Op
from archsim.hardware import System
from archsim.hardware.power import Activity, EnergySplit, energy_split
from archsim.memo import memo


@memo(maxsize=4096)
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
        energy = energy_split(chip.power, Activity(link_bytes=line_bytes), t.time_s, chip.clock_hz)
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
        link_s=t.time_s,  # all of it on the links: their latency and their transfer
        link_utilisation=t.transfer_s / t.time_s if t.time_s > 0 else 0.0,
    )
    return TimedOp(timing, energy, power)


def simulate_collective(op: Op, system: System) -> OpTiming:
    """Time of a collective op on the system's interconnect (see `time_collective`)."""
    return time_collective(op, system).timing


def collective_energy(op: Op, system: System) -> EnergySplit:
    """Energy by unit of a collective op on the system's busiest chip (see `time_collective`)."""
    return time_collective(op, system).energy
