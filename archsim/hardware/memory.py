"""Achievable memory bandwidth from the timing of HBM and the bytes a core keeps in flight.

HBM streaming efficiency (JEDEC HBM3 timing; Ghose et al., "Demystifying complex workload-DRAM
interactions", SIGMETRICS 2019, for the refresh and turnaround terms):

  refresh loss       = refresh_s / refresh_interval_s
  turnaround loss    : a controller serves rw_batch_bytes in one direction, then turns the bus
                       around for turnaround_s; with writes a fraction w of the traffic, the bus
                       turns 2 * min(w, 1 - w) * bytes / rw_batch_bytes times
  efficiency(w)      = (1 - refresh loss) / (1 + 2 min(w, 1 - w) * turnaround_s * B_chan / rw_batch_bytes)

A core's own bandwidth is bounded by Little's law, bytes in flight over the access latency;
the engine applies it per transfer (archsim/engine/kernels.py).
"""

from __future__ import annotations

from archsim.hardware.chip import Chip, Hbm


def hbm_efficiency(hbm: Hbm, write_fraction: float) -> float:
    """Fraction of peak HBM bandwidth a stream achieves with `write_fraction` of its bytes written."""
    refresh = 1.0 - hbm.refresh_s / hbm.refresh_interval_s
    mix = 2.0 * min(write_fraction, 1.0 - write_fraction)
    batch_time_s = hbm.rw_batch_bytes / hbm.channel_bandwidth_bytes_per_s
    return refresh / (1.0 + mix * hbm.turnaround_s / batch_time_s)


def hbm_bandwidth(chip: Chip, write_fraction: float) -> float:
    """Achievable HBM bandwidth in bytes/s for a stream with that write fraction."""
    return chip.hbm.peak_bandwidth_bytes_per_s * hbm_efficiency(chip.hbm, write_fraction)


def l2_bandwidth(chip: Chip) -> float:
    """Bandwidth of L2 hits as seen by the cores: the L2 itself or the NoC, whichever is lower."""
    return min(chip.l2.bandwidth_bytes_per_s, chip.noc.bandwidth_bytes_per_s)


def l2_latency_s(chip: Chip) -> float:
    """L2 hit latency including the NoC hops to the slice."""
    return chip.l2.latency_s + chip.noc.hops * chip.noc.hop_latency_s


def hbm_latency_s(chip: Chip) -> float:
    """Latency of an HBM access: through the NoC and L2 to memory."""
    return chip.hbm.latency_s + chip.noc.hops * chip.noc.hop_latency_s
