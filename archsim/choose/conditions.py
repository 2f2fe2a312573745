"""Measurement conditions and the fixed costs of a program under each: how the time of an op's
kernels is counted (back to back in a CUDA graph, one launch timed alone after an L2 flush, a
profiler's kernel durations, or the host's wall clock), in seconds from the chip's overheads.
"""

from __future__ import annotations

from enum import Enum

from archsim.hardware import Chip
from archsim.program import Family


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


def prologue_s(chip: Chip, family: Family) -> float:
    """The prologue of a program's first kernel: a matrix-unit or fused-attention kernel's setup,
    its cycles at the clock `chip` runs at (e.g. 3,881 cycles: 1.96 us at 1.98 GHz, 2.75 us at
    1.41 GHz)."""
    o = chip.overheads
    cycles = {Family.GEMM: o.matrix_setup_cycles, Family.ATTENTION: o.attention_setup_cycles}.get(family, 0.0)
    return cycles / chip.clock_hz


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
