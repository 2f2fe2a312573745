"""The Trainium family: NeuronCores of a 128 x 128 tensor engine, vector, scalar and GpSimd
engines and an SBUF/PSUM scratchpad, mapped as NKI kernels map them.

GEMM tiles: the kernel library's menu (archsim/compiler/gemm.py), which already holds NKI's
matmul blocks (a stationary tile of at most 128 x 128 and a moving tile of at most 512 columns,
accumulated in PSUM: NKI ISA, `nki.isa.nc_matmul`); a large GEMM reaches 98.7% of peak with it.
The Neuron compiler compiles ahead of time for the chip (it is built on XLA) and NKI kernels'
tilings are tuned by timing them (AWS's nki-autotune), so the tilings around the autotuner's
fastest are searched (`search_moves`, archsim/choose/pick.py).

Decode attention: an item is a sequence's KV head. The GQA group's query heads are the
stationary operand (contraction on the 128 partitions, the group on the free axis, at most 128)
and the K/V block the moving one, whose free axis holds at most 512 columns (`nc_matmul`), so
K/V blocks are KV_BLOCK = 512 tokens; a block costs its K and V elements over the engine's depth
and the softmax runs on the engines beside it, overlapped
(archsim/compiler/families/tpu.py: `decode_block_cycles`, rows unpadded: the vector and scalar
engines work on partitions in parallel). The column tiling mode, which runs up to four
nc_matmul of a narrow stationary tile at once, is left out: the block is memory-bound without
it. The kernel keeps enough K/V blocks in flight over its DMA queues to cover HBM's latency
(`tpu.kv_stages`) [EST]: NKI issues a block's DMAs ahead of its compute, the depth of that
pipelining is the kernel's.
"""

from __future__ import annotations

from archsim.compiler.chip_family import EVERY_MOVE, FamilyRule, SearchMove
from archsim.compiler.families.tpu import grouped_decode_item, kv_stages
from archsim.graph.ops import Op
from archsim.hardware import Chip, ChipFamily

KV_BLOCK = 512  # tokens of K/V a matmul's moving tile holds: its free axis's most [NKI nc_matmul]


class Trainium(FamilyRule):
    family = ChipFamily.TRAINIUM

    def decode_item(self, shape: Op, chip: Chip, score_ops: tuple[int, int]) -> tuple[int, int, int, float] | None:
        return grouped_decode_item(shape, chip, score_ops, KV_BLOCK, 1)

    def kv_stages(self, chip: Chip, block_bytes: float) -> int | None:
        return kv_stages(chip, block_bytes)

    def search_moves(self) -> frozenset[SearchMove]:
        return EVERY_MOVE


RULE = Trainium()
