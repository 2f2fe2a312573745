"""The hardware: systolic arrays, vector units, SRAM, L2, HBM, NoC, links, chips and systems.

Everything here is a frozen dataclass in canonical units: bytes, bytes/s, Hz, seconds and
cycles. Derived figures (peak FLOP/s, HBM peak bandwidth, streaming efficiency) are properties
computed from the physical parameters, so a config never states the same fact twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from archsim.dtypes import DType
from archsim.hardware.area import Area, AreaSpec, die_area
from archsim.hardware.chiplet import DieLink, Dies
from archsim.hardware.memory_models import MainMemory
from archsim.hardware.params import param
from archsim.hardware.power import Power
from archsim.hashing import cached_hash, record_state


class Dataflow(str, Enum):
    """Which operand stays in the processing elements of a systolic array."""

    WS = "ws"  # weight-stationary
    OS = "os"  # output-stationary
    IS = "is"  # input-stationary


class FoldMode(str, Enum):
    """Whether the fill of the next fold overlaps the drain of the last (as real arrays do)."""

    SERIAL = "serial"  # SCALE-Sim's accounting, fold after fold
    PIPELINED = "pipelined"


# The smallest matrix-kernel tile: an output tile edge and a reduction step (a library's menu
# starts here; archsim/compiler/gemm.py). A core that cannot hold two stages of it runs no GEMM.
MIN_TILE_EDGE = 8
MIN_K_STEP = 32


def min_tile_bytes(dtype: DType) -> int:
    """SRAM a core needs to run any matrix kernel: two stages (double buffering) of the smallest
    tile's A and B blocks, MIN_TILE_EDGE x MIN_K_STEP elements each."""
    return int(2 * (2 * MIN_TILE_EDGE * MIN_K_STEP) * dtype.bytes)


class ChipFamily(str, Enum):
    """How a chip's compiler maps work onto it (archsim/compiler/families/: one file each)."""

    GPU = "gpu"  # a tuned GPU kernel library (CUTLASS-style tile menu, flash attention)
    TPU = "tpu"  # XLA/Pallas: few large MXUs, a vector unit, VMEM
    TRAINIUM = "trainium"  # NeuronCore tensor/vector/scalar engines, SBUF/PSUM
    DATAFLOW = "dataflow"  # SRAM-only, statically scheduled
    WAFER = "wafer"  # cores on a 2-D mesh of one wafer
    SYSTOLIC = "systolic"  # a bare array as SCALE-Sim models it


class Topology(str, Enum):
    """How the chips of a system are joined."""

    SWITCH = "switch"
    RING = "ring"
    TORUS2D = "torus2d"
    TORUS3D = "torus3d"
    MESH = "mesh"  # every chip linked to every other (archsim/hardware/collectives_mesh.py)


@dataclass(frozen=True, kw_only=True)
class SystolicArray:
    """A `rows x cols` array of multiply-accumulate PEs.

    `k_per_cycle[dtype]` is how many products along the reduction dimension one PE takes per
    cycle in that dtype (1 for bf16; 2 where fp8 runs at twice the rate). A dtype absent from
    the map is not supported by the array.
    """

    rows: int
    cols: int
    dataflow: Dataflow
    fold_mode: FoldMode
    k_per_cycle: tuple[tuple[str, int], ...]  # (dtype name, products per PE per cycle)
    split_m_only: bool = False  # a core's arrays share a tile by rows only (Hopper's warpgroup MMA)

    def k_rate(self, dtype: DType) -> int:
        """Reduction-dimension products per PE per cycle in `dtype` (0 if unsupported)."""
        return dict(self.k_per_cycle).get(dtype.value, 0)

    def macs_per_cycle(self, dtype: DType) -> int:
        return self.rows * self.cols * self.k_rate(dtype)


@dataclass(frozen=True, kw_only=True)
class VectorUnit:
    """SIMD lanes for elementwise work and a slower special-function unit (exp, rsqrt).

    `lanes` are the FP32 arithmetic lanes; `issue_width` the thread-instructions the core's
    schedulers issue per cycle over all their pipes (FP32, integer, load/store, conversions): an
    A100 SM has 64 FP32 lanes but issues 4 warps x 32 threads per cycle. Vector kernels' lane
    ops count instructions, so they issue at `issue_width`."""

    lanes: int = param("lanes", "PositiveInt", "elementwise (FP32) operations per cycle per core", source="[WP]")
    special_per_cycle: int = param(
        "special_per_cycle", "PositiveInt", "exp/rsqrt operations per cycle per core", source="[WP]"
    )
    access_bytes: int = param("access_bytes", "Bytes", "widest load one lane issues (a vector load)", 16, source="[WP]")
    lanes_per_request: int = param(
        "lanes_per_request", "PositiveInt", "lanes whose accesses form one memory request (a GPU warp)", 32
    )
    issue_width: int = param(
        "issue_width",
        "PositiveInt",
        "thread-instructions issued per cycle per core over all pipes (default: lanes)",
        0,
        source="[WP]",
        omittable=True,
    )
    threads: int = param(
        "threads", "PositiveInt", "threads resident on a core at once (occupancy limit)", 2048, source="[DQ]"
    )

    @property
    def issue_per_cycle(self) -> int:
        return self.issue_width or self.lanes


