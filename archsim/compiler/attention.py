"""Fused (flash) attention: work items of (sequence, query head group, query block), each
streaming K and V blocks of its KV head through SRAM with an online softmax.

Per KV block, an item computes S = Q K^T (bq x d x bk on the matrix units), the softmax of
S (bq x bk exponentials on the special-function unit, a few lane ops per score) and O += P V
(bq x bk x d). Causal items skip blocks above the diagonal. The first item of a wave to
touch a K/V block reads it from HBM, the others hit in L2 (all K/V stays resident when it fits).
Queries of the `heads / kv_heads` heads that share a KV head are processed as the query rows of
one item in decode (GQA packing); in prefill each query head is its own item, as flash kernels do.
Items are dealt to cores longest first, as a block scheduler does with causal work.
With `split_kv` (flash-decoding), a decode with fewer (sequence, KV head) items than cores cuts
each item's KV range into splits that fill the cores; each split writes an fp32 partial output
to L2 and a second kernel combines them.
"""

from __future__ import annotations

import math

import numpy as np

from archsim.compiler.gemm import pipeline_bytes
from archsim.compiler.program import PARTIAL_BYTES, Program, build_phase, deal_items, entries
from archsim.compiler.streaming import Stream, streaming_phase
from archsim.compiler.tiles import matmul_cycles, vector_cycles
from archsim.graph.ops import Op, attended_pairs
from archsim.hardware import Chip
from archsim.hardware.power import Activity

BLOCK_SIZES = (256, 128, 64, 32, 16)  # query / key block edges a flash kernel offers
SOFTMAX_LANE_OPS = 4  # per score: max, scale-and-subtract (one FMA), sum, convert to bf16 (exp on the special unit)


def _blocks(op: Op, chip: Chip) -> tuple[int, int, int]:
    """(query rows per item, bq, bk): the largest, squarest blocks whose Q and O blocks and
    double-buffered K and V blocks fit in SRAM. Decode packs the GQA group as the query rows."""
    d, a = op.head_dim, op.dtype.bytes
    decode = op.q_len == 1
    rows = op.heads // op.kv_heads if decode else op.q_len
    fitting = [
        (bq, bk)
        for bq in BLOCK_SIZES
        for bk in BLOCK_SIZES
        if (2 * min(bq, rows) * d + 2 * 2 * bk * d) * a <= chip.core.sram.capacity_bytes
    ]
    if decode:
        fitting = [(bq, bk) for bq, bk in fitting if bq == min(BLOCK_SIZES)]
    if not fitting:
        return rows, min(BLOCK_SIZES), min(BLOCK_SIZES)
    bq, bk = max(fitting, key=lambda p: (p[0] * p[1], -abs(p[0] - p[1]), p[1]))
    return rows, bq, bk


