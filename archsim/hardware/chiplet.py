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

Units: bytes, bytes/s.
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
