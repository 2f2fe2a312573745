"""Die area of a chip, in mm2, from what it is built of: the processing elements of its matrix
units (per dtype they multiply), its vector lanes and the rest of each core's logic, local SRAM
and L2 at the density of the process node, the on-chip network, one PHY per HBM stack and per
link, and a share of the die for what the model does not count (host interface, media engines,
control, pads):

    A_die = (cores x A_core + L2 bytes x d_L2 + memory bytes x d_SRAM + A_NoC
             + stacks x A_HBM-PHY + links x A_link-PHY) / (1 - uncore share)
    A_core = PEs x sum over the array's dtypes of a_MAC[dtype] + lanes x a_lane + A_core-logic
             + SRAM bytes x d_SRAM

A part that leaves off some of its die's cores, L2, stacks or links (a harvested GPU) states them
(`area.harvested`), and SRAM a core has beyond what the timing model uses (the rest of a GPU's
register file) is `area.other_sram`, so that the area is the die's and moves with the design. A
chip whose main memory is on-chip SRAM (`memory:` instead of `hbm:`) has that memory on its die,
at the cores' SRAM density, and no HBM PHYs; its L2 and the cores' scratchpads are views of
that one SRAM (as in the shipped SRAM-only chips), not counted again. Logic areas not given in the chip file take the
node's defaults (`NODES`): Horowitz's 45 nm areas of floating-point and integer units (ISSCC
2014) scaled by the node's published logic density; SRAM densities are the node's high-density
bitcell over the fraction of a macro that is bitcells. A die above the reticle limit (26 x 33 mm,
858 mm2) cannot be printed whole: the design needs chiplets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import Enum

from archsim.dtypes import DType

RETICLE_MM2 = 26.0 * 33.0  # the largest field a DUV or EUV scanner exposes (858 mm2)
MIB = 2.0**20
UM2 = 1e-6  # mm2 per um2

# Areas at 45 nm (Horowitz, "Computing's energy problem", ISSCC 2014), um2: the multiplier of
# each dtype and the adder that accumulates its products (fp32 for the floating-point dtypes,
# 32-bit integer for int8)
MAC_UM2_45NM = {
    DType.BF16.value: 1640.0 + 4184.0,  # 16-bit FP multiply, 32-bit FP add
    DType.FP16.value: 1640.0 + 4184.0,
    DType.FP8.value: 282.0 + 1360.0,  # an 8-bit multiply, 16-bit FP add
    DType.INT8.value: 282.0 + 137.0,  # 8-bit multiply, 32-bit add
    DType.FP32.value: 7700.0 + 4184.0,  # 32-bit FP multiply and add
    # not in Horowitz's table: a multiplier's array grows with the square of its width, so a
    # 4-bit multiply is a quarter of the 8-bit one (282 / 4); a block scale is applied once per
    # block (16 or 32 products), its multiplier shared [EST]
    DType.INT4.value: 282.0 / 4 + 137.0,  # 4-bit multiply, 32-bit add
    DType.MXFP8.value: 282.0 + 1360.0,  # as fp8
    DType.MXFP4.value: 282.0 / 4 + 1360.0,  # a 4-bit (E2M1) multiply, 16-bit FP add
    DType.NVFP4.value: 282.0 / 4 + 1360.0,
}
LANE_UM2_45NM = 7700.0 + 4184.0  # an FP32 fused multiply-add lane
LOGIC_45NM_MTR_PER_MM2 = 3.33  # transistor density of a 45 nm logic process (Intel 45 nm)
SCRATCHPAD_BITCELL_SHARE = 0.30  # of a banked scratchpad macro's area (periphery, sense amps, ECC) [EST]
CACHE_BITCELL_SHARE = 0.25  # of a cache's area (tags, ECC, slice control): AMD Zen 3's 32 MiB L3 at N7 [EST]


class Node(str, Enum):
    """A process node, by its foundry's name (TSMC); 4N is NVIDIA's N5-family node."""

    N16 = "n16"
    N7 = "n7"
    N5 = "n5"
    N4 = "n4"
    N3 = "n3"


@dataclass(frozen=True)
class NodeDensity:
    logic_mtr_per_mm2: float  # million transistors per mm2 of high-density logic
    bitcell_um2: float  # high-density 6T SRAM bitcell

    @property
    def logic_scale(self) -> float:
        """Area of a 45 nm logic block at this node, as a fraction of it."""
        return LOGIC_45NM_MTR_PER_MM2 / self.logic_mtr_per_mm2

    @property
    def sram_mm2_per_byte(self) -> float:
        return 8.0 * self.bitcell_um2 * UM2 / SCRATCHPAD_BITCELL_SHARE

    @property
    def cache_mm2_per_byte(self) -> float:
        return 8.0 * self.bitcell_um2 * UM2 / CACHE_BITCELL_SHARE


# Logic densities: TSMC's published high-density figures as WikiChip collects them (N4: N5 less
# 6%, TSMC); bitcells: TSMC at IEDM 2016 (N7), 2019 (N5), 2022 (N3), and 16FF+.
NODES: dict[Node, NodeDensity] = {
    Node.N16: NodeDensity(28.88, 0.074),
    Node.N7: NodeDensity(91.2, 0.027),
    Node.N5: NodeDensity(171.3, 0.021),
    Node.N4: NodeDensity(171.3 / 0.94, 0.021),
    Node.N3: NodeDensity(291.2, 0.0199),
}


@dataclass(frozen=True, kw_only=True)
class AreaSpec:
    """What a chip file states of its die (`area:`); a field left None takes the node's default."""

    node: Node
    mac_mm2: tuple[tuple[str, float], ...] = ()  # (dtype, mm2 a PE adds to multiply it)
    lane_mm2: float | None = None  # one vector lane
    core_logic_mm2: float = 0.0  # per core: schedulers, load/store, caches' control, ...
    sram_mm2_per_byte: float | None = None
    l2_mm2_per_byte: float | None = None
    noc_mm2: float = 0.0
    hbm_phy_mm2: float = 0.0  # per HBM stack
    link_phy_mm2: float = 0.0  # per chip-to-chip link
    uncore_share: float = 0.0  # of the die: what the model does not count
    other_sram_bytes: float = 0.0  # per core, beyond its scratchpad and accumulators
    harvested_cores: int = 0  # on the die but left off by the part
    harvested_l2_bytes: float = 0.0
    harvested_hbm_stacks: int = 0
    harvested_links: int = 0
    memory_sram_bytes: float = 0.0  # main memory on the die (an SRAM-only chip), not in a stack

    def mac(self, dtype: str) -> float:
        """mm2 a PE adds to multiply `dtype`: the file's, else the node's default."""
        given = dict(self.mac_mm2)
        if dtype in given:
            return given[dtype]
        return MAC_UM2_45NM[dtype] * UM2 * NODES[self.node].logic_scale


