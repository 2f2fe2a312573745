"""Compile any op into a Program: the dispatch from op kind to its mapper."""

from __future__ import annotations

from archsim.compiler.attention import compile_attention
from archsim.compiler.gemm import candidate_tilings, compile_gemm, streaming_phase
from archsim.compiler.program import Program
from archsim.graph.ops import VECTOR_COSTS, Op, OpKind
from archsim.hardware import Chip


def compile_vector(op: Op, chip: Chip) -> Program:
    """Elementwise / row-wise op: rows streamed through the vector units, a row per core at least."""
    c = VECTOR_COSTS[op.vop]
    a = op.dtype.bytes
    phase = streaming_phase(chip, op.m * op.n, c.reads * a, c.writes * a, c.lane_ops, c.special_ops,
                            op.vop.value, row_elements=op.n)
    return Program((phase,), op.flops(), op.min_bytes(), matrix=False)


def compile_embedding(op: Op, chip: Chip) -> Program:
    """Gather `m` rows of `n` elements from the table and write them out."""
    a = op.dtype.bytes
    phase = streaming_phase(chip, op.m * op.n, a, a, 0, 0, "embedding gather", row_elements=op.n)
    return Program((phase,), 0.0, op.min_bytes(), matrix=False)


def compile_copy(op: Op, chip: Chip) -> Program:
    """Device-to-device copy of `bytes`: read once, written once, no arithmetic."""
    phase = streaming_phase(chip, op.bytes, 1.0, 1.0, 0, 0, "copy")
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
