"""Chiplet GPUs: the cores spread evenly over compute dies, each die with an L2 of its own that
caches what its own cores read, all dies reaching a memory-side cache and HBM over the die fabric
(AMD MI300X: eight XCDs of 38 CUs with 4 MB of L2 each, on a 256 MB Infinity Cache; AMD CDNA 3
whitepaper, 2023).

On a chip with a `dies:` section the chip's `l2:` is the memory-side cache, shared by every die
(it caches what any die reads or writes: the last level before HBM), and its `noc:` is the die
fabric to it (its bandwidth caps the traffic of every die's misses, its hops add to the latency
of every access that leaves a die). An operand load that hits its die's L2 stays in the die: it
takes no share of the fabric, the memory-side cache or HBM. Which loads those are is the
compiler's (archsim/compiler/die_reuse.py): the hardware dispatcher deals a kernel's workgroups
to the dies round robin, so work item t runs on die t mod dies. A kernel's L2 hits are then two
streams served at once, a share h by the dies' own L2s (dies x each one's bandwidth, B_die) and
the rest by the fabric and the memory-side cache (B_fabric, the chip's L2 bandwidth as the noc
caps it), so they flow at

  B_L2(h) = 1 / max(h / B_die, (1 - h) / B_fabric)

(B_fabric at h = 0: a monolithic chip's). Their latency stays the memory-side cache's: the
loads that hit a die's own L2 are not waited on less (an upper bound; the die L2's latency is
not sourced).

A chip with a `die_link:` section is the other kind of chiplet GPU: `dies` dies, each with its
share of the cores, of the L2 and of the HBM stacks, joined by a die-to-die link as one GPU of one
address space (NVIDIA B200: two dies joined by the 10 TB/s NV-HBI; Blackwell architecture
technical brief, 2024). Pages interleave evenly over every die's memory, and each die's L2 caches
the lines its own memory homes, so of every access a share f = (dies - 1) / dies is homed on
another die (`far_share`): its L2 hits and its HBM accesses alike cross the link. The far share
pays the link's added latency L_link, so an access waits on average

  L = L_near + f x L_link                                   (`numa_latency_s`)

and the far bytes of a stream of T bytes/s, f x T, share the link's bandwidth B_link (both
directions together: traffic between the dies flows both ways evenly), so neither the L2 hits
nor the HBM stream flow faster than

  T <= B_link / f                                           (`link_capped_bandwidth`)

(each checked on its own: an upper bound where both fill the link at once). A chip of one die
has no `die_link:` and none of this.

Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.hardware.params import param


@dataclass(frozen=True, kw_only=True)
class Dies:
    """The compute dies of a chiplet chip: `count` of them, the cores spread evenly, each with its
    own L2 of `l2_capacity_bytes`."""

    count: int = param("count", "PositiveInt", "compute dies the cores are spread over evenly", source="[WP]")
    l2_capacity_bytes: int = param(
        "l2_capacity", "Bytes", "each die's own L2, caching what the die's cores read", source="[WP]"
    )
    l2_bandwidth_bytes_per_s: float = param(
        "l2_bandwidth", "BytesPerS", "each die's own L2 to its cores", source="[WP]"
    )


def split_l2_bandwidth(fabric_bytes_per_s: float, dies_bytes_per_s: float, local_share: float) -> float:
    """Bandwidth of L2 hits of which `local_share` (h) hit the dies' own L2s, served by them at
    `dies_bytes_per_s` while the rest cross the fabric at `fabric_bytes_per_s`, both at once:
    1 / max(h / B_die, (1 - h) / B_fabric)."""
    return 1.0 / max(local_share / dies_bytes_per_s, (1.0 - local_share) / fabric_bytes_per_s)


@dataclass(frozen=True, kw_only=True)
class DieLink:
    """The dies of a NUMA chiplet GPU, each with its share of the cores, L2 and HBM stacks, and
    the link joining them: what an access homed on another die adds."""

    dies: int = param(
        "dies", "PositiveInt", "dies the cores, the L2 and the HBM stacks are spread over evenly", source="[WP]"
    )
    bandwidth_bytes_per_s: float = param(
        "bandwidth", "BytesPerS", "the die-to-die link, both directions together", source="[WP]"
    )
    latency_s: float = param(
        "latency", "SecondsOrZero", "what an access homed on another die waits beyond a near one", source="[EST]"
    )

    @property
    def far_share(self) -> float:
        """Share of every access homed on another die (`far_share`)."""
        return far_share(self.dies)


def far_share(dies: int) -> float:
    """Share of a kernel's accesses homed on another die when pages interleave evenly over the
    memories of `dies` dies: (dies - 1) / dies (two dies: 1/2)."""
    return (dies - 1) / dies


def numa_latency_s(near_latency_s: float, link_latency_s: float, far: float) -> float:
    """Mean latency of accesses of which a share `far` crosses the link: L_near + far x L_link."""
    return near_latency_s + far * link_latency_s


def link_capped_bandwidth(bytes_per_s: float, link_bytes_per_s: float, far: float) -> float:
    """A stream of `bytes_per_s` of which a share `far` crosses a link of `link_bytes_per_s`:
    min(bytes_per_s, link / far); unchanged where nothing crosses (far = 0)."""
    if far <= 0.0:
        return bytes_per_s
    return min(bytes_per_s, link_bytes_per_s / far)
