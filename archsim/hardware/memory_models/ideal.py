"""An ideal main memory: channels that stream at one bandwidth whatever the mix of reads and
writes, with no refresh and no bus turnaround; a what-if bound for a DRAM model (how fast would
this chip be if its memory ran at its peak?). Chosen by `hbm: {model: ideal, ...}`.

  channel bandwidth = bandwidth / channels        efficiency(w) = 1 for every write fraction w

An access takes `latency_s` unloaded, plus `queue_latency_s` x u / (1 - u) at utilisation u
(archsim/hardware/memory.py), as in every model.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.hardware.params import param


@dataclass(frozen=True, kw_only=True)
class IdealMemory:
    """A memory at its peak bandwidth: `channels` equal channels, no DRAM timing."""

    capacity_bytes: int = param("capacity", "Bytes", "usable capacity", source="[DS]")
    bandwidth_bytes_per_s: float = param("bandwidth", "BytesPerS", "aggregate bandwidth of all channels", source="[DS]")
    channels: int = param("channels", "PositiveInt", "channels that serve requests in parallel", 1, source="[DS]")
    latency_s: float = param("latency", "Seconds", "unloaded access latency seen by a core", source="[EST]")
    queue_latency_s: float = param(
        "queue_latency", "SecondsOrZero", "latency queueing adds at half the peak bandwidth", 0.0, source="[EST]"
    )
    interleave_bytes: int = param("interleave", "Bytes", "address interleave across channels", 256, source="[EST]")
    phys: int = param("phys", "NonNegativeInt", "memory PHYs on the die (for its area)", 0, source="[EST]")

    @property
    def channel_bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_bytes_per_s / self.channels

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_bytes_per_s

    def efficiency(self, write_fraction: float) -> float:
        return 1.0


MODEL = IdealMemory
