"""Streaming kernels: vector ops, copies, gathers and reductions, cut into chunks dealt to cores.

A streaming kernel reads each element's inputs once, computes on the vector units and writes its
outputs, with no reuse between elements. Its mapping is set by how it meets memory (a `Stream`):

* Chunks hold whole rows (a row-wise op keeps a row on one core), at least `min_chunk_bytes` of
  input (a thread block's worth), spread so that every core gets work when there is enough. A
  chunk is streamed in entries of at most a quarter of SRAM, fine enough to pipeline (`stream_entry_bytes`).
* A row-wise kernel (norm, softmax: `row_inflight_bytes` > 0) gives each row a block that walks
  it a block-wide step at a time and does not load ahead of its own compute, so a lone row is a
  latency chain; later passes over the row find it in L2 (`l2_rereads_per_element`).
* A kernel that keeps fewer bytes in flight than the core's DMA (`inflight_bytes`: scalar loads
  on strided views) runs many small blocks per core whose loads overlap the others' compute:
  entries of about its bytes in flight.
* A kernel whose input the previous kernel just wrote finds it in L2 when it fits in
  HOT_L2_SHARE of it (`l2_read_share`, `writes_hit_l2`), but for operands no recent kernel wrote
  (`Op.cold_reads`: a residual add's residual stream).
* A serving engine's custom per-token kernel (`Op.per_row`: vLLM's and Sarathi's 2023 rms_norm,
  silu_and_mul and rotary_embedding, csrc/*.cu) gives each row (token) a thread block that loops
  over it with scalar loads, and a core holds as many blocks as its resident threads allow. Each
  resident block is played as its own sequence (`per_token_phase`): its rows one after another,
  each row a chain of the block's steps, a step loading what its threads load at once (an
  element per thread per operand), which waits one access latency before it computes. rms_norm
  and silu_and_mul run min(row, PER_ROW_THREADS) threads, rms_norm in two passes (the second
  re-reads the row from L2); rotary_embedding runs min(q heads x rot_dim / 2, ROTARY_THREADS)
  threads on (x, y) pairs, over the query heads and then the key heads, after loading the
  token's position, and its first step waits on the token's cos/sin row from HBM. A hot input
  is read in L2 as above.

`compile_vector`, `compile_copy` and `compile_embedding` turn ops into Streams (graph/ops.py
holds each vector op's per-element instruction counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from archsim.compiler.program import build_phase
from archsim.compiler.tiles import vector_step_cycles
from archsim.graph.ops import STRIDED_BLOCK_ELEMENTS, STRIDED_INDEX_OPS, Op, VectorOp
from archsim.hardware import Chip
from archsim.hardware.power import Activity
from archsim.program import Phase, Program, entries
from archsim.units import ceil_div

MIN_CHUNK_BYTES = 16 * 1024  # smallest slice of a streaming op one core takes (one thread block's worth)
# a vectorised elementwise kernel's thread block reads, per input operand, one 16-byte vector per
# thread of its 128 (PyTorch's vectorized_elementwise_kernel: num_threads() 128, a vector of 8
# bf16 or 4 fp32 elements, aten/src/ATen/native/cuda/CUDALoops.cuh), so a small tensor spreads
# over as many cores as it has blocks (vector_block_bytes)
VECTOR_BLOCK_THREADS = 128
VECTOR_LOAD_BYTES = 16
# a core's chunk streams in entries of a quarter of its SRAM at most, and in at least STREAM_ENTRIES
# where each still holds STREAM_ENTRY_MIN_BYTES: a pipelined stream exposes its first load and its
# last store, one entry each, beside the rest [EST: 4-16 entries, 16-256 KiB]
STREAM_ENTRIES = 8
STREAM_ENTRY_MIN_BYTES = 64 * 1024
PER_ROW_THREADS = 1024  # threads of a per-token kernel's block: min(row length, 1024) in vLLM's kernels
ROTARY_THREADS = 512  # rotary_embedding's block: min(q heads x rot_dim / 2, 512) threads, one (x, y) pair each
# rotary_embedding's instructions per pair and step: the head and offset of the pair by integer
# division and remainder by the runtime rot_dim / 2 (about 20), 64-bit index arithmetic (6),
# four loads (cos, sin, x, y), the rotation in fp16 (4), two stores and the loop (4)
ROTARY_PAIR_LANE_OPS = 40
POSITION_BYTES = 8  # rotary_embedding's first load: the token's int64 position
# share of the L2 a tensor the previous kernel wrote may take and still be there for the next:
# the producer's other traffic (its weights and inputs) streams through the rest
HOT_L2_SHARE = 0.25
WARP_THREADS = 32  # threads of a warp: a per-token block of t threads is ceil(t / 32) warps


@dataclass(frozen=True)
class Stream:
    """How a streaming kernel over `elements` meets memory and the vector units (per element:
    bytes read and written, lane and special-function ops)."""

    elements: int
    read_bytes_per_element: float
    write_bytes_per_element: float
    lane_ops_per_element: float
    special_ops_per_element: float
    label: str
    row_elements: int = 1  # elements per row a core keeps together
    l2_read_share: float = 0.0  # share of the reads found in L2 (a hot op's just-written operands)
    writes_hit_l2: bool = False
    l2_rereads_per_element: float = 0.0  # bytes read again from L2 (later passes over a row)
    row_inflight_bytes: float = 0.0  # > 0: a row-wise kernel, that many bytes in flight per row
    inflight_bytes: float = float("inf")  # the kernel's bytes in flight per core
    min_chunk_bytes: float = MIN_CHUNK_BYTES


def stream_activity(s: Stream) -> Activity:
    """The vector-unit work of a streaming kernel (its bytes are counted when it is played)."""
    return Activity(lane_ops=s.elements * s.lane_ops_per_element, special_ops=s.elements * s.special_ops_per_element)


def streaming_phase(chip: Chip, s: Stream) -> Phase:
    """The phase of a streaming kernel: chunks of rows, one per core, in entries (see module doc)."""
    cores = chip.cores
    per_el = max(s.read_bytes_per_element, 1e-9)
    row_bytes = per_el * s.row_elements
    rows = max(1, s.elements // s.row_elements)
    # a row-wise kernel gives each row a thread block of its own
    min_rows = 1 if s.row_inflight_bytes > 0 else max(1, math.ceil(s.min_chunk_bytes / row_bytes))
    rows_per_chunk = max(min_rows, math.ceil(rows / cores))
    # a row-wise kernel loads no entry ahead of its compute: its entries are a quarter of SRAM
    chunk_bytes = 0.0 if s.row_inflight_bytes > 0 else rows_per_chunk * row_bytes
    max_rows = max(1, int(stream_entry_bytes(chip, chunk_bytes) // row_bytes))
    # rows_per_chunk >= rows / cores, so each core takes at most one chunk: all chunks are alike
    # but the last, and cores with alike chunks run one weighted sequence
    chunks = math.ceil(rows / rows_per_chunk)
    last_rows = rows - (chunks - 1) * rows_per_chunk
    inflight_bytes = s.inflight_bytes
    if s.row_inflight_bytes > 0:
        inflight_bytes = min(inflight_bytes, rows_per_chunk * s.row_inflight_bytes)
    elif inflight_bytes < chip.core.max_inflight_bytes:
        max_rows = min(max_rows, max(min_rows, int(inflight_bytes // row_bytes)))

    def chunk_entries(chunk_rows: int) -> np.ndarray:
        sizes = np.full(ceil_div(chunk_rows, max_rows), max_rows, dtype=np.int64)
        sizes[-1] = chunk_rows - max_rows * (len(sizes) - 1)
        e = sizes * s.row_elements
        out = entries(len(sizes))
        out["hbm_bytes"] = e * s.read_bytes_per_element * (1.0 - s.l2_read_share)
        out["l2_bytes"] = e * (s.read_bytes_per_element * s.l2_read_share + s.l2_rereads_per_element)
        for size in np.unique(sizes):
            n = int(size) * s.row_elements
            out["cycles"][sizes == size] = vector_step_cycles(
                chip.core, n * s.lane_ops_per_element, n * s.special_ops_per_element
            )
        out["store_l2_bytes" if s.writes_hit_l2 else "store_bytes"] = e * s.write_bytes_per_element
        return out

    sequences, weights = [chunk_entries(rows_per_chunk)], [chunks - 1]
    if last_rows == rows_per_chunk:
        weights[0] += 1
    else:
        sequences.append(chunk_entries(last_rows))
        weights.append(1)
    if weights[0] == 0:
        sequences, weights = sequences[1:], weights[1:]
    stages = max(2, chip.core.sram.capacity_bytes // max(1, int(max_rows * row_bytes)))
    if s.row_inflight_bytes > 0:
        stages = 1  # a row's block loads, reduces and writes its row in turn: no loads run ahead
    return build_phase(sequences, stages, s.label, weights=weights, inflight_bytes=inflight_bytes)


def stream_entry_bytes(chip: Chip, chunk_bytes: float) -> float:
    """Input bytes of one entry of a core's streamed chunk of `chunk_bytes`: a quarter of its
    SRAM (double-buffered loads beside the stores draining), but where that leaves the chunk in
    fewer than STREAM_ENTRIES entries, the chunk's STREAM_ENTRIES-th (of a chunk of 0 bytes: a
    quarter, for a kernel that loads no entry ahead of its compute), down to
    STREAM_ENTRY_MIN_BYTES: a compiler that pipelines a stream (a DMA ring of blocks, as Pallas's
    and the Neuron compiler's double-buffered block loops; a dataflow chip's streams) cuts it
    fine enough that the first load and the last store, which nothing overlaps, are a small part.
    A GPU's quarter of shared memory (57 KiB on Hopper) is under the floor: its entries are as
    before. E.g. a 16 MiB core streaming an 8 MiB chunk: 4 MiB a quarter, 2 entries; 1 MiB, 8."""
    quarter = chip.core.sram.capacity_bytes / 4
    if chunk_bytes <= 0:
        return quarter
    return min(quarter, max(STREAM_ENTRY_MIN_BYTES, chunk_bytes / STREAM_ENTRIES))


def hot_read_share(op: Op, chip: Chip, read_bytes: float, reads: int) -> float:
    """Of a kernel's `read_bytes` over `reads` operands, the share found in L2: a hot op's
    operands but its `cold_reads`, where they fit in HOT_L2_SHARE of it."""
    share = max(0, reads - op.cold_reads) / reads if op.hot and reads > 0 else 0.0
    return share if read_bytes * share <= chip.l2.capacity_bytes * HOT_L2_SHARE else 0.0


def _access(
    op: Op, chip: Chip, elements: int, read: float, write: float, reads: int, writes: int
) -> tuple[dict, float]:
    """How a vector op's or copy's kernel meets memory, for `elements` that each read `read` and
    write `write` bytes over `reads` and `writes` operands: Stream fields and the lane ops per
    element it adds.

    On strided views (slices of wider tensors) a kernel cannot use vector loads: each lane
    accesses one element, so a core's outstanding requests carry fewer bytes, every element pays
    the index arithmetic of its operands, and a thread block takes STRIDED_BLOCK_ELEMENTS. A hot
    op's input was just written by the kernel before: it reads (and writes) in L2 what fits in
    HOT_L2_SHARE of it, its cold operands (`Op.cold_reads`) from HBM.
    """
    in_l2 = chip.l2.capacity_bytes * HOT_L2_SHARE
    lane_bytes = op.dtype.bytes if op.strided else chip.core.vector.access_bytes
    kw = {
        "l2_read_share": hot_read_share(op, chip, elements * read, reads),
        "writes_hit_l2": op.hot and elements * write <= in_l2,
        "inflight_bytes": chip.core.request_inflight_bytes(lane_bytes),
    }
    if not op.strided:
        return kw, 0.0
    return dict(kw, min_chunk_bytes=STRIDED_BLOCK_ELEMENTS * read), float(STRIDED_INDEX_OPS * (reads + writes))


def vector_block_bytes(reads: int) -> float:
    """Input bytes one thread block of a vectorised elementwise kernel takes, the smallest chunk a
    core is dealt: VECTOR_BLOCK_THREADS x VECTOR_LOAD_BYTES x reads (a bf16 add, two operands:
    128 x 16 x 2 = 4,096 B, 1,024 elements; a SiLU, one: 2,048 B)."""
    return float(VECTOR_BLOCK_THREADS * VECTOR_LOAD_BYTES * reads)


def compile_vector(op: Op, chip: Chip) -> Program:
    """Elementwise / row-wise op streamed through the vector units.

    A row-wise op keeps each row on one core, whose block walks it `row_step` elements at a time:
    a core keeps that many bytes in flight per row it works on.
    """
    c = op.vector_cost
    a = op.dtype.bytes
    elements = op.m * op.n
    if op.per_row:
        phase, activity = per_token_phase(op, chip)
        return Program((phase,), op.flops(), op.min_bytes(), False, activity)
    access, index_ops = _access(op, chip, elements, c.reads * a, c.writes * a, c.reads, c.writes)
    if not op.strided:
        access["min_chunk_bytes"] = vector_block_bytes(c.reads)
    stream = Stream(
        elements,
        c.reads * a,
        c.writes * a,
        c.lane_ops + index_ops,
        c.special_ops,
        op.vop.value if op.vop else "vector",
        row_elements=op.n if c.row_wise else 1,
        l2_rereads_per_element=(c.passes - 1) * c.reads * a,
        row_inflight_bytes=min(c.row_step, op.n) * c.reads * a,
        **access,
    )
    return Program((streaming_phase(chip, stream),), op.flops(), op.min_bytes(), False, stream_activity(stream))


def _token_steps(op: Op) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, int]:
    """A per-token kernel's block over one row: its threads, its steps (an ENTRY each: the
    bytes its threads load at once, from HBM or for re-reads from L2, and store), the lane and
    special-function ops each step issues, and how many of its first steps wait on HBM even
    where the kernel's input is in L2."""
    c, a = op.vector_cost, op.dtype.bytes
    if op.vop is VectorOp.ROPE:
        if op.heads <= 0 or op.head_dim <= 0 or (op.heads + op.kv_heads) * op.head_dim != op.n:
            raise ValueError(
                f"a per-token rotary over {op.n} elements a token needs its q and k heads "
                f"(heads {op.heads} + kv_heads {op.kv_heads}) x head_dim {op.head_dim} to be {op.n}"
            )
        half = op.head_dim // 2
        threads = min(op.heads * half, ROTARY_THREADS)
        pairs = [min(threads, left) for heads in (op.heads, op.kv_heads) for left in range(heads * half, 0, -threads)]
        steps = entries(1 + len(pairs))
        steps["hbm_bytes"][0] = POSITION_BYTES
        active = np.array(pairs, dtype=np.float64)
        steps["hbm_bytes"][1:] = active * 2 * a  # x and y of each pair
        steps["hbm_bytes"][1] += 2 * half * a  # the token's cos and sin
        steps["store_bytes"][1:] = active * 2 * a
        lane = np.concatenate(([0.0], active * ROTARY_PAIR_LANE_OPS))
        return threads, steps, lane, np.zeros(len(steps)), 2  # the position, and the cos/sin row
    threads = min(op.n, PER_ROW_THREADS)
    active = np.array([min(threads, left) for left in range(op.n, 0, -threads)], dtype=np.float64)
    steps = entries(c.passes * len(active))
    per_pass = len(active)
    steps["hbm_bytes"][:per_pass] = active * c.reads * a
    steps["l2_bytes"][per_pass:] = np.tile(active, c.passes - 1) * c.reads * a  # later passes find the row in L2
    steps["store_bytes"][-per_pass:] = active * c.writes * a
    per_step = np.tile(active, c.passes)
    return threads, steps, per_step * c.lane_ops / c.passes, per_step * c.special_ops / c.passes, 0