@dataclass(frozen=True)
class Area:
    """A die's area by block, in mm2."""

    matrix_mm2: float = 0.0
    lanes_mm2: float = 0.0
    core_logic_mm2: float = 0.0
    sram_mm2: float = 0.0
    l2_mm2: float = 0.0
    noc_mm2: float = 0.0
    hbm_phy_mm2: float = 0.0
    link_phy_mm2: float = 0.0
    uncore_mm2: float = 0.0

    @property
    def die_mm2(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    @property
    def fits_reticle(self) -> bool:
        return self.die_mm2 <= RETICLE_MM2

    @property
    def dies(self) -> int:
        """Dies the design needs: one if it fits the reticle, else as many reticle-sized chiplets
        as its area fills (their die-to-die links not counted)."""
        return max(1, math.ceil(self.die_mm2 / RETICLE_MM2))

    def parts(self) -> dict[str, float]:
        """mm2 by block: matrix, lanes, core_logic, sram, l2, noc, hbm_phy, link_phy, uncore."""
        return {f.name.removesuffix("_mm2"): getattr(self, f.name) for f in fields(self)}


def core_area(
    spec: AreaSpec, pes: int, dtypes: tuple[str, ...], lanes: int, sram_bytes: float
) -> tuple[float, float, float, float]:
    """(matrix, vector, logic, SRAM) mm2 of one core of `pes` processing elements that multiply
    `dtypes`, `lanes` vector lanes and `sram_bytes` of local storage."""
    density = NODES[spec.node]
    lane = spec.lane_mm2 if spec.lane_mm2 is not None else LANE_UM2_45NM * UM2 * density.logic_scale
    sram = spec.sram_mm2_per_byte if spec.sram_mm2_per_byte is not None else density.sram_mm2_per_byte
    matrix = pes * sum(spec.mac(d) for d in dtypes)
    return matrix, lanes * lane, spec.core_logic_mm2, sram_bytes * sram


def die_area(
    spec: AreaSpec,
    *,
    cores: int,
    pes_per_core: int,
    dtypes: tuple[str, ...],
    lanes_per_core: int,
    sram_bytes_per_core: float,
    l2_bytes: float,
    hbm_stacks: int,
    links: int,
) -> Area:
    """The die's area (see the module docstring): the counts are the chip's enabled ones, to which
    `spec` adds what the part leaves off."""
    n = cores + spec.harvested_cores
    sram_bytes = sram_bytes_per_core + spec.other_sram_bytes
    matrix, lanes, logic, sram = core_area(spec, pes_per_core, dtypes, lanes_per_core, sram_bytes)
    memory = core_area(spec, 0, (), 0, spec.memory_sram_bytes)[3]
    l2_density = spec.l2_mm2_per_byte if spec.l2_mm2_per_byte is not None else NODES[spec.node].cache_mm2_per_byte
    counted = Area(
        matrix_mm2=n * matrix,
        lanes_mm2=n * lanes,
        core_logic_mm2=n * logic,
        sram_mm2=n * sram + memory,
        l2_mm2=(l2_bytes + spec.harvested_l2_bytes) * l2_density,
        noc_mm2=spec.noc_mm2,
        hbm_phy_mm2=(hbm_stacks + spec.harvested_hbm_stacks) * spec.hbm_phy_mm2,
        link_phy_mm2=(links + spec.harvested_links) * spec.link_phy_mm2,
    )
    modelled = counted.die_mm2
    return replace(counted, uncore_mm2=modelled * spec.uncore_share / (1.0 - spec.uncore_share))
