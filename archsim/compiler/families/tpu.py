"""The TPU family: few large MXUs, a vector unit and VMEM, mapped as XLA and Pallas map them.

GEMM tiles. A Pallas TPU matmul (JAX docs, "Pallas TPU: Matrix Multiplication",
docs.jax.dev/en/latest/pallas/tpu/matmul.html) walks a grid of (bm, bk) x (bk, bn) blocks that
the pipeline double-buffers in VMEM, with an fp32 (bm, bn) accumulator in VMEM scratch; its block
edges are multiples of the MXU's and, the guide shows, the larger the blocks the fewer times A
and B are re-read from HBM, up to what VMEM holds. XLA's TPU tiling likewise has no fixed tile
menu. So the menu here is every power-of-two multiple of the MXU edge up to the dimension, and
the dimension itself (`mxu_menu`), each legal where two stages of its A and B blocks and its
fp32 accumulator fit the core's VMEM (`vmem_fits`); no cap at a GPU library's 512. The
autotuner of archsim/compiler/gemm.py ranks them as it ranks a GPU's, and the search of
archsim/choose/pick.py tunes around the fastest (`search_moves`): XLA's TPU backend picks a
kernel's tile sizes by its cost model, and its autotuner times candidates around that choice
(Kaufman et al., "A Learned Performance Model for Tensor Processing Units", MLSys 2021, on
tile-size selection); a Pallas kernel's block sizes are tuned as parameters.

Decode attention. The ragged paged attention kernel (Jiang et al., "Ragged Paged Attention",
arXiv:2604.15464; jax/experimental/pallas/ops/tpu/ragged_paged_attention.py) copies a sequence's
K/V pages from HBM into double-buffered VMEM blocks (its DEFAULT_VMEM_LIMIT_BYTES: 120 MiB) and
runs the query heads that share a KV head as the rows of one MXU pass ("grouping shared q heads
for MXU in decode", which the JAX change that added it reports raises MXU use 8x under GQA);
its query block holds the tokens of several sequences, each meeting only its own K/V. So an item
is (sequence, KV head) with the GQA group as its rows (`decode_item`): its K/V blocks stream past
the MXUs, which take R x k_per_cycle contraction elements per array per cycle, a pass covering
up to C rows, so that a block costs its K and V elements over the arrays' depth
(`decode_block_cycles`) whatever the rows up to the array's width: the rows are not padded to
the array's 256 as a GPU tile's are to its MMA. The softmax runs on the VPU on the rows padded to
a vector register's 8 sublanes (JAX docs, "TPU Pipelining": (8, 128) vregs), overlapped with the
MXU by the kernel's software pipeline (the paper's §4). The paper measures 86% of HBM bandwidth
in decode on TPU7x (Llama-3-8B): how the model is judged, not an input.

Estimated [EST]: that a pass packs K/V rows narrower than the array's depth (head_dim 128 on a
256-deep array of 2 products per PE) so the MXU's depth is used, the K/V block of
KV_BLOCK tokens (the kernel's pages per block times page size is tuned per shape and chip), and
that the kernel keeps blocks in flight to cover HBM's latency-bandwidth product (`kv_stages`).
"""

from __future__ import annotations

import math

from archsim.compiler.chip_family import EVERY_MOVE, FamilyRule, SearchMove, TileGrid, tile_grid
from archsim.compiler.formats import convert_lane_ops
from archsim.compiler.gemm_phases import stage_bytes
from archsim.compiler.program import PARTIAL_BYTES
from archsim.compiler.tiles import compute_dtype
from archsim.graph.ops import Op
from archsim.hardware import Chip, ChipFamily
from archsim.hardware.memory import hbm_latency_s
from archsim.units import ceil_div

SUBLANES = 8  # rows of a vector register (vregs are 8 x 128) [JAX docs, TPU Pipelining]
KV_BLOCK = 512  # tokens of K/V a step of the decode kernel computes on: its pages per block [EST]
LATENCY_COVER = 2.0  # a block's bytes over the latency-bandwidth product, for queueing [EST]


def mxu_menu(dim: int, edge: int) -> list[int]:
    """Block edges for a dimension: the MXU edge doubled while under twice the dimension, and
    the dimension itself (a whole dimension is one block)."""
    sizes = {dim}
    size = edge
    while size < 2 * dim:
        sizes.add(size)
        size *= 2
    return sorted(sizes)


def vmem_fits(tm, tn, tk, a: float, b: float, vmem_bytes: int):
    """Two pipeline stages of the A and B blocks and the fp32 accumulator fit in VMEM."""
    return 2 * stage_bytes(tm, tn, tk, a, b) + tm * tn * PARTIAL_BYTES <= vmem_bytes


