"""Collectives over chip-to-chip links: the α–β time of all-reduce, all-gather, reduce-scatter,
all-to-all and point-to-point sends, per algorithm (ring, tree, in-network reduction), protocol
and topology (switch, ring, 2D/3D torus; a full mesh in collectives_mesh.py).

Units: bytes, seconds, bytes/s. A collective run with a protocol pays the protocol's fixed
overhead (launch and the barrier that starts it), α per step (the link hop plus the protocol's
per-step sync) and its bytes over β: the bandwidth one chip drives in one direction toward the
step's peers, links x link bandwidth x the protocol's efficiency (the payload fraction left after
its flags and headers). As NCCL's tuner, the fastest algorithm and protocol the fabric offers is
taken. `bytes` follows NCCL's count: all-reduce, the buffer each rank holds; all-gather, the
gathered output; reduce-scatter, the input; all-to-all, what each rank sends in all (its own
share included); send, the message.

A message may be cut into `chunks` pieces sent one after another (each paying the overhead and
the α terms again), so that the pieces can run under the compute that produces them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import Enum

from archsim.hardware.chip import Interconnect, System, Topology
from archsim.hardware.collectives_mesh import mesh_options, peer_bandwidth_bytes_per_s


class Collective(str, Enum):
    ALL_REDUCE = "allreduce"
    ALL_GATHER = "allgather"
    REDUCE_SCATTER = "reducescatter"
    ALL_TO_ALL = "alltoall"
    SEND = "send"


class Algorithm(str, Enum):
    RING = "ring"  # reduce-scatter then all-gather around a ring (per torus dimension)
    TREE = "tree"  # double binary tree: reduce up, broadcast down (needs a switch)
    IN_NETWORK = "in_network"  # the switch reduces (NVLink SHARP, NCCL's NVLS)
    DIRECT = "direct"  # all-to-all and sends: every pair at once
    ONE_SHOT = "one_shot"  # custom all-reduce: each rank reads every peer's buffer and reduces (vLLM, TRT-LLM)
    TWO_SHOT = "two_shot"  # custom all-reduce: reduce-scatter then all-gather by direct reads


CUSTOM = "custom"  # the protocol a custom (non-NCCL) all-reduce kernel runs one_shot and two_shot with


class CollectiveError(ValueError):
    """A collective the system cannot run (no links, too many ranks, a shape the torus lacks)."""


@dataclass(frozen=True, kw_only=True)
class Protocol:
    """How a collective library moves data: fixed `overhead_s` per collective, `step_s` of sync per
    step on top of the link hop, and `efficiency`, the payload fraction of the line rate."""

    name: str
    overhead_s: float
    step_s: float
    efficiency: float


IDEAL = Protocol(
    name="ideal", overhead_s=0.0, step_s=0.0, efficiency=1.0
)  # the bare links: no overhead, full line rate


@dataclass(frozen=True, kw_only=True)
class Fabric(Interconnect):
    """The interconnect plus how collectives run on it.

    `protocols` the library's protocols (the fastest is taken per message); `algorithms` the
    all-reduce algorithms it runs (empty: all the topology allows); `in_network_efficiency` the
    fraction of the bulk protocol's rate a switch reduction sustains (0: the switch cannot
    reduce) and `in_network_latency_s` its extra fixed cost; `chunk_bytes` the smallest piece a
    collective is cut into to overlap the compute producing it (0: never cut); `torus_dims` the
    shape of a ring or torus (product = chips) and `torus_wraps` whether each dimension's ends are
    joined by a link (empty: all are); `launch_jitter_s` the mean of each rank's launch
    delay, which sets the wait for the last rank of a collective launched on idle chips
    (archsim/hardware/arrival.py; 0: the ranks start together).
    """

    protocols: tuple[Protocol, ...] = (IDEAL,)
    algorithms: tuple[Algorithm, ...] = ()
    in_network_efficiency: float = 0.0
    in_network_latency_s: float = 0.0
    chunk_bytes: int = 0
    torus_dims: tuple[int, ...] = ()
    torus_wraps: tuple[bool, ...] = ()
    launch_jitter_s: float = 0.0


def as_fabric(link: Interconnect, chips: int) -> Fabric:
    """A plain interconnect as a Fabric with default collective settings (shape from `chips`)."""
    if isinstance(link, Fabric):
        return link
    return Fabric(
        links_per_chip=link.links_per_chip,
        link_bandwidth_bytes_per_s=link.link_bandwidth_bytes_per_s,
        link_latency_s=link.link_latency_s,
        topology=link.topology,
        torus_dims=default_torus_dims(link.topology, chips),
    )


def system_fabric(system: System, ranks: int = 1) -> Fabric:
    """The system's fabric, refusing a system without links or with fewer than `ranks` chips."""
    if system.interconnect is None:
        raise CollectiveError(f"{system.chip.name} has no interconnect section: collectives need links")
    if ranks > system.chips:
        raise CollectiveError(f"{ranks} ranks need {ranks} chips; the system has {system.chips}")
    return as_fabric(system.interconnect, system.chips)


