"""The dataflow family: SRAM-only, statically scheduled chips (Groq's TSP/LPU; the hypothetical
Dataflow-2S), mapped as their compilers place work.

Weights stay resident in on-chip SRAM across tokens and the matrix units take them from the SRAM
streams: Abts et al., "Think Fast: A Tensor Streaming Processor" (ISCA 2020), the memory slices
feed the functional slices over the superlanes' streams, the MXM installing its weights from
them, with no cache or register file between. So a fold's stationary weights install at the
core's SRAM stream bandwidth (`weight_install_bytes_per_cycle`, the chip file's `sram.bandwidth`,
on the LPU its 80 TB/s at 900 MHz [product brief]) rather than a row a cycle, and a batch-1
GEMV is bound by the SRAM streams, not by one array reloading its folds
(`systolic.fold_install_exact`: a 320 x 320 bf16 fold in 204,800 / 88,889 = 2.3 cycles
instead of 320).

The compiler schedules every cycle, so a kernel's folds follow one another on the array across
tile steps and items (`chains_folds`): the next fold's weights install while the current one
computes, a fold's last bytes sharing a cycle with the next's first, and the array's fill and
drain (R + C - 2) is paid once per kernel, not per step. The weights stream from the memory
slices as they install: a step's weights read while the previous step computes (the stream
buffer holds several steps' worth, `gemm_phases.phase_on`). A batch-1 GEMV of 1 x 8192 x 8192
on the LPU: 26 steps of 26 folds at 2.3 cycles and 638 of skew, 2.48 us, 68% of 80 TB/s.

Estimated [EST]: that the whole stream bandwidth can carry weights into the matrix units: the
install rate is 20-89 KB a cycle, the top the memory slices' 80 TB/s [DS], the bottom what the
superlanes carry between neighbouring units (512 B a superlane a cycle [PR], x 20 superlanes x 2
hemispheres); the architecture papers' MXM install cycles and weight buffers were not found in
a checkable copy, so that the install double-buffers is taken from the static schedule's design,
not a measured figure. At the bottom of the range the GEMV would stream at 23% of 80 TB/s. GEMM
tiles and decode attention as the kernel library's (the static schedule's own tiling is not
published), its tilings searched around the autotuner's fastest (`search_moves`,
archsim/choose/pick.py) as a compiler that schedules every cycle ahead of time can afford to.
"""

from __future__ import annotations

import math

from archsim.compiler.chip_family import EVERY_MOVE, FamilyRule, SearchMove, TileGrid, tile_grid
from archsim.compiler.program import PARTIAL_BYTES
from archsim.graph.ops import Op
from archsim.hardware import Chip, ChipFamily

KV_BLOCK = 2048  # tokens of K/V the schedule installs into the arrays at a time [EST]


def stream_install_bytes_per_cycle(chip: Chip) -> float:
    """Bytes a cycle a core's matrix units install weights at: its SRAM stream bandwidth (a
    core's `sram.bandwidth`). E.g. the LPU: 80 TB/s / 900 MHz = 88,889 B."""
    return float(chip.core.sram.bandwidth_bytes_per_cycle)


def weights_resident(chip: Chip) -> bool:
    """The chip's main memory is its on-chip SRAM (no HBM): the chip file's `memory:` no larger
    than its `l2:`, the same SRAM (the LPU's 230 MB, the wafer's 44 GB); weights stay there across
    tokens. The Dataflow-2S's 48 GB of HBM behind a 64 MiB buffer is not."""
    return chip.hbm.capacity_bytes <= chip.l2.capacity_bytes


def resident_fits(tm, tn, tk, a: float, sram_bytes: int):
    """A tile of resident weights needs no staging of its B block: two stages of its A block and
    the fp32 accumulator fit the core's stream buffer (`sram.capacity`)."""
    return 2 * tm * tk * a + tm * tn * PARTIAL_BYTES <= sram_bytes


def stream_block_cycles(shape: Op, chip: Chip, rows: int, bk: int, score_ops: tuple[int, int]) -> float:
    """Cycles of one K/V block of `bk` tokens: its K and V installed into the matrix units as
    stationary weights at the SRAM stream rate (the query rows stream past them), beside the
    softmax on the vector lanes (rows unpadded: a superlane's stream holds any rows); the
    static schedule overlaps them and the arrays' fill with the next block's: the slowest.

    E.g. the LPU, Llama-3-8B (d = dv = 128, 4 rows), bk 2,048: 2,048 x 256 x 2 B / 88,889 =
    11.8 -> 12 cycles; 4 x 2,048 x 4 lane ops / 5,120 lanes -> 7; 4 x 2,048 / 320 -> 26 exps."""
    core = chip.core
    kv_bytes = bk * (shape.head_dim + shape.value_dim) * shape.kv_format.bytes
    matrix = math.ceil(kv_bytes / stream_install_bytes_per_cycle(chip))
    lane_per_score, special_per_score = score_ops
    lanes = math.ceil(rows * bk * lane_per_score / core.vector.issue_per_cycle)
    special = math.ceil(rows * bk * special_per_score / core.vector.special_per_cycle)
    return float(max(matrix, lanes, special))


class Dataflow(FamilyRule):
    family = ChipFamily.DATAFLOW

    def weight_install_bytes_per_cycle(self, chip: Chip) -> float:
        return stream_install_bytes_per_cycle(chip)

    def chains_folds(self, chip: Chip) -> bool:
        return True

    def search_moves(self) -> frozenset[SearchMove]:
        return EVERY_MOVE

    def gemm_tiles(self, op: Op, chip: Chip) -> TileGrid | None:
        from archsim.compiler.families.tpu import mxu_menu, vmem_fits

        arr = chip.core.array
        edge = max(arr.rows, arr.cols)
        tm, tn, tk = tile_grid(mxu_menu(op.m, edge), mxu_menu(op.n, edge), mxu_menu(op.k, edge))
        cap = chip.core.sram.capacity_bytes
        if weights_resident(chip):
            ok = resident_fits(tm, tn, tk, op.dtype.bytes, cap)
        else:
            ok = vmem_fits(tm, tn, tk, op.dtype.bytes, op.b_dtype.bytes, cap)
        if not ok.any():
            return None
        return tm[ok], tn[ok], tk[ok]

    def decode_item(self, shape: Op, chip: Chip, score_ops: tuple[int, int]) -> tuple[int, int, int, float] | None:
        rows = shape.heads // shape.kv_heads
        return rows, rows, KV_BLOCK, stream_block_cycles(shape, chip, rows, KV_BLOCK, score_ops)


RULE = Dataflow()
