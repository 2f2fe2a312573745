"""Operators of an LLM step: frozen, hashable records of what is computed on which shapes.

An op's identity (and so its cached timing) is its kind and shape; its `name`, `repeat` (how
many times the step runs it, e.g. once per layer) and `scaling` (what its shapes grow with in a
step) do not take part in equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from archsim.dtypes import DType
from archsim.hashing import cached_hash, copy_with, record_state


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


COLLECTIVE_KINDS = frozenset(
    {OpKind.ALL_REDUCE, OpKind.ALL_GATHER, OpKind.REDUCE_SCATTER, OpKind.ALL_TO_ALL, OpKind.SEND}
)


class Scaling(str, Enum):
    """What an op's shapes grow with in a step, and so which part of a mixed step times it
    (archsim/graph/mixed.py). Every op is given one where it is made: the graph builder's
    by the builder, an op on its own (`archsim op`, a measured case, a test) FIXED."""

    TOKENS = "tokens"  # the step's total tokens: embedding, norms, projections, FFN, their collectives
    SEQUENCES = "sequences"  # one row per sequence: the final norm, the LM head and its all-gather
    # one sequence's KV length: attention, and what runs per sequence with it (eager code's K/V
    # expansion, MLA's up-projection of the cached latent and its absorbed projections)
    KV_LENGTH = "kv_length"
    FIXED = "fixed"  # a shape its caller fixes, part of no step


class ParallelRole(str, Enum):
    """What a parallel layout runs around an op (archsim/graph/parallel.py), set by the graph
    builder where it makes the op: Megatron-LM's tensor-parallel layout sums the ops whose
    output is a partial sum and gathers the vocabulary's slices; expert parallelism brings the
    routed experts their tokens and takes their outputs back."""

    NONE = "none"  # nothing: its output is whole on each chip, or summed with a later op's
    PARTIAL_SUM = "partial_sum"  # a partial sum over the TP group: an all-reduce follows
    VOCAB_SLICE = "vocab_slice"  # a slice of the vocabulary (the logits): an all-gather follows
    EXPERTS_IN = "experts_in"  # the routed experts' first GEMM: an all-to-all (dispatch) comes before under EP
    # the routed experts' last GEMM: an all-to-all (combine) follows under EP, and, as its output
    # is a partial sum, an all-reduce under TP (which also sums the shared experts' output)
    EXPERTS_OUT = "experts_out"


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
    LAYERNORM = "layernorm"
    ADD_LAYERNORM = "add_layernorm"  # residual add fused into the LayerNorm
    GELU = "gelu"
    GELU_MUL = "gelu_mul"  # GELU of the gate times the up projection (GeGLU)
    RELU2 = "relu2"  # squared ReLU (Nemotron-H)
    GATE_MUL = "gate_mul"  # sigmoid of a gate times the value (gated attention's output)
    CONV1D = "conv1d"  # causal depthwise convolution of a few taps and its SiLU (linear attention, Mamba)
    DELTA_STATE = "delta_state"  # one token's gated delta rule on each element of the state (decode)
    SSM_STATE = "ssm_state"  # one token's Mamba-2 state update and readout on each state element (decode)
    CONV_STATE = "conv_state"  # a sequence's conv inputs read and written back shifted by the new ones


@dataclass(frozen=True)
class VectorCost:
    """Per-element traffic and work of a vector op: tensors read and written, lane ops, specials.

    A row-wise op (a reduction along the row) gives each row to one thread block, which walks it
    in `passes` of steps of `row_step` elements (the block's threads times their vector width);
    passes after the first find the row in L2.
    """

    reads: int
    writes: int
    lane_ops: int
    special_ops: int
    passes: int = 1
    row_step: int = 0  # row-wise ops: elements a row's block loads at once

    @property
    def row_wise(self) -> bool:
        return self.row_step > 0


# Lane ops count the instructions a GPU kernel issues per element (loads and stores, format
# conversions, loop and address arithmetic, the math); special ops are the special-function unit's
# (ex2, rcp, rsqrt). Library kernels compute exp and divide to full fp32 precision: expf is a
# range reduction, ex2 and a rescale with range checks (~10 instructions), an IEEE divide a
# reciprocal refined by Newton steps with a slow-path test (~12).
VECTOR_COSTS: dict[VectorOp, VectorCost] = {
    # rmsnorm: load, convert, square-accumulate; then load, scale, multiply by weight, convert,
    # store; one rsqrt per row. A standalone norm kernel (PyTorch's vectorized_layer_norm_kernel,
    # aten/src/ATen/native/cuda/layer_norm_kernel.cu) reads its row twice, statistics then
    # normalise: a block of 128 threads (num_threads()) each loading one 4-element vector
    # (vec_size) per step, the next step's load issued after this one's data is used.
    VectorOp.RMSNORM: VectorCost(1, 1, 12, 0, passes=2, row_step=512),
    VectorOp.ADD: VectorCost(2, 1, 8, 0),  # two loads, converts, add, convert, store, loop
    VectorOp.MUL: VectorCost(2, 1, 8, 0),
    VectorOp.SILU: VectorCost(1, 1, 28, 2),  # x / (1 + exp(-x)): expf and an IEEE divide
    VectorOp.SILU_MUL: VectorCost(2, 1, 32, 2),
    # max; sum of exp(x - max); exp(x - max) / sum written out: a block softmax over a long row
    # reads it in three passes, up to 1024 threads x 8-element vectors at a time, and takes two
    # expf and an IEEE divide per element
    VectorOp.SOFTMAX: VectorCost(1, 1, 50, 3, passes=3, row_step=8192),
    VectorOp.ROPE: VectorCost(1, 1, 12, 0),  # rotate half: 4 multiplies, 2 adds (cos/sin cached)
    # residual add fused into the norm (a serving engine's kernel): up to 1024 threads x 8-element
    # vectors hold the summed row in registers between the statistics and the normalisation
    VectorOp.ADD_RMSNORM: VectorCost(2, 2, 16, 0, row_step=8192),
    VectorOp.TOPK: VectorCost(1, 1, 40, 2, row_step=8192),
    # LayerNorm: as RMSNorm with a mean as well (Welford's update, two more FMAs per element in
    # the statistics pass) and a bias added when normalising
    VectorOp.LAYERNORM: VectorCost(1, 1, 16, 0, passes=2, row_step=512),
    VectorOp.ADD_LAYERNORM: VectorCost(2, 2, 20, 0, row_step=8192),
    # GELU to full precision: the cubic of the tanh form (three FMAs) and tanhf, an expf and an
    # IEEE divide (as SiLU's), with the loads, conversions and store
    VectorOp.GELU: VectorCost(1, 1, 32, 2),
    VectorOp.GELU_MUL: VectorCost(2, 1, 36, 2),
    # max(x, 0) squared: load, convert, max, multiply, convert, store, loop
    VectorOp.RELU2: VectorCost(1, 1, 8, 0),
    # sigmoid(gate) * x: SiLU's expf and divide without the extra multiply, as SILU_MUL counts
    VectorOp.GATE_MUL: VectorCost(2, 1, 32, 2),
    # a channel's taps (4: Qwen3-Next, Nemotron-H, mamba_ssm's default) as 4 FMAs on inputs its
    # block holds (each input read once), the bias, then SiLU as SILU counts it
    VectorOp.CONV1D: VectorCost(1, 1, 40, 2),
    # per state element S[k, v] of a head (fp32), for one token (fla's fused_recurrent): load,
    # decay by exp(g) (the exp once per head), the FMA of S^T k, the rank-one update
    # S += beta k (v - S^T k), the FMA of the readout S^T q, store, the reductions' shuffles
    VectorOp.DELTA_STATE: VectorCost(1, 1, 10, 0),
    # per state element h[p, n] of a head (mamba_ssm's selective_state_update): load,
    # h = exp(dt A) h + dt B x (two FMAs), y += C h (one FMA), store, the reduction's shuffles
    VectorOp.SSM_STATE: VectorCost(1, 1, 8, 0),
    # load, convert, store, loop (a copy)
    VectorOp.CONV_STATE: VectorCost(1, 1, 8, 0),
}
# vector ops on a sequence's recurrent state, which stays in HBM from one step to the next (the
# other layers' traffic passes between): never found in L2 as a kernel's just-written input
RECURRENT_STATE_VOPS = frozenset({VectorOp.DELTA_STATE, VectorOp.SSM_STATE, VectorOp.CONV_STATE})
# integer lane-op slots per element and operand to address a strided view: a divide-modulo and a
# multiply-add per dimension of a 2-D view and a 64-bit address, issuing at half the FP32 rate
STRIDED_INDEX_OPS = 14
STRIDED_BLOCK_ELEMENTS = 512  # elements a thread block of an unvectorised kernel takes: 128 threads x 4


@dataclass(frozen=True)
class Op:
    """One operator. Fields used depend on `kind`; unused ones stay zero.

    GEMM: y[m, n] = x[m, k] @ W[n, k]^T, `groups` independent GEMMs (MoE experts) of that shape.
    ATTENTION: `batch` sequences, `heads`/`kv_heads` of `head_dim`, `q_len` new queries over
    `kv_len` keys (the new ones included), causal or not; values `v_dim` wide (0: head_dim), or
    the first `v_dim` columns of the keys themselves (`kv_shared`: MLA's latent is both); each
    query sees at most the last `window` keys (0: all); `dtype` is the format of the maths (Q,
    O, the matrix units' inputs), `kv_dtype` the cache's (0: the same).
    VECTOR: `vop` over a `m x n` tensor. EMBEDDING: gather `m` rows of `n` elements.
    COPY: `bytes` moved (read once, written once).
    Collectives (ALL_REDUCE, ..., SEND): `bytes` in NCCL's count among `ranks` chips, `m` token
    rows (how finely the message can be cut), sent as `chunks` pieces.
    `scaling` (required, by keyword) says what the shapes grow with in a step (`Scaling`),
    `parallel` what a parallel layout runs around the op (`ParallelRole`).
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
    v_dim: int = 0  # attention: value head width (0: head_dim)
    kv_shared: bool = False  # attention: V is the first v_dim columns of K (one cached tensor)
    window: int = 0  # attention: keys each query sees, the most recent (0: all)
    softcap: bool = False  # attention: tanh soft cap of every score (Gemma 2)
    kv_dtype: DType | None = None  # attention: format of the cached K/V (defaults to dtype)
    split_kv: bool = False  # decode attention may split the KV length across cores (flash-decoding)
    softmax_overlap: bool = False  # attention kernel overlaps softmax with the matrix work (FlashAttention-3)
    strided: bool = False  # vector op or copy on strided views (slices of wider tensors): no vector loads
    hot: bool = False  # vector op or copy whose input the previous kernel just wrote (in L2 if it fits)
    # of a vector op's operands, those no recent kernel wrote (a residual add's residual stream,
    # written before GEMMs whose weights have since streamed through the L2): from HBM, hot or not
    cold_reads: int = 0
    per_row: bool = False  # vector op as a custom serving kernel: one thread block per row (token), scalar loads
    vop: VectorOp | None = None
    bytes: int = 0
    kernels: int = 1  # kernel launches this op stands for (unfused eager code runs several)
    ranks: int = 0  # chips taking part in a collective
    chunks: int = 1  # pieces a collective is sent as (to overlap the compute that produces it)
    name: str = field(default="", compare=False)
    repeat: int = field(default=1, compare=False)
    scaling: Scaling = field(kw_only=True, compare=False)
    parallel: ParallelRole = field(default=ParallelRole.NONE, kw_only=True, compare=False)

    def __hash__(self) -> int:
        return cached_hash(self)

    def __getstate__(self) -> dict:
        return record_state(self)

    def named(self, name: str, repeat: int = 1) -> Op:
        """This op under a name, `repeat` times (neither takes part in what it is or costs): a
        copy with the two set, which a graph does for every op of every step it builds."""
        return copy_with(self, name=name, repeat=repeat)

    @property
    def b_dtype(self) -> DType:
        return self.weight_dtype or self.dtype

    @property
    def c_dtype(self) -> DType:
        return self.out_dtype or self.dtype

    @property
    def value_dim(self) -> int:
        return self.v_dim or self.head_dim

    @property
    def kv_format(self) -> DType:
        return self.kv_dtype or self.dtype

    @property
    def kv_row_elements(self) -> int:
        """Cached elements per token and KV head: K and V, or K alone when V is part of it."""
        return self.head_dim if self.kv_shared else self.head_dim + self.value_dim

    @property
    def vector_cost(self) -> VectorCost:
        """Per-element traffic and work of a VECTOR op."""
        if self.vop is None:
            raise ValueError(f"a {self.kind.value} op has no vector op")
        return VECTOR_COSTS[self.vop]

    def flops(self) -> float:
        """Useful floating-point operations (2 per multiply-accumulate)."""
        if self.kind is OpKind.GEMM:
            return 2.0 * self.groups * self.m * self.k * self.n
        if self.kind is OpKind.ATTENTION:
            pairs = attended_pairs(self.q_len, self.kv_len, self.causal, self.window)
            return 2.0 * self.batch * self.heads * (self.head_dim + self.value_dim) * pairs
        if self.kind is OpKind.VECTOR:
            c = self.vector_cost
            return float(self.m * self.n * (c.lane_ops + c.special_ops))
        return 0.0

    def min_bytes(self) -> float:
        """Compulsory HBM traffic: every input read once, every output written once."""
        a = self.dtype.bytes
        if self.kind is OpKind.GEMM:
            return self.groups * (
                self.m * self.k * a + self.k * self.n * self.b_dtype.bytes + self.m * self.n * self.c_dtype.bytes
            )
        if self.kind is OpKind.ATTENTION:
            q = self.batch * self.heads * self.q_len * self.head_dim * a
            out = self.batch * self.heads * self.q_len * self.value_dim * a
            kv = self.batch * self.kv_heads * self.kv_len * self.kv_row_elements * self.kv_format.bytes
            return q + out + kv
        if self.kind is OpKind.VECTOR:
            c = self.vector_cost
            return self.m * self.n * a * (c.reads + c.writes)
        if self.kind is OpKind.EMBEDDING:
            return 2.0 * self.m * self.n * a
        if self.kind.is_collective:
            return 0.0  # moved over the links; the buffers' HBM traffic is not counted
        return 2.0 * self.bytes


def attended_pairs(q_len: int, kv_len: int, causal: bool, window: int = 0) -> float:
    """(query, key) pairs scored: all of them, or under a causal mask with the queries last;
    with a window, each query scores at most the `window` most recent keys (itself included).

    Causal: the query at position past + i scores min(W, past + i + 1) keys, summed over i:
    sum over x from past + 1 to past + q_len of min(W, x)."""
    if not causal:
        return float(q_len) * (min(kv_len, window) if window else kv_len)
    past = kv_len - q_len
    if not window or kv_len <= window:
        return float(q_len) * past + q_len * (q_len + 1) / 2.0
    first, last = past + 1, kv_len  # keys the first and last query would score without a window
    if first >= window:
        return float(q_len) * window
    below = window - first + 1  # queries that see fewer than `window` keys: first .. window
    return (first + window) * below / 2.0 + float(last - window) * window
