"""The memory system as the cores see it: main-memory and L2 bandwidth, access latency, and the
rate a single transfer can reach. Every formula the event loop applies to memory lives here or in
the chip's memory model (archsim/hardware/memory_models/: `hbm`, JEDEC refresh and bus
turnaround, by default), which gives its channels, their peak bandwidth and the efficiency a
stream reaches with a given write fraction.

An access to main memory takes the unloaded latency plus the controller's queueing delay, which
grows with the utilisation u of its bandwidth as in an M/D/1 queue: latency(u) = L0 + Lq x u / (1 - u),
Lq the delay at u = 1/2 (`queue_latency_s`); u is capped at MAX_UTILISATION.
A transfer's rate is bounded by Little's law, the bytes its core keeps in flight over the
access latency, and by the memory channels it touches (its bytes land on channels
`interleave_bytes` at a time, so a transfer of b bytes uses min(channels, ceil(b / interleave))
of them). All transfers share the HBM and L2 pools (archsim/engine/kernels.py shares them max-min
fairly). On a chip of dies joined by a link (`die_link`), the share of both pools' bytes homed on
another die crosses it: the pools flow within what that share may take of the link, and the
latencies add its crossing for that share (archsim/hardware/chiplet.py). The event loop works in cycles: `memory_params` converts a chip's figures once per phase
into a `MemoryParams` record, and the `@njit` functions below are what the loop calls.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from archsim.hardware.chip import Chip
from archsim.hardware.chiplet import link_capped_bandwidth, numa_latency_s, split_l2_bandwidth
from archsim.jit import njit
from archsim.memo import memo

MAX_UTILISATION = 0.98  # of the HBM bandwidth, where the queueing delay stops growing (49 x Lq)


def hbm_bandwidth(chip: Chip, write_fraction: float) -> float:
    """Achievable HBM bandwidth in bytes/s for a stream with that write fraction (on dies joined
    by a link, within what its far share may take of the link: `over_die_link`)."""
    return over_die_link(chip, chip.hbm.peak_bandwidth_bytes_per_s * chip.hbm.efficiency(write_fraction))


def l2_bandwidth(chip: Chip) -> float:
    """Bandwidth of L2 hits as seen by the cores: the L2 itself or the NoC, whichever is lower
    (on dies joined by a link, within what its far share may take of the link: `over_die_link`)."""
    return over_die_link(chip, min(chip.l2.bandwidth_bytes_per_s, chip.noc.bandwidth_bytes_per_s))


def over_die_link(chip: Chip, bytes_per_s: float) -> float:
    """A stream of `bytes_per_s` on a chip of dies joined by a link (`die_link`), its far share
    crossing the link: `chiplet.link_capped_bandwidth`. Unchanged on one die."""
    link = chip.die_link
    if link is None:
        return bytes_per_s
    return link_capped_bandwidth(bytes_per_s, link.bandwidth_bytes_per_s, link.far_share)


def across_dies_s(chip: Chip, near_latency_s: float) -> float:
    """Mean latency of an access that takes `near_latency_s` on its own die, on a chip of dies
    joined by a link: its far share waits the link's latency too (`chiplet.numa_latency_s`)."""
    link = chip.die_link
    if link is None:
        return near_latency_s
    return numa_latency_s(near_latency_s, link.latency_s, link.far_share)


def l2_pool_bandwidth(chip: Chip, local_share: float) -> float:
    """Bandwidth of L2 hits when `local_share` of them hit the cores' own die L2 on a chiplet
    chip and the rest cross the die fabric to the memory-side cache (`chiplet.split_l2_bandwidth`)."""
    dies = chip.dies
    if dies is None or local_share == 0.0:  # every hit crosses to the L2 (a monolithic chip's)
        return l2_bandwidth(chip)
    return split_l2_bandwidth(l2_bandwidth(chip), dies.count * dies.l2_bandwidth_bytes_per_s, local_share)


def l2_latency_s(chip: Chip) -> float:
    """L2 hit latency including the NoC hops to the slice (and, on dies joined by a link, the
    far share's crossing: `across_dies_s`)."""
    return across_dies_s(chip, chip.l2.latency_s + chip.noc.hops * chip.noc.hop_latency_s)


def hbm_latency_s(chip: Chip) -> float:
    """Latency of an HBM access: through the NoC and L2 to memory (and, on dies joined by a
    link, the far share's crossing: `across_dies_s`)."""
    return across_dies_s(chip, chip.hbm.latency_s + chip.noc.hops * chip.noc.hop_latency_s)


class MemoryParams(NamedTuple):
    """One phase's view of the memory system, in cycles and bytes (what the event loop reads)."""

    hbm_latency: float  # cycles from issue to the first byte of an HBM access, unloaded
    hbm_queue_latency: float  # cycles queueing adds at half the HBM bandwidth
    l2_latency: float  # cycles to the first byte of an L2 hit
    hbm_bytes_per_cycle: float  # achievable HBM bandwidth for the phase's read/write mix
    l2_bytes_per_cycle: float
    channel_bytes_per_cycle: float  # one HBM channel, at the same efficiency
    interleave_bytes: float
    channels: float
    load_inflight_bytes: float  # bytes one core's loads keep in flight
    store_inflight_bytes: float  # bytes one core's posted writes keep in flight