@dataclass(frozen=True, kw_only=True)
class Sram:
    """A core's local scratchpad (shared memory on a GPU)."""

    capacity_bytes: int = param("capacity", "Bytes", "local scratchpad capacity per core", source="[WP]")
    bandwidth_bytes_per_cycle: int = param(
        "bandwidth", "Bytes", "bytes per cycle the scratchpad delivers to the units", source="[WP]"
    )
    banks: int = param("banks", "PositiveInt", "SRAM banks", source="[WP]")
    gemm_stages: int = param(
        "gemm_stages",
        "PositiveInt",
        "SRAM buffers a GEMM kernel of the chip's library cycles through, one computing and the rest"
        " loading (left out: as many as the SRAM holds)",
        0,
        source="[SW]",
        omittable=True,
    )


@dataclass(frozen=True, kw_only=True)
class Core:
    """One core (an SM, a TensorCore of a TPU): matrix units, a vector unit, local SRAM, a DMA."""

    matrix_units: int
    array: SystolicArray
    vector: VectorUnit
    sram: Sram
    max_inflight_bytes: int  # bytes one core's DMA keeps in flight (sets its bandwidth by Little's law)
    accumulator_bytes: int  # storage for the fp32 partial sums of the output tile (registers, accumulators)
    max_requests: int = 0  # memory requests one core keeps outstanding (0: bounded by bytes only)
    loads_per_warp: int = 0  # loads one warp keeps outstanding (0: no bound per warp)

    def request_inflight_bytes(self, lane_bytes: float) -> float:
        """Bytes a core keeps in flight when each lane accesses `lane_bytes` at a time: as many
        requests as it may have outstanding, each one lane access wide per lane of a request."""
        if self.max_requests <= 0:
            return float(self.max_inflight_bytes)
        return float(min(self.max_inflight_bytes, self.max_requests * self.vector.lanes_per_request * lane_bytes))

    def macs_per_cycle(self, dtype: DType) -> int:
        return self.matrix_units * self.array.macs_per_cycle(dtype)

    @property
    def mma_rows(self) -> int:
        """Rows of the smallest tile the core's matrix units compute together: with split_m_only
        every unit takes `rows` rows of it (a Hopper warpgroup MMA is 64 rows); else one array's."""
        return self.array.rows * (self.matrix_units if self.array.split_m_only else 1)


@dataclass(frozen=True, kw_only=True)
class L2:
    """The shared on-chip buffer between the cores and HBM."""

    capacity_bytes: int = param("capacity", "Bytes", "shared L2 / global buffer capacity", source="[DQ]")
    bandwidth_bytes_per_s: float = param("bandwidth", "BytesPerS", "aggregate L2 bandwidth", source="[CAL]")
    latency_s: float = param("latency", "Seconds", "L2 hit latency", source="[CAL]")
    partitions: int = param(
        "partitions", "PositiveInt", "partitions that each cache what their own cores read", 1, source="[WP]"
    )
    flush_dirty: float = param(
        "flush_dirty",
        "Share",
        "share of the L2 still dirty when a kernel timed after a flush by writes starts",
        1.0,
        source="[CAL]",
    )


@dataclass(frozen=True, kw_only=True)
class Noc:
    """The on-chip network between cores and the L2 slices."""

    bandwidth_bytes_per_s: float = param(
        "bandwidth", "BytesPerS", "bandwidth of the network between the cores and the L2", source="[EST]"
    )
    hop_latency_s: float = param("hop_latency", "SecondsOrZero", "latency of one hop", source="[EST]")
    hops: int = param("hops", "PositiveInt", "average hops from a core to an L2 slice", source="[EST]")
    multicast: int = param(
        "multicast",
        "PositiveInt",
        "cores one transfer from L2 can feed (a thread-block cluster's TMA multicast)",
        1,
        source="[WP]",
    )


