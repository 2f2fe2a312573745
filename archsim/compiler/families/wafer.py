"""The wafer family: cores on a 2-D mesh (Cerebras' WSE), each computing on operands in the
SRAM beside it.

Cerebras' WSE-2/WSE-3 (Hot Chips 2021-2024, the CS-3 datasheet): each core's SRAM sits beside its
datapath and feeds it every cycle (21 PB/s over the wafer); for inference the shipped wafer keeps
a model's weights resident in that SRAM, spread over a region of the mesh. So a core's matrix work
takes its weights straight from its own SRAM (`weight_install_bytes_per_cycle`: a cluster's
`sram.bandwidth`, 21 PB/s over 840 clusters at 1.1 GHz = 22,727 B a cycle), not a row a cycle:
a 256 x 256 bf16 fold in ceil(131,072 / 22,727) = 6 cycles instead of 256.

Decode attention as the dataflow family's (archsim/compiler/families/dataflow.py): K/V installed
into the arrays at the SRAM's rate; GEMM tiles from the kernel library's menu, a GEMM's work
dealt over the clusters as over cores.

Estimated [EST]: a cluster of ~1,070 cores taken as one array (the chip file's); the mesh's
per-hop bandwidth is not charged within a GEMM (operands are read where they lie). Weight streaming from MemoryX (off-wafer) is the
training mode and is not modelled.

What a batch-1 GEMV can reach is set by the mesh, not by the SRAM's bandwidth
(tests/test_dataflow_family.py holds it to that floor): its weights lie over a rectangle of cores, the vector streamed in
across one side and the partial sums out across the other, one hop a cycle (the vendor's GEMV
layout); spreading the weights wider shortens each core's reads but lengthens both walks.
"""

from __future__ import annotations

from archsim.compiler.chip_family import SearchMove, TileGrid
from archsim.compiler.families.dataflow import Dataflow
from archsim.graph.ops import Op
from archsim.hardware import Chip, ChipFamily


class Wafer(Dataflow):
    """Weights installed from a cluster's own SRAM, GEMM tiles of resident weights and decode
    attention with K/V installed at that rate, as the dataflow family's."""

    family = ChipFamily.WAFER

    def gemm_tiles(self, op: Op, chip: Chip) -> TileGrid | None:
        """The kernel library's menu: work dealt over the 840 clusters in tiles that keep them
        all busy (tiles of whole resident weights leave most of the wafer idle)."""
        return None

    def search_moves(self) -> frozenset[SearchMove]:
        """A kernel library's tiles, timed as the library lists them."""
        return frozenset()

    def chains_folds(self, chip: Chip) -> bool:
        """Each cluster's tiles are a kernel library's, filling and draining per step [EST]."""
        return False


RULE = Wafer()
