"""Streaming kernels: vector ops, copies, gathers and reductions, cut into chunks dealt to cores.

A streaming kernel reads each element's inputs once, computes on the vector units and writes its
outputs, with no reuse between elements. Its mapping is set by how it meets memory (a `Stream`):

* Chunks hold whole rows (a row-wise op keeps a row on one core), at least `min_chunk_bytes` of
  input (a thread block's worth), spread so that every core gets work when there is enough. A
  chunk larger than a quarter of SRAM is streamed in several entries.
* A row-wise kernel (norm, softmax: `row_inflight_bytes` > 0) gives each row a block that walks
  it a block-wide step at a time and does not load ahead of its own compute, so a lone row is a
  latency chain; later passes over the row find it in L2 (`l2_rereads_per_element`).
* A kernel that keeps fewer bytes in flight than the core's DMA (`inflight_bytes`: scalar loads
  on strided views) runs many small blocks per core whose loads overlap the others' compute:
  entries of about its bytes in flight.
* A kernel whose input the previous kernel just wrote finds it in L2 when it fits in
  HOT_L2_SHARE of it (`reads_hit_l2`, `writes_hit_l2`).
* A serving engine's custom per-token kernel (`Op.per_row`: vLLM's and Sarathi's 2023 rms_norm,
  silu_and_mul and rotary_embedding) gives each row (token) a block of up to PER_ROW_THREADS
  threads that loop over it with scalar loads, an element per thread per operand and pass: a
  row-wise chain of that step, with as many rows in flight on a core as its resident threads
  allow.

`compile_vector`, `compile_copy` and `compile_embedding` turn ops into Streams (graph/ops.py
holds each vector op's per-element instruction counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from archsim.compiler.program import Phase, Program, build_phase, entries
from archsim.compiler.tiles import vector_step_cycles
from archsim.graph.ops import STRIDED_BLOCK_ELEMENTS, STRIDED_INDEX_OPS, Op
from archsim.hardware import Chip
from archsim.hardware.power import Activity
from archsim.units import ceil_div

MIN_CHUNK_BYTES = 16 * 1024  # smallest slice of a streaming op one core takes (one thread block's worth)
PER_ROW_THREADS = 1024  # threads of a per-token kernel's block: min(row length, 1024) in vLLM's kernels
# share of the L2 a tensor the previous kernel wrote may take and still be there for the next:
# the producer's other traffic (its weights and inputs) streams through the rest
HOT_L2_SHARE = 0.25


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
    reads_hit_l2: bool = False
    writes_hit_l2: bool = False
    l2_rereads_per_element: float = 0.0  # bytes read again from L2 (later passes over a row)
    row_inflight_bytes: float = 0.0  # > 0: a row-wise kernel, that many bytes in flight per row
    inflight_bytes: float = float("inf")  # the kernel's bytes in flight per core
    min_chunk_bytes: float = MIN_CHUNK_BYTES
    resident_rows: int = 0  # > 0: rows a core works on at once (its resident blocks), else all of its chunk


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
    max_rows = max(1, int(chip.core.sram.capacity_bytes // 4 // row_bytes))
    # rows_per_chunk >= rows / cores, so each core takes at most one chunk: all chunks are alike
    # but the last, and cores with alike chunks run one weighted sequence
    chunks = math.ceil(rows / rows_per_chunk)
    last_rows = rows - (chunks - 1) * rows_per_chunk
    inflight_bytes = s.inflight_bytes
    if s.row_inflight_bytes > 0:
        concurrent = min(rows_per_chunk, s.resident_rows) if s.resident_rows else rows_per_chunk
        inflight_bytes = min(inflight_bytes, concurrent * s.row_inflight_bytes)
    elif inflight_bytes < chip.core.max_inflight_bytes:
        max_rows = min(max_rows, max(min_rows, int(inflight_bytes // row_bytes)))

    def chunk_entries(chunk_rows: int) -> np.ndarray:
        sizes = np.full(ceil_div(chunk_rows, max_rows), max_rows, dtype=np.int64)
        sizes[-1] = chunk_rows - max_rows * (len(sizes) - 1)
        e = sizes * s.row_elements
        out = entries(len(sizes))
        out["l2_bytes" if s.reads_hit_l2 else "hbm_bytes"] = e * s.read_bytes_per_element
        out["l2_bytes"] += e * s.l2_rereads_per_element
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


def _access(op: Op, chip: Chip, elements: int, read: float, write: float, operands: int) -> tuple[dict, float]:
    """How a vector op's or copy's kernel meets memory, for `elements` that each read `read` and
    write `write` bytes: Stream fields and the lane ops per element it adds.

    On strided views (slices of wider tensors) a kernel cannot use vector loads: each lane
    accesses one element, so a core's outstanding requests carry fewer bytes, every element pays
    the index arithmetic of its operands, and a thread block takes STRIDED_BLOCK_ELEMENTS. A hot
    op's input was just written by the kernel before: it reads (and writes) in L2 what fits in
    HOT_L2_SHARE of it.
    """
    in_l2 = chip.l2.capacity_bytes * HOT_L2_SHARE
    lane_bytes = op.dtype.bytes if op.strided else chip.core.vector.access_bytes
    kw = {
        "reads_hit_l2": op.hot and elements * read <= in_l2,
        "writes_hit_l2": op.hot and elements * write <= in_l2,
        "inflight_bytes": chip.core.request_inflight_bytes(lane_bytes),
    }
    if not op.strided:
        return kw, 0.0
    return dict(kw, min_chunk_bytes=STRIDED_BLOCK_ELEMENTS * read), float(STRIDED_INDEX_OPS * operands)


def compile_vector(op: Op, chip: Chip) -> Program:
    """Elementwise / row-wise op streamed through the vector units.

    A row-wise op keeps each row on one core, whose block walks it `row_step` elements at a time:
    a core keeps that many bytes in flight per row it works on.
    """
    c = op.vector_cost
    a = op.dtype.bytes
    elements = op.m * op.n
    if op.per_row:
        per_row = _per_row_stream(op, chip)
        return Program((streaming_phase(chip, per_row),), op.flops(), op.min_bytes(), False, stream_activity(per_row))
    access, index_ops = _access(op, chip, elements, c.reads * a, c.writes * a, c.reads + c.writes)
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


def _per_row_stream(op: Op, chip: Chip) -> Stream:
    """A per-token kernel: a block of min(row, PER_ROW_THREADS) threads per row, scalar loads of
    one element per thread per operand and pass, as many blocks per core as its threads hold."""
    c, a = op.vector_cost, op.dtype.bytes
    threads = min(op.n, PER_ROW_THREADS)
    return Stream(
        op.m * op.n,
        c.reads * a,
        c.writes * a,
        c.lane_ops,
        c.special_ops,
        f"{op.vop.value if op.vop else 'vector'} per token",
        row_elements=op.n,
        l2_rereads_per_element=(c.passes - 1) * c.reads * a,
        row_inflight_bytes=threads * c.reads * a,
        inflight_bytes=chip.core.request_inflight_bytes(a),
        resident_rows=max(1, chip.core.vector.threads // threads),
    )


def compile_embedding(op: Op, chip: Chip) -> Program:
    """Gather `m` rows of `n` elements from the table and write them out."""
    a = op.dtype.bytes
    stream = Stream(op.m * op.n, a, a, 0, 0, "embedding gather", row_elements=op.n)
    return Program((streaming_phase(chip, stream),), 0.0, op.min_bytes(), False, stream_activity(stream))


def compile_copy(op: Op, chip: Chip) -> Program:
    """Device-to-device copy of `bytes`: read once, written once, no arithmetic (between strided
    views an element per lane at a time)."""
    a = op.dtype.bytes if op.strided else 1
    access, index_ops = _access(op, chip, int(op.bytes // a), a, a, 2)
    label = "strided copy" if op.strided else "copy"
    stream = Stream(int(op.bytes // a), a, a, index_ops, 0, label, **access)
    return Program((streaming_phase(chip, stream),), 0.0, op.min_bytes(), False, stream_activity(stream))