@dataclass(frozen=True, kw_only=True)
class Overheads:
    """Fixed costs per kernel: back to back (as in a CUDA graph), when launched alone, and the
    prologue a matrix-unit kernel runs before its first load (tensor-map descriptors, pipeline
    barriers, shared-memory carve-out), which small elementwise kernels do not have. The
    prologues are instructions the cores run, so they are counted in cycles of the clock the
    kernel runs at (a chip at a lower clock, or held lower by its power, takes longer over them);
    the rest is the front end's and the host's, in seconds."""

    kernel_s: float = param(
        "kernel", "SecondsOrZero", "fixed part of every kernel's own duration (first blocks to last)", source="[CAL]"
    )
    gap_s: float = param(
        "gap",
        "SecondsOrZero",
        "idle time between kernels replayed back to back (graph launch latency)",
        0.0,
        source="[DQ]",
    )
    launch_s: float = param("launch", "SecondsOrZero", "extra cost of an op launched on its own", source="[CAL]")
    matrix_setup_cycles: float = param(
        "matrix_setup",
        "CyclesOrZero",
        "prologue of a matrix-unit kernel before its first load (descriptors, barriers), in cycles of the "
        "clock the kernel runs at",
        0.0,
        source="[CAL]",
    )
    attention_setup_cycles: float = param(
        "attention_setup",
        "CyclesOrZero",
        "prologue of a fused attention kernel, in cycles of the clock the kernel runs at",
        0.0,
        source="[CAL]",
    )
    host_s: float = param(
        "host", "SecondsOrZero", "the host's launch-and-synchronize round trip (0: not stated)", 0.0, source="[DQ]"
    )


@dataclass(frozen=True, kw_only=True)
class Interconnect:
    """Chip-to-chip links."""

    links_per_chip: int
    link_bandwidth_bytes_per_s: float  # one direction
    link_latency_s: float
    topology: Topology


@dataclass(frozen=True, kw_only=True)
class Chip:
    """One accelerator chip."""

    name: str
    clock_hz: float  # the highest core clock (with a power model, the one the limit may lower)
    cores: int
    core: Core
    l2: L2
    hbm: MainMemory  # its main memory, of any model (archsim/hardware/memory_models/)
    noc: Noc
    overheads: Overheads
    power: Power | None = None  # how it draws power; None: it always runs at clock_hz
    family: ChipFamily = ChipFamily.GPU  # how its compiler maps work (archsim/compiler/families/)
    dies: Dies | None = None  # chiplets, each with its own L2 before `l2` (archsim/hardware/chiplet.py); None: one die
    die_link: DieLink | None = None  # dies with their own L2 and HBM joined by a link (chiplet.py); None: one die
    area: AreaSpec | None = field(
        default=None, compare=False
    )  # what its die is built of (not timing: not in its identity)

    def __hash__(self) -> int:
        return cached_hash(self)

    def __getstate__(self) -> dict:
        return record_state(self)

    def peak_flops(self, dtype: DType) -> float:
        """Dense FLOP/s: 2 x MACs per cycle x cores x clock."""
        return 2.0 * self.core.macs_per_cycle(dtype) * self.cores * self.clock_hz

    def cycles(self, seconds: float) -> int:
        return math.ceil(seconds * self.clock_hz)


@dataclass(frozen=True, kw_only=True)
class HostLink:
    """Each chip's link to host memory (PCIe, NVLink-C2C): a transfer of n bytes takes
    latency_s + n / bandwidth_bytes_per_s."""

    bandwidth_bytes_per_s: float = param(
        "bandwidth", "BytesPerS", "chip to host memory, one direction (PCIe, C2C)", source="[DS] [EST]"
    )
    latency_s: float = param("latency", "Seconds", "fixed cost of one transfer over it", source="[EST]")


@dataclass(frozen=True, kw_only=True)
class System:
    """`chips` identical chips joined by an interconnect, each with its link to host memory."""

    chip: Chip
    chips: int = 1
    interconnect: Interconnect | None = None
    host_link: HostLink | None = None
    source: str = field(default="", compare=False)


def system_area(system: System) -> Area | None:
    """Area of one die of `system`'s chip (None when its file has no `area:` section)."""
    chip = system.chip
    spec = chip.area
    if spec is None:
        return None
    core, array = chip.core, chip.core.array
    return die_area(
        spec,
        cores=chip.cores,
        pes_per_core=core.matrix_units * array.rows * array.cols,
        dtypes=tuple(d for d, _ in array.k_per_cycle),
        lanes_per_core=core.vector.lanes,
        sram_bytes_per_core=(0.0 if spec.memory_sram_bytes else core.sram.capacity_bytes) + core.accumulator_bytes,
        l2_bytes=0.0 if spec.memory_sram_bytes else chip.l2.capacity_bytes,
        hbm_stacks=0 if spec.memory_sram_bytes else chip.hbm.phys,
        links=system.interconnect.links_per_chip if system.interconnect is not None else 0,
    )
