"""Compile any op into its candidate Programs: the dispatch from op kind to its mapper."""

from __future__ import annotations

from collections.abc import Sequence

from archsim.compiler.attention import compile_attention
from archsim.compiler.gemm import Tiling, candidate_tilings, compile_gemm
from archsim.compiler.streaming import compile_copy, compile_embedding, compile_vector
from archsim.graph.ops import Op, OpKind
from archsim.hardware import Chip
from archsim.program import Program

COMPILERS = {
    OpKind.ATTENTION: compile_attention,
    OpKind.VECTOR: compile_vector,
    OpKind.EMBEDDING: compile_embedding,
    OpKind.COPY: compile_copy,
}


def compile_candidates(op: Op, chip: Chip, tilings: Sequence[Tiling] | None = None) -> list[Program]:
    """Programs the op could run as; `archsim.choose` keeps the fastest (GEMM tilings are
    autotuned: `tilings`, by default `candidate_tilings`). Collectives run on the links, not the
    cores: they have no program."""
    if op.kind.is_collective:
        raise ValueError(f"{op.kind.value} runs over the interconnect and has no core program")
    if op.kind is OpKind.GEMM:
        return [compile_gemm(op, chip, t) for t in (candidate_tilings(op, chip) if tilings is None else tilings)]
    return [COMPILERS[op.kind](op, chip)]