def default_torus_dims(topology: Topology, chips: int) -> tuple[int, ...]:
    """The most nearly cubic shape of `chips` in the topology's dimensions (8 on a 2D torus: 2 x 4)."""
    ndims = {Topology.TORUS2D: 2, Topology.TORUS3D: 3, Topology.RING: 1, Topology.MESH: 1}.get(topology, 0)
    if ndims == 0:
        return ()
    return min(_factorizations(chips, ndims), key=lambda s: (s[-1] - s[0], s))


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    """Non-decreasing tuples of `parts` whole numbers whose product is n."""
    if parts == 1:
        return [(n,)]
    return [
        (d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in _factorizations(n // d, parts - 1) if rest[0] >= d
    ]


@dataclass(frozen=True)
class CollectiveTiming:
    """Time of one collective (all its chunks): fixed and per-step latency, and transfer."""

    kind: Collective
    ranks: int
    bytes: float
    chunks: int
    algorithm: Algorithm
    protocol: str
    latency_s: float  # overhead + α terms, summed over chunks
    transfer_s: float  # bytes over bandwidth, summed over chunks

    @property
    def time_s(self) -> float:
        return self.latency_s + self.transfer_s

    @property
    def algorithm_bandwidth_bytes_per_s(self) -> float:
        """NCCL's algbw: bytes / time."""
        return self.bytes / self.time_s if self.time_s else 0.0

    @property
    def bus_bandwidth_bytes_per_s(self) -> float:
        """NCCL's busbw: algbw x bus_factor (2(n-1)/n for all-reduce)."""
        return self.algorithm_bandwidth_bytes_per_s * bus_factor(self.kind, self.ranks)


def bus_factor(kind: Collective, ranks: int) -> float:
    """NCCL's algbw-to-busbw factor: 2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter and
    all-to-all; 1 for a send (nccl-tests doc/PERFORMANCE.md)."""
    n = ranks
    if kind is Collective.ALL_REDUCE:
        return 2.0 * (n - 1) / n
    if kind is Collective.SEND:
        return 1.0
    return (n - 1) / n


def line_bandwidth_bytes_per_s(f: Fabric) -> float:
    """Line rate one chip drives in one direction: links x link bandwidth."""
    return f.links_per_chip * f.link_bandwidth_bytes_per_s


# --- the α–β formulas: each returns (latency_s, transfer_s) for one message ---------------------


def ring_allreduce(n: int, nbytes: float, alpha_s: float, bw: float) -> tuple[float, float]:
    """Ring all-reduce: 2(n-1) steps of α, each moving S/n: (2(n-1) α, 2(n-1)/n x S / B)."""
    return 2 * (n - 1) * alpha_s, 2.0 * (n - 1) / n * nbytes / bw


def tree_allreduce(n: int, nbytes: float, alpha_s: float, bw: float) -> tuple[float, float]:
    """Double binary tree all-reduce, pipelined: reduce up and broadcast down ceil(log2 n) levels,
    each tree carrying half the buffer in and out of every rank: (2 ceil(log2 n) α, 2 S / B)."""
    return 2 * math.ceil(math.log2(n)) * alpha_s, 2.0 * nbytes / bw


def in_network_allreduce(
    n: int, nbytes: float, alpha_s: float, bw: float, efficiency: float, extra_s: float
) -> tuple[float, float]:
    """The switch reduces (NVLink SHARP): each rank sends its S once and gets the reduced 1/n
    back, then multicasts its 1/n and receives the other (n-1)/n, so S (1 + 1/n) each way:
    (extra + 2 α, (1 + 1/n) x S / (η B))."""
    return extra_s + 2 * alpha_s, (1.0 + 1.0 / n) * nbytes / (efficiency * bw)


def one_shot_allreduce(n: int, nbytes: float, alpha_s: float, bw: float) -> tuple[float, float]:
    """One-shot all-reduce through a switch (a serving engine's custom kernel): a barrier, then
    every rank reads all n - 1 peers' buffers and reduces them itself: (2 alpha, (n-1) S / B)."""
    return 2 * alpha_s, (n - 1) * nbytes / bw


def two_shot_allreduce(n: int, nbytes: float, alpha_s: float, bw: float) -> tuple[float, float]:
    """Two-shot all-reduce through a switch: each rank reduces its 1/n of the buffer from the
    n - 1 peers, a barrier, then gathers the other reduced shards, each step a barrier:
    (3 alpha, 2 (n-1)/n x S / B)."""
    return 3 * alpha_s, 2.0 * (n - 1) / n * nbytes / bw


def ring_gather(n: int, nbytes: float, alpha_s: float, bw: float) -> tuple[float, float]:
    """Ring all-gather or reduce-scatter: n-1 steps of α moving S/n: ((n-1) α, (n-1)/n x S / B)."""
    return (n - 1) * alpha_s, (n - 1) / n * nbytes / bw


def direct_alltoall(n: int, nbytes: float, alpha_s: float, bw: float) -> tuple[float, float]:
    """All-to-all through a switch, every pair at once: (α, (n-1)/n x S / B)."""
    return alpha_s, (n - 1) / n * nbytes / bw


def point_to_point(nbytes: float, alpha_s: float, bw: float, hops: int = 1) -> tuple[float, float]:
    """A send to a peer `hops` away: (hops x α, S / B)."""
    return hops * alpha_s, nbytes / bw


# --- torus and ring topologies: the ranks form a sub-torus ----------------------------------------


@dataclass(frozen=True)
class TorusDim:
    """One dimension of the ranks' sub-torus: `size` ranks, wrapping if it spans the whole
    dimension; `bandwidth` both directions of the dimension's links (half on a line)."""

    size: int
    wraps: bool
    bandwidth_bytes_per_s: float


def torus_shapes(f: Fabric, ranks: int, efficiency: float) -> list[tuple[TorusDim, ...]]:
    """Every placement of `ranks` as a sub-torus (sizes <= the torus dims, product = ranks). A
    dimension wraps where the ranks span all of it and a link joins its ends (`torus_wraps`: a
    slice cut from a larger pod has none); else it is a line, its bidirectional ring folded onto
    the line's links, at half the rate."""
    dims = f.torus_dims
    joined = f.torus_wraps or (True,) * len(dims)
    per_dim = line_bandwidth_bytes_per_s(f) / len(dims) * efficiency
    shapes = []
    for sizes in itertools.product(*(range(1, d + 1) for d in dims)):
        if math.prod(sizes) == ranks:
            wraps = [k == d and j for k, d, j in zip(sizes, dims, joined)]
            shapes.append(tuple(TorusDim(k, w, per_dim if w else per_dim / 2) for k, w in zip(sizes, wraps) if k > 1))
    return shapes


def torus_gather(shape: tuple[TorusDim, ...], nbytes: float, alpha_s: float) -> tuple[float, float]:
    """Reduce-scatter (or all-gather) over a sub-torus, one dimension after another, with the
    buffer split into one part per dimension and each part taking the dimensions in a rotated
    order so that every dimension's links work at once: phase j moves (k-1)/k of each part's
    remaining data along its j-th dimension; a phase lasts as long as its slowest part.
    Latency: sum over dimensions of (k-1) α."""
    d = len(shape)
    if d == 0:
        return 0.0, 0.0
    remaining = [nbytes / d] * d
    transfer = 0.0
    for phase in range(d):
        times = []
        for part in range(d):
            dim = shape[(phase + part) % d]
            times.append((dim.size - 1) / dim.size * remaining[part] / dim.bandwidth_bytes_per_s)
            remaining[part] /= dim.size
        transfer += max(times)
    return sum(dim.size - 1 for dim in shape) * alpha_s, transfer


def torus_alltoall(shape: tuple[TorusDim, ...], nbytes: float, alpha_s: float) -> tuple[float, float]:
    """All-to-all over a sub-torus, routes spread over every link: each rank sends S/n to each
    other rank over its hop distance, so the hop-bytes are S/n x sum_i (n/k_i) x H_i (H_i the
    summed ring distance from one rank along dimension i: sum_d min(d, k-d) wrapping, (k^2-1)/3
    on a line, averaged) over the summed bandwidth of the dimensions. Latency: diameter x α."""
    n = math.prod(dim.size for dim in shape)
    hop_bytes, bw, diameter = 0.0, 0.0, 0
    for dim in shape:
        k = dim.size
        hops = sum(min(x, k - x) for x in range(1, k)) if dim.wraps else (k * k - 1) / 3.0
        hop_bytes += nbytes / n * (n / k) * hops
        bw += dim.bandwidth_bytes_per_s
        diameter += k // 2 if dim.wraps else k - 1
    return diameter * alpha_s, hop_bytes / bw if bw else 0.0


# --- putting it together ------------------------------------------------------------------------


def _algorithms(
    f: Fabric, kind: Collective, ranks: int, nbytes: float, p: Protocol
) -> list[tuple[Algorithm, float, float]]:
    """(algorithm, latency_s, transfer_s) of every way protocol `p` can run one message."""
    a = f.link_latency_s + p.step_s
    if f.topology is Topology.MESH:  # every pair joined by links of its own (collectives_mesh.py)
        chips = f.torus_dims[0] if f.torus_dims else ranks
        peer = peer_bandwidth_bytes_per_s(f.links_per_chip, chips, f.link_bandwidth_bytes_per_s) * p.efficiency
        return [(Algorithm(name), lat, tr) for name, lat, tr in mesh_options(kind.value, ranks, nbytes, a, peer)]
    bw = line_bandwidth_bytes_per_s(f) * p.efficiency
    if f.topology is Topology.SWITCH:
        if kind is Collective.ALL_REDUCE and p.name == CUSTOM:  # a custom kernel, not NCCL's
            return [
                (Algorithm.ONE_SHOT, *one_shot_allreduce(ranks, nbytes, a, bw)),
                (Algorithm.TWO_SHOT, *two_shot_allreduce(ranks, nbytes, a, bw)),
            ]
        if kind is Collective.ALL_REDUCE:
            return [
                (Algorithm.RING, *ring_allreduce(ranks, nbytes, a, bw)),
                (Algorithm.TREE, *tree_allreduce(ranks, nbytes, a, bw)),
            ]
        if kind is Collective.ALL_TO_ALL:
            return [(Algorithm.DIRECT, *direct_alltoall(ranks, nbytes, a, bw))]
        if kind is Collective.SEND:
            return [(Algorithm.DIRECT, *point_to_point(nbytes, a, bw))]
        return [(Algorithm.RING, *ring_gather(ranks, nbytes, a, bw))]
    if kind is Collective.SEND:  # to a neighbour: the links of one direction of one dimension
        return [(Algorithm.DIRECT, *point_to_point(nbytes, a, bw / (2 * len(f.torus_dims))))]
    shapes = torus_shapes(f, ranks, p.efficiency)
    if not shapes:
        raise CollectiveError(
            f"{ranks} ranks do not form a sub-torus of the {' x '.join(map(str, f.torus_dims))} {f.topology.value}"
        )
    out = []
    for shape in shapes:
        if kind is Collective.ALL_REDUCE:
            lat, tr = torus_gather(shape, nbytes, a)
            out.append((Algorithm.RING, 2 * lat, 2 * tr))
        elif kind is Collective.ALL_TO_ALL:
            out.append((Algorithm.DIRECT, *torus_alltoall(shape, nbytes, a)))
        else:
            out.append((Algorithm.RING, *torus_gather(shape, nbytes, a)))
    return out


def _options(f: Fabric, kind: Collective, ranks: int, nbytes: float) -> list[tuple[Algorithm, Protocol, float, float]]:
    """(algorithm, protocol, latency_s with the protocol's overhead, transfer_s) of every option."""
    library = [p for p in f.protocols if p.name != CUSTOM]  # a custom kernel only all-reduces
    protocols = f.protocols if kind is Collective.ALL_REDUCE else tuple(library) or (IDEAL,)
    out = [
        (algo, p, p.overhead_s + lat, tr) for p in protocols for algo, lat, tr in _algorithms(f, kind, ranks, nbytes, p)
    ]
    if kind is Collective.ALL_REDUCE and f.topology is Topology.SWITCH and f.in_network_efficiency > 0:
        bulk = max(library or [IDEAL], key=lambda p: p.efficiency)  # NCCL's NVLS runs its Simple protocol only
        lat, tr = in_network_allreduce(
            ranks,
            nbytes,
            f.link_latency_s + bulk.step_s,
            line_bandwidth_bytes_per_s(f) * bulk.efficiency,
            f.in_network_efficiency,
            f.in_network_latency_s,
        )
        out.append((Algorithm.IN_NETWORK, bulk, bulk.overhead_s + lat, tr))
    if kind is Collective.ALL_REDUCE and f.algorithms:
        out = [o for o in out if o[0] in f.algorithms]
    return out


def lone_wait_s(f: Fabric, ranks: int) -> float:
    """The wait for the last rank of a collective launched on idle chips (a collective timed on
    its own), apart from the protocol's latency and bandwidth: archsim/hardware/arrival.py."""
    from archsim.hardware.arrival import arrival_wait_s

    return arrival_wait_s(ranks, f.launch_jitter_s)


def collective_time(f: Fabric, kind: Collective, ranks: int, nbytes: float, chunks: int = 1) -> CollectiveTiming:
    """Time of `kind` over `ranks` chips moving `nbytes`, cut into `chunks` equal pieces sent one
    after another, with the fastest algorithm and protocol the fabric offers."""
    if ranks < 1 or chunks < 1:
        raise CollectiveError(f"ranks and chunks must be at least 1 (got {ranks}, {chunks})")
    if ranks == 1 and kind is not Collective.SEND:
        return CollectiveTiming(kind, 1, nbytes, chunks, Algorithm.DIRECT, "", 0.0, 0.0)
    options = _options(f, kind, ranks, nbytes / chunks)
    if not options:
        raise CollectiveError(
            f"none of the all-reduce algorithms {[a.value for a in f.algorithms]} runs on a {f.topology.value}"
        )
    algo, proto, lat, tr = min(options, key=lambda o: (o[2] + o[3], o[0].value, o[1].name))
    return CollectiveTiming(kind, ranks, nbytes, chunks, algo, proto.name, chunks * lat, chunks * tr)
