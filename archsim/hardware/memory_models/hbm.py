"""High-bandwidth memory (HBM, JEDEC JESD238): stacks of channels, and the DRAM timing that sets
the bandwidth a stream achieves. The default model of a chip file's `hbm:` section.

Peak bandwidth = stacks x channels per stack x bus width x per-pin data rate / 8. Streaming
efficiency (Ghose et al., "Demystifying complex workload-DRAM interactions", SIGMETRICS 2019):

  refresh loss       = refresh_s / refresh_interval_s
  turnaround loss    : a controller serves rw_batch_bytes in one direction, then turns the bus
                       around for turnaround_s; with writes a fraction w of the traffic, the bus
                       turns 2 * min(w, 1 - w) * bytes / rw_batch_bytes times
  efficiency(w)      = (1 - refresh loss) / (1 + 2 min(w, 1 - w) * turnaround_s * B_chan / rw_batch_bytes)

An access takes `latency_s` unloaded, plus the queueing delay of a loaded controller:
`queue_latency_s` x u / (1 - u) at utilisation u (archsim/hardware/memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from archsim.hardware.params import Check, param
from archsim.units import format_seconds


def _refresh_fits(refresh_s: float, earlier: dict) -> str | None:
    interval_s = earlier.get("refresh_interval")
    if interval_s is not None and refresh_s >= interval_s:
        return f"must be shorter than refresh_interval ({format_seconds(interval_s)}) (got {format_seconds(refresh_s)})"
    return None


@dataclass(frozen=True, kw_only=True)
class Hbm:
    """High-bandwidth memory: stacks of channels and the timing that sets achievable bandwidth."""

    stacks: int = param("stacks", "PositiveInt", "HBM stacks on the package", source="[DS]")
    channels_per_stack: int = param("channels_per_stack", "PositiveInt", "channels of one stack", source="[JEDEC]")
    channel_width_bits: int = param(
        "channel_width_bits", "PositiveInt", "data bus width of one channel", source="[JEDEC]"
    )
    data_rate_bits_per_s: float = param("data_rate", "PinRate", "per-pin data rate, e.g. '6.4 Gbps'", source="[DS]")
    capacity_bytes: int = param("capacity", "Bytes", "usable capacity", source="[DS] [DQ]")
    latency_s: float = param("latency", "Seconds", "unloaded access latency seen by a core", source="[CAL]")
    queue_latency_s: float = param(
        "queue_latency", "SecondsOrZero", "latency queueing adds at half the peak bandwidth", 0.0, source="[CAL]"
    )
    interleave_bytes: int = param(
        "interleave", "Bytes", "address interleave granularity across channels", source="[EST]"
    )
    refresh_interval_s: float = param("refresh_interval", "Seconds", "refresh interval (tREFI)", source="[JEDEC]")
    refresh_s: float = param(
        "refresh_time", "SecondsOrZero", "time a channel is busy refreshing per interval", source="[JEDEC] [CAL]"
    )
    turnaround_s: float = param("turnaround", "SecondsOrZero", "read/write bus turnaround", source="[CAL]")
    rw_batch_bytes: int = param(
        "rw_batch", "Bytes", "bytes served in one direction before turning around", source="[EST]"
    )

    checks: ClassVar = (Check("refresh_time", _refresh_fits),)

    @property
    def channels(self) -> int:
        return self.stacks * self.channels_per_stack

    @property
    def channel_bandwidth_bytes_per_s(self) -> float:
        return self.channel_width_bits * self.data_rate_bits_per_s / 8.0

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        return self.channels * self.channel_bandwidth_bytes_per_s

    @property
    def phys(self) -> int:
        return self.stacks

    def efficiency(self, write_fraction: float) -> float:
        """Fraction of peak a stream achieves with `write_fraction` of its bytes written (above)."""
        refresh = 1.0 - self.refresh_s / self.refresh_interval_s
        mix = 2.0 * min(write_fraction, 1.0 - write_fraction)
        batch_time_s = self.rw_batch_bytes / self.channel_bandwidth_bytes_per_s
        return refresh / (1.0 + mix * self.turnaround_s / batch_time_s)


MODEL = Hbm