def core_requests(chip: Chip, warps: int) -> float:
    """Memory requests a kernel of `warps` resident warps per core keeps outstanding: the core's
    limit (`max_requests`) and, each warp keeping `loads_per_warp` loads out (its registers for
    loaded data before their first use), warps x loads_per_warp. The feed is the kernel
    pipeline's, not the SM's: a decode kernel of one 4-warp block per (sequence, KV head) at 6
    loads a warp keeps 24 requests, a per-token kernel of 64 warps the core's limit. A kernel
    that states no warps (0: bulk copies, TMA or cp.async, that no warp's request slots track)
    and a core with neither limit: inf."""
    core = chip.core
    if warps <= 0:
        return math.inf
    limit = float(core.max_requests) if core.max_requests > 0 else math.inf
    if core.loads_per_warp > 0:
        limit = min(limit, float(warps * core.loads_per_warp))
    return limit


def core_inflight_bytes(chip: Chip, kernel_inflight_bytes: float, warps: int = 0) -> float:
    """Bytes one core's loads keep in flight: the kernel's own (its pipeline's buffers,
    `kernel_inflight_bytes`), within what the core can track: its DMA's bytes
    (`max_inflight_bytes`) and, for a kernel whose warps issue its loads (`warps` > 0), their
    outstanding requests (`core_requests`), each a warp-wide access at the widest load
    (`lanes_per_request` x `access_bytes`). Over the access latency this is the kernel's feed
    (Little's law), so a chain of loads and a stream take their times from the same latency.
    E.g. 24 requests of 32 lanes x 16 B: 12,288 B, over 273 ns at 1.98 GHz (540.5 cycles):
    22.7 B per cycle, 45 GB/s per SM, whatever the kernel's buffers. (A streaming kernel states
    its own requests at its lane width: compiler/streaming.py.)"""
    core = chip.core
    by_requests = core_requests(chip, warps) * core.vector.lanes_per_request * core.vector.access_bytes
    return min(float(core.max_inflight_bytes), kernel_inflight_bytes, by_requests)


@memo(maxsize=4096)
def memory_params(
    chip: Chip, write_fraction: float, load_inflight_bytes: float, local_l2_share: float = 0.0, warps: int = 0
) -> MemoryParams:
    """The chip's memory figures for a phase that writes `write_fraction` of its HBM bytes and
    whose kernel of `warps` resident warps per core (0: its loads are bulk copies) keeps
    `load_inflight_bytes` in flight per core (within what the core tracks: `core_inflight_bytes`),
    with `local_l2_share` of its L2 bytes served by a chiplet's own die L2s (l2_pool_bandwidth).
    Memoised: a decode's attention at every KV length asks for the same."""
    clock, hbm = chip.clock_hz, chip.hbm
    eff = hbm.efficiency(write_fraction)
    dma = float(chip.core.max_inflight_bytes)
    return MemoryParams(
        hbm_latency=hbm_latency_s(chip) * clock,
        hbm_queue_latency=hbm.queue_latency_s * clock,
        l2_latency=l2_latency_s(chip) * clock,
        hbm_bytes_per_cycle=over_die_link(chip, hbm.peak_bandwidth_bytes_per_s * eff) / clock,
        l2_bytes_per_cycle=l2_pool_bandwidth(chip, local_l2_share) / clock,
        channel_bytes_per_cycle=hbm.channel_bandwidth_bytes_per_s * eff / clock,
        interleave_bytes=float(hbm.interleave_bytes),
        channels=float(hbm.channels),
        load_inflight_bytes=core_inflight_bytes(chip, load_inflight_bytes, warps),
        store_inflight_bytes=dma,
    )


@njit
def load_latency(p: MemoryParams, hbm_fraction: float, utilisation: float) -> float:
    """Cycles from a load's issue to its first byte: the HBM latency at `utilisation` of the HBM
    bandwidth and the L2 latency, weighted by the share of its bytes each serves."""
    u = min(utilisation, MAX_UTILISATION)
    hbm = p.hbm_latency + p.hbm_queue_latency * u / (1.0 - u)
    return hbm_fraction * hbm + (1.0 - hbm_fraction) * p.l2_latency


@njit
def load_rate_cap(p: MemoryParams, hbm_bytes: float, hbm_fraction: float, latency: float) -> float:
    """Bytes per cycle one load may reach: Little's law (bytes in flight / latency), and for its
    HBM share, the channels its `hbm_bytes` land on (min(channels, ceil(bytes / interleave)))
    at one channel's bandwidth each."""
    cap = p.load_inflight_bytes / latency
    if hbm_bytes > 0.0:
        touched = min(p.channels, math.ceil(hbm_bytes / p.interleave_bytes))
        cap = min(cap, touched * p.channel_bytes_per_cycle / hbm_fraction)
    return cap


@njit
def store_rate_cap(p: MemoryParams, to_hbm: bool) -> float:
    """Bytes per cycle one core's posted writes drain at: its bytes in flight over the latency
    of the level they go to (Little's law)."""
    return p.store_inflight_bytes / (p.hbm_latency if to_hbm else p.l2_latency)
