"""Compile any op into a Program: the dispatch from op kind to its mapper."""

from __future__ import annotations

from archsim.compiler.attention import compile_attention
from archsim.compiler.gemm import candidate_tilings, compile_gemm, streaming_phase
from archsim.compiler.program import Program
from archsim.graph.ops import STRIDED_BLOCK_ELEMENTS, STRIDED_INDEX_OPS, VECTOR_COSTS, Op, OpKind
from archsim.hardware import Chip

# share of the L2 a tensor the previous kernel wrote may take and still be there for the next:
# the producer's other traffic (its weights and inputs) streams through the rest
HOT_L2_SHARE = 0.25


def _access(op: Op, chip: Chip, elements: int, read: float, write: float, operands: int) -> tuple[dict, float]:
    """How a vector op's or copy's kernel meets memory, for `elements` that each read `read` and
    write `write` bytes: `streaming_phase` arguments and the lane ops per element it adds.

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
    c = VECTOR_COSTS[op.vop]
    a = op.dtype.bytes
    elements = op.m * op.n
    access, index_ops = _access(op, chip, elements, c.reads * a, c.writes * a, c.reads + c.writes)
    phase = streaming_phase(
        chip,
        elements,
        c.reads * a,
        c.writes * a,
        c.lane_ops + index_ops,
        c.special_ops,
        op.vop.value,
        row_elements=op.n if c.row_wise else 1,
        l2_rereads_per_element=(c.passes - 1) * c.reads * a,
        row_inflight_bytes=min(c.row_step, op.n) * c.reads * a,
        **access,
    )
    return Program((phase,), op.flops(), op.min_bytes(), matrix=False)


def compile_embedding(op: Op, chip: Chip) -> Program:
    """Gather `m` rows of `n` elements from the table and write them out."""
    a = op.dtype.bytes
    phase = streaming_phase(chip, op.m * op.n, a, a, 0, 0, "embedding gather", row_elements=op.n)
    return Program((phase,), 0.0, op.min_bytes(), matrix=False)


def compile_copy(op: Op, chip: Chip) -> Program:
    """Device-to-device copy of `bytes`: read once, written once, no arithmetic (between strided
    views an element per lane at a time)."""
    a = op.dtype.bytes if op.strided else 1
    access, index_ops = _access(op, chip, int(op.bytes // a), a, a, 2)
    phase = streaming_phase(
        chip, int(op.bytes // a), a, a, index_ops, 0, "strided copy" if op.strided else "copy", **access
    )
    return Program((phase,), 0.0, op.min_bytes(), matrix=False)


COMPILERS = {
    OpKind.ATTENTION: compile_attention,
    OpKind.VECTOR: compile_vector,
    OpKind.EMBEDDING: compile_embedding,
    OpKind.COPY: compile_copy,
}


def compile_collective(op: Op, chip: Chip) -> Program:
    """A collective runs on the chip-to-chip links, not the cores: no core phases (its time comes
    from archsim.hardware.collectives through `simulate_collective`)."""
    return Program((), 0.0, 0.0, matrix=False)


def compile_candidates(op: Op, chip: Chip) -> list[Program]:
    """Programs the op could run as; the engine keeps the fastest (GEMM tilings are autotuned)."""
    if op.kind.is_collective:
        return [compile_collective(op, chip)]
    if op.kind is OpKind.GEMM:
        return [compile_gemm(op, chip, t) for t in candidate_tilings(op, chip)]
    return [COMPILERS[op.kind](op, chip)]
