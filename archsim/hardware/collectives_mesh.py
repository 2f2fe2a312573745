"""Collectives on a full mesh: every chip has its own links to every other (eight MI300X joined
by Infinity Fabric, seven links each), so no step passes through a switch or a third chip.

Units: bytes, seconds, bytes/s. A chip of `chips` spreads its `links_per_chip` evenly over its
chips - 1 peers; a peer is reached at the peer bandwidth

  B_peer = links_per_chip / (chips - 1) x link bandwidth x the protocol's efficiency

whichever ranks take part, so a collective over fewer ranks than chips leaves the links to the
others idle (RCCL README, "Improving performance on MI300 when using less than 8 GPUs"). The
library (RCCL with its MSCCL algorithms, tuned per message size for eight MI300X: ROCm/rccl
pull 1088) runs an all-reduce as a ring whose n - 1 channels each take a different link, or
directly between every pair:

  ring        2(n-1) steps of alpha, each rank moving 2(n-1)/n x S over its n - 1 peer links:
              (2(n-1) alpha, 2(n-1)/n x S / ((n-1) B_peer))
  one_shot    every rank writes its whole buffer to each peer at once, flags in line with the
              data, and reduces the n copies it holds: (alpha, S / B_peer)
  two_shot    each rank writes the 1/n shard every peer reduces, then each writes its reduced
              shard to every peer: (2 alpha, 2 S/n / B_peer)

all-gather and reduce-scatter go direct (one step, each rank sending S/n to each peer or
receiving it), all-to-all direct, and a send uses the links to its one peer. Which of these runs
is collectives.py's choice: the fastest with the library's protocol overheads added.
"""

from __future__ import annotations


def peer_bandwidth_bytes_per_s(links_per_chip: int, chips: int, link_bandwidth_bytes_per_s: float) -> float:
    """Line rate from one chip to one peer, one direction: links_per_chip / (chips - 1) links."""
    return links_per_chip / max(1, chips - 1) * link_bandwidth_bytes_per_s


def mesh_ring_allreduce(n: int, nbytes: float, alpha_s: float, peer_bw: float) -> tuple[float, float]:
    """Ring all-reduce with n - 1 rings, each hop on its own link: (2(n-1) alpha,
    2(n-1)/n x S / ((n-1) B_peer))."""
    return 2 * (n - 1) * alpha_s, 2.0 * (n - 1) / n * nbytes / ((n - 1) * peer_bw)


def mesh_one_shot_allreduce(n: int, nbytes: float, alpha_s: float, peer_bw: float) -> tuple[float, float]:
    """Every rank writes its buffer to each peer over that peer's link, all at once, and reduces
    what it receives: one step, (alpha, S / B_peer)."""
    return alpha_s, nbytes / peer_bw


def mesh_two_shot_allreduce(n: int, nbytes: float, alpha_s: float, peer_bw: float) -> tuple[float, float]:
    """A direct reduce-scatter (each peer gets the S/n it reduces) then a direct all-gather of
    the reduced shards: (2 alpha, 2 S/n / B_peer)."""
    return 2 * alpha_s, 2.0 * nbytes / n / peer_bw


def mesh_direct_gather(n: int, nbytes: float, alpha_s: float, peer_bw: float) -> tuple[float, float]:
    """All-gather or reduce-scatter, every pair at once: each rank exchanges S/n with each peer
    over its link, (alpha, S/n / B_peer)."""
    return alpha_s, nbytes / n / peer_bw


def mesh_options(
    kind: str, ranks: int, nbytes: float, alpha_s: float, peer_bw: float
) -> list[tuple[str, float, float]]:
    """(algorithm, latency_s, transfer_s) of every way to run one message of collective `kind`
    (a `Collective` value: "allreduce", "send", ...) on the mesh, alpha_s a step and peer_bw the
    payload rate to one peer (`Algorithm` values by name: collectives.py imports this module)."""
    if kind == "allreduce":
        return [
            ("ring", *mesh_ring_allreduce(ranks, nbytes, alpha_s, peer_bw)),
            ("one_shot", *mesh_one_shot_allreduce(ranks, nbytes, alpha_s, peer_bw)),
            ("two_shot", *mesh_two_shot_allreduce(ranks, nbytes, alpha_s, peer_bw)),
        ]
    if kind == "send":
        return [("direct", alpha_s, nbytes / peer_bw)]
    # all-gather, reduce-scatter and all-to-all alike: S/n between each pair, all pairs at once
    return [("direct", *mesh_direct_gather(ranks, nbytes, alpha_s, peer_bw))]
