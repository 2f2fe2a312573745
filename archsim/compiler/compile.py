"""Compile any op into a Program: the dispatch from op kind to its mapper."""

from __future__ import annotations

from archsim.compiler.attention import compile_attention
from archsim.compiler.gemm import MIN_CHUNK_BYTES, candidate_tilings, compile_gemm, streaming_phase
from archsim.compiler.program import Program
from archsim.graph.ops import STRIDED_BLOCK_ELEMENTS, STRIDED_INDEX_OPS, VECTOR_COSTS, Op, OpKind
from archsim.hardware import Chip


def _in_l2(op: Op, chip: Chip, nbytes: float) -> bool:
    """Whether `nbytes` of a hot op's tensor are L2 hits: written by the previous kernel and small
    enough (half the L2) to still be there."""
    return op.hot and nbytes <= chip.l2.capacity_bytes / 2


def compile_vector(op: Op, chip: Chip) -> Program:
    """Elementwise / row-wise op streamed through the vector units.

    A row-wise op keeps each row on one core, whose block walks it `row_step` elements at a time:
    a core keeps that many bytes in flight per row it works on. An op on strided views cannot use
    vector loads: every lane accesses one element, so a core's requests carry fewer bytes.
    """
    c = VECTOR_COSTS[op.vop]
    a = op.dtype.bytes
    core = chip.core
    v = core.vector
    inflight = core.request_inflight_bytes(a if op.strided else v.access_bytes)
    lane_ops = c.lane_ops + (STRIDED_INDEX_OPS * (c.reads + c.writes) if op.strided else 0)
    phase = streaming_phase(chip, op.m * op.n, c.reads * a, c.writes * a, lane_ops, c.special_ops,
                            op.vop.value, row_elements=op.n if c.row_wise else 1,
                            l2_rereads_per_element=(c.passes - 1) * c.reads * a,
                            row_inflight_bytes=min(c.row_step, op.n) * c.reads * a,
                            inflight_bytes=inflight,
                            min_chunk_bytes=STRIDED_BLOCK_ELEMENTS * c.reads * a if op.strided else MIN_CHUNK_BYTES,
                            reads_hit_l2=_in_l2(op, chip, op.m * op.n * c.reads * a),
                            writes_hit_l2=_in_l2(op, chip, op.m * op.n * c.writes * a))
    return Program((phase,), op.flops(), op.min_bytes(), matrix=False)


def compile_embedding(op: Op, chip: Chip) -> Program:
    """Gather `m` rows of `n` elements from the table and write them out."""
    a = op.dtype.bytes
    phase = streaming_phase(chip, op.m * op.n, a, a, 0, 0, "embedding gather", row_elements=op.n)
    return Program((phase,), 0.0, op.min_bytes(), matrix=False)


def compile_copy(op: Op, chip: Chip) -> Program:
    """Device-to-device copy of `bytes`: read once, written once, no arithmetic (between strided
    views an element per lane at a time, with the index arithmetic of both)."""
    hot = dict(reads_hit_l2=_in_l2(op, chip, op.bytes), writes_hit_l2=_in_l2(op, chip, op.bytes))
    if op.strided:
        a = op.dtype.bytes
        phase = streaming_phase(chip, int(op.bytes // a), a, a, 2 * STRIDED_INDEX_OPS, 0, "strided copy",
                                inflight_bytes=chip.core.request_inflight_bytes(a),
                                min_chunk_bytes=STRIDED_BLOCK_ELEMENTS * a, **hot)
    else:
        phase = streaming_phase(chip, op.bytes, 1.0, 1.0, 0, 0, "copy", **hot)
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