def per_token_phase(op: Op, chip: Chip) -> tuple[Phase, Activity]:
    """A per-token kernel's phase (see the module doc) and its vector work: each of a core's
    resident blocks a sequence of rows, a row its block's steps, each loading one step's bytes
    (one access latency) before it computes."""
    threads, steps, lane, special, cold = _token_steps(op)
    steps["cycles"] = [vector_step_cycles(chip.core, float(n), float(s)) for n, s in zip(lane, special, strict=True)]
    in_l2 = chip.l2.capacity_bytes * HOT_L2_SHARE
    c, a = op.vector_cost, op.dtype.bytes
    share = hot_read_share(op, chip, op.m * op.n * c.reads * a, c.reads)  # what the kernel before just wrote
    moved = steps["hbm_bytes"][cold:] * share
    steps["l2_bytes"][cold:] += moved
    steps["hbm_bytes"][cold:] -= moved
    if op.hot and op.m * op.n * c.writes * a <= in_l2:
        steps["store_l2_bytes"] += steps["store_bytes"]
        steps["store_bytes"] = 0.0
    resident = max(1, chip.core.vector.threads // threads)
    slots = chip.cores * resident
    rows_per_slot = ceil_div(op.m, slots)
    full, last = divmod(op.m, rows_per_slot)
    sequences, weights = [np.tile(steps, rows_per_slot)], [full]
    if last:
        sequences.append(np.tile(steps, last))
        weights.append(1)
    inflight = float(np.max(steps["hbm_bytes"] + steps["l2_bytes"]))
    label = f"{op.vop.value if op.vop else 'vector'} per token"
    warps = min(resident, ceil_div(op.m, chip.cores)) * ceil_div(threads, WARP_THREADS)  # blocks resident on a core
    phase = build_phase(sequences, 1, label, weights=weights, inflight_bytes=inflight, warps=warps)
    activity = Activity(lane_ops=op.m * float(lane.sum()), special_ops=op.m * float(special.sum()))
    return phase, activity


def compile_embedding(op: Op, chip: Chip) -> Program:
    """Gather `m` rows of `n` elements from the table and write them out."""
    a = op.dtype.bytes
    stream = Stream(op.m * op.n, a, a, 0, 0, "embedding gather", row_elements=op.n)
    return Program((streaming_phase(chip, stream),), 0.0, op.min_bytes(), False, stream_activity(stream))


def compile_copy(op: Op, chip: Chip) -> Program:
    """Device-to-device copy of `bytes`: read once, written once, no arithmetic (between strided
    views an element per lane at a time)."""
    a = op.dtype.bytes if op.strided else 1
    access, index_ops = _access(op, chip, int(op.bytes // a), a, a, 1, 1)
    label = "strided copy" if op.strided else "copy"
    stream = Stream(int(op.bytes // a), a, a, index_ops, 0, label, **access)
    return Program((streaming_phase(chip, stream),), 0.0, op.min_bytes(), False, stream_activity(stream))