def compile_attention(op: Op, chip: Chip) -> Program:
    d, a = op.head_dim, op.dtype.bytes
    rows, bq, bk = _blocks(op, chip)
    decode = op.q_len == 1
    heads_per_item = op.heads // op.kv_heads if decode else 1
    q_blocks = 1 if decode else math.ceil(op.q_len / bq)
    kv_blocks = math.ceil(op.kv_len / bk)
    past = op.kv_len - op.q_len
    qrows = rows if decode else min(bq, op.q_len)
    s_cyc = matmul_cycles(chip.core, qrows, d, bk, op.dtype)
    p_cyc = matmul_cycles(chip.core, qrows, bk, d, op.dtype)
    sm_cyc = vector_cycles(chip.core, qrows * bk * SOFTMAX_LANE_OPS, qrows * bk)
    step_cycles = float(s_cyc + p_cyc + sm_cyc)
    kv_block_bytes = 2.0 * bk * d * a
    q_bytes = qrows * heads_per_item * d * a if not decode else rows * d * a
    splits = 1
    if decode and op.split_kv:
        splits = max(1, min(kv_blocks, chip.cores // max(1, op.batch * op.kv_heads)))
    # items: (batch, head or KV head, query block or KV split, KV blocks it streams)
    items = []
    for qb in range(q_blocks):
        if op.causal and not decode:
            last_q = min(op.q_len, (qb + 1) * bq) - 1 + past
            items.append((qb, min(kv_blocks, last_q // bk + 1)))
        else:
            per = -(-kv_blocks // splits)
            items += [(sp, min(per, kv_blocks - sp * per)) for sp in range(splits) if kv_blocks > sp * per]
    splits = len(items) if decode else 1
    heads_items = op.heads // heads_per_item
    # a head's query blocks are launched together, longest first, so they share its K/V in L2
    order = sorted(items, key=lambda x: -x[1])
    all_items = [(b, h, qb, n_kv) for b in range(op.batch) for h in range(heads_items) for qb, n_kv in order]
    costs = np.array([n for *_x, n in all_items], dtype=np.float64)
    per_core = deal_items(costs, chip.cores)
    kv_total = 2.0 * op.batch * op.kv_heads * op.kv_len * d * a
    fits = kv_total <= chip.l2.capacity_bytes
    group = op.heads // op.kv_heads
    seen: set = set()
    # each K/V block is fetched from HBM by the first item to touch it; with GQA the query heads
    # of a group share their KV head's blocks through L2
    first_touch = {}
    for idx, (b, h, qb, _n_kv) in enumerate(all_items):
        kvh = h if decode else h // group
        wave = idx // chip.cores if not fits else 0
        key = (b, kvh, qb if decode else 0, wave)
        if key not in seen:
            seen.add(key)
            first_touch[idx] = True
    blocks: dict[tuple[int, bool], np.ndarray] = {}

    def item_entries(n_kv: int, miss: bool) -> np.ndarray:
        """Entries of one item: a K/V block each, the Q block with the first, the output last."""
        if (n_kv, miss) not in blocks:
            seq = entries(n_kv, cycles=step_cycles)
            seq["hbm_bytes" if miss else "l2_bytes"] = kv_block_bytes
            seq["hbm_bytes"][0] += q_bytes
            if splits == 1:
                seq["store_bytes"][-1] = q_bytes
            else:
                seq["store_l2_bytes"][-1] = q_bytes / a * PARTIAL_BYTES
            blocks[n_kv, miss] = seq
        return blocks[n_kv, miss]

    # cores that run items of the same kinds in the same order are one weighted sequence
    groups: dict[tuple, list] = {}
    for items_of_core in per_core:
        sig = tuple((all_items[idx][3], idx in first_touch) for idx in items_of_core)
        if sig:
            groups.setdefault(sig, [sig, 0])[1] += 1
    sequences = [np.concatenate([item_entries(n, m) for n, m in sig]) for sig, _w in groups.values()]
    weights = [w for _sig, w in groups.values()]
    stages = max(1, int(chip.core.sram.capacity_bytes - 2 * q_bytes) // int(kv_block_bytes))
    label = f"flash attention bq{qrows} bk{bk} kv-splits {splits}"
    inflight = pipeline_bytes(stages, kv_block_bytes)
    phases = [build_phase(sequences, stages, label, weights=weights, inflight_bytes=inflight)]
    if splits > 1:  # combine the fp32 partial outputs (and their log-sum-exps) per query row
        phases.append(
            streaming_phase(
                chip,
                Stream(
                    op.batch * op.heads * d,
                    splits * PARTIAL_BYTES,
                    a,
                    3 * splits,
                    1,
                    "split-KV combine",
                    row_elements=d,
                    reads_hit_l2=True,
                ),
            )
        )
    pairs = op.batch * op.heads * attended_pairs(op.q_len, op.kv_len, op.causal)
    activity = Activity(macs=op.flops() / 2, mac_dtype=op.dtype, lane_ops=pairs * SOFTMAX_LANE_OPS, special_ops=pairs)
    return Program(tuple(phases), op.flops(), op.min_bytes(), True, activity)