def decode_block_cycles(
    op: Op, chip: Chip, rows: int, bk: int, score_ops: tuple[int, int], row_pad: int = SUBLANES
) -> float:
    """Cycles of one K/V block of `bk` tokens for an item of `rows` query rows: the MXUs take
    the block's K and V (bk x (d + dv) elements) at `units x R x k_per_cycle` per cycle, once per
    C rows; the VPU converts a cache stored in another format and runs the softmax on the rows
    padded to `row_pad` (a vector register's SUBLANES; lane ops at the issue width, exp on the special unit); the kernel's
    pipeline overlaps them: the slowest.

    E.g. TPU v6e (2 MXUs of 256 x 256, 2 bf16 products per PE), Llama-3-8B (d = dv = 128, a
    group of 4 rows), bk 512: 512 x 256 / (2 x 256 x 2) = 128 cycles on the MXUs; the softmax's
    8 x 512 scores x 4 lane ops / 1024 lanes = 16 cycles and 8 x 512 / 256 = 16 exps."""
    core, arr = chip.core, chip.core.array
    kpc = arr.k_rate(compute_dtype(op.dtype, op.kv_format))
    depth = core.matrix_units * arr.rows * kpc  # contraction elements per cycle over the arrays
    elements = bk * (op.head_dim + op.value_dim)
    matrix = ceil_div(rows, arr.cols) * math.ceil(elements / depth)
    padded = ceil_div(rows, row_pad) * row_pad
    lane_per_score, special_per_score = score_ops
    _ca, cb = convert_lane_ops(arr, op.dtype, op.kv_format)
    lane_ops = padded * bk * lane_per_score + elements * cb
    lanes = math.ceil(lane_ops / core.vector.issue_per_cycle)
    special = math.ceil(padded * bk * special_per_score / core.vector.special_per_cycle)
    return float(max(matrix, lanes, special))


def kv_stages(chip: Chip, block_bytes: float) -> int:
    """K/V buffers of the decode kernel: one computing and as many loading as keep LATENCY_COVER
    times a core's share of HBM bandwidth in flight over the access latency (Little's law: the
    kernel issues the copies of a block's pages together and the next block's ahead), at least
    two (double buffering), within the DMA's bytes in flight; VMEM caps them further where they
    are played (`attention._flash_phases`).

    E.g. TPU v6e, one core: 1,638 GB/s x 505 ns = 827 kB, twice that 1.65 MB; Llama-3-8B's
    block of 512 tokens of one KV head's K and V (512 B each) is 256 KiB: 1 + ceil(6.3) = 8."""
    cover = LATENCY_COVER * chip.hbm.peak_bandwidth_bytes_per_s / chip.cores * hbm_latency_s(chip)
    loading = min(math.ceil(cover / block_bytes), max(1, int(chip.core.max_inflight_bytes // block_bytes)))
    return 1 + max(1, loading)


def grouped_decode_item(
    shape: Op, chip: Chip, score_ops: tuple[int, int], block: int, row_pad: int
) -> tuple[int, int, int, float]:
    """The decode item of a (sequence, KV head) whose GQA group's query heads are the rows of
    one matrix pass, over K/V blocks of `block` tokens (halved while two of them and the
    queries overflow the core's SRAM), the softmax on the rows padded to `row_pad`."""
    rows = shape.heads // shape.kv_heads
    kv_row = shape.kv_row_elements * shape.kv_format.bytes
    q = rows * (shape.head_dim + shape.value_dim) * shape.dtype.bytes
    bk = block
    while bk > SUBLANES and q + 2 * bk * kv_row > chip.core.sram.capacity_bytes:
        bk //= 2
    return rows, rows, bk, decode_block_cycles(shape, chip, rows, bk, score_ops, row_pad)


class Tpu(FamilyRule):
    family = ChipFamily.TPU

    def gemm_tiles(self, op: Op, chip: Chip) -> TileGrid | None:
        arr = chip.core.array
        edge = max(arr.rows, arr.cols)
        tm, tn, tk = tile_grid(mxu_menu(op.m, edge), mxu_menu(op.n, edge), mxu_menu(op.k, edge))
        ok = vmem_fits(tm, tn, tk, op.dtype.bytes, op.b_dtype.bytes, chip.core.sram.capacity_bytes)
        if not ok.any():
            return None  # no block fits: the library's smallest tiles
        return tm[ok], tn[ok], tk[ok]

    def kv_stages(self, chip: Chip, block_bytes: float) -> int | None:
        return kv_stages(chip, block_bytes)

    def search_moves(self) -> frozenset[SearchMove]:
        return EVERY_MOVE

    def decode_item(self, shape: Op, chip: Chip, score_ops: tuple[int, int]) -> tuple[int, int, int, float] | None:
        return grouped_decode_item(shape, chip, score_ops, KV_BLOCK, SUBLANES)


RULE = Tpu()
