"""Operators of an LLM step: frozen, hashable records of what is computed on which shapes.

An op's identity (and so its cached timing) is its kind and shape; its `name` and `repeat`
(how many times the step runs it, e.g. once per layer) do not take part in equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from archsim.hardware import DType


class OpKind(str, Enum):
    GEMM = "gemm"
    ATTENTION = "attention"
    VECTOR = "vector"
    EMBEDDING = "embedding"
    COPY = "copy"
    # collectives over the chip-to-chip links (archsim.hardware.collectives times them)
    ALL_REDUCE = "allreduce"
    ALL_GATHER = "allgather"
    REDUCE_SCATTER = "reducescatter"
    ALL_TO_ALL = "alltoall"
    SEND = "send"

    @property
    def is_collective(self) -> bool:
        return self in COLLECTIVE_KINDS


COLLECTIVE_KINDS = frozenset({OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.ALL_TO_ALL,
                              OpKind.SEND})


class VectorOp(str, Enum):
    """Elementwise and row-wise ops on `rows x cols` tensors."""

    RMSNORM = "rmsnorm"
    ADD = "add"
    MUL = "mul"
    SILU = "silu"
    SILU_MUL = "silu_mul"
    SOFTMAX = "softmax"
    ROPE = "rope"
    ADD_RMSNORM = "add_rmsnorm"  # residual add fused into the norm
    TOPK = "topk"  # MoE router: softmax and top-k over experts


@dataclass(frozen=True)
class VectorCost:
    """Per-element traffic and work of a vector op: tensors read and written, lane ops, specials."""

    reads: int
    writes: int
    lane_ops: int
    special_ops: int


VECTOR_COSTS: dict[VectorOp, VectorCost] = {
    # rmsnorm: square, sum, scale, multiply by weight; one rsqrt per row (negligible per element).
    # A standalone norm kernel reads its row twice: once for the statistics, once to normalise.
    VectorOp.RMSNORM: VectorCost(2, 1, 4, 0),
    VectorOp.ADD: VectorCost(2, 1, 1, 0),
    VectorOp.MUL: VectorCost(2, 1, 1, 0),
    VectorOp.SILU: VectorCost(1, 1, 3, 1),  # x / (1 + exp(-x))
    VectorOp.SILU_MUL: VectorCost(2, 1, 4, 1),
    # max, subtract, exp, sum, divide; a block softmax over a long row reads it in three passes
    # (maximum, sum of exponentials, normalise and write)
    VectorOp.SOFTMAX: VectorCost(3, 1, 4, 1),
    VectorOp.ROPE: VectorCost(1, 1, 6, 0),  # rotate half: 4 multiplies, 2 adds (cos/sin cached)
    VectorOp.ADD_RMSNORM: VectorCost(2, 2, 5, 0),
    VectorOp.TOPK: VectorCost(1, 1, 8, 1),
}


@dataclass(frozen=True)
class Op:
    """One operator. Fields used depend on `kind`; unused ones stay zero.

    GEMM: y[m, n] = x[m, k] @ W[n, k]^T, `groups` independent GEMMs (MoE experts) of that shape.
    ATTENTION: `batch` sequences, `heads`/`kv_heads` of `head_dim`, `q_len` new queries over
    `kv_len` keys (the new ones included), causal or not.
    VECTOR: `vop` over a `m x n` tensor. EMBEDDING: gather `m` rows of `n` elements.
    COPY: `bytes` moved (read once, written once).
    Collectives (ALL_REDUCE, ..., SEND): `bytes` in NCCL's count among `ranks` chips, `m` token
    rows (how finely the message can be cut), sent as `chunks` pieces.
    """

    kind: OpKind
    dtype: DType = DType.BF16  # compute / activation format
    m: int = 0
    k: int = 0
    n: int = 0
    groups: int = 1
    weight_dtype: DType | None = None  # GEMM B operand format (defaults to dtype)
    out_dtype: DType | None = None  # GEMM output format (defaults to dtype; fp8 GEMMs write bf16)
    batch: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    q_len: int = 0
    kv_len: int = 0
    causal: bool = False
    split_kv: bool = False  # decode attention may split the KV length across cores (flash-decoding)
    vop: VectorOp | None = None
    bytes: int = 0
    kernels: int = 1  # kernel launches this op stands for (unfused eager code runs several)
    ranks: int = 0  # chips taking part in a collective
    chunks: int = 1  # pieces a collective is sent as (to overlap the compute that produces it)
    name: str = field(default="", compare=False)
    repeat: int = field(default=1, compare=False)

    def named(self, name: str, repeat: int = 1) -> "Op":
        return replace(self, name=name, repeat=repeat)

    @property
    def b_dtype(self) -> DType:
        return self.weight_dtype or self.dtype

    @property
    def c_dtype(self) -> DType:
        return self.out_dtype or self.dtype

    def flops(self) -> float:
        """Useful floating-point operations (2 per multiply-accumulate)."""
        if self.kind is OpKind.GEMM:
            return 2.0 * self.groups * self.m * self.k * self.n
        if self.kind is OpKind.ATTENTION:
            return 4.0 * self.batch * self.heads * self.head_dim * attended_pairs(self.q_len, self.kv_len, self.causal)
        if self.kind is OpKind.VECTOR:
            c = VECTOR_COSTS[self.vop]
            return float(self.m * self.n * (c.lane_ops + c.special_ops))
        return 0.0

    def min_bytes(self) -> float:
        """Compulsory HBM traffic: every input read once, every output written once."""
        a = self.dtype.bytes
        if self.kind is OpKind.GEMM:
            return self.groups * (self.m * self.k * a + self.k * self.n * self.b_dtype.bytes
                                  + self.m * self.n * self.c_dtype.bytes)
        if self.kind is OpKind.ATTENTION:
            q = self.batch * self.heads * self.q_len * self.head_dim * a
            kv = 2 * self.batch * self.kv_heads * self.kv_len * self.head_dim * a
            return 2 * q + kv
        if self.kind is OpKind.VECTOR:
            c = VECTOR_COSTS[self.vop]
            return self.m * self.n * a * (c.reads + c.writes)
        if self.kind is OpKind.EMBEDDING:
            return 2.0 * self.m * self.n * a
        if self.kind.is_collective:
            return 0.0  # moved over the links; the buffers' HBM traffic is not counted
        return 2.0 * self.bytes


def attended_pairs(q_len: int, kv_len: int, causal: bool) -> float:
    """(query, key) pairs scored: all of them, or under a causal mask with the queries last."""
    if not causal:
        return float(q_len) * kv_len
    past = kv_len - q_len
    return float(q_len) * past + q_len * (q_len + 1) / 2.0
