"""The two ops every block builds: a GEMM against the model's weights, in the formats the
workload gives them, and the model's norm."""

from __future__ import annotations

from archsim.dtypes import DType
from archsim.graph.model import ModelSpec, Norm, Workload
from archsim.graph.ops import Op, OpKind, ParallelRole, Scaling, VectorOp

_NORMS = {
    (Norm.RMSNORM, False): VectorOp.RMSNORM,
    (Norm.RMSNORM, True): VectorOp.ADD_RMSNORM,
    (Norm.LAYERNORM, False): VectorOp.LAYERNORM,
    (Norm.LAYERNORM, True): VectorOp.ADD_LAYERNORM,
}


def norm_op(
    m: ModelSpec, act: DType, rows: int, width: int, name: str, layers: int, fused: bool, *, scaling: Scaling
) -> Op:
    """The model's norm over `rows` rows of `width`; `fused`: with the residual add folded in
    (its residual operand cold, as `residual_add_op`'s)."""
    vop = _NORMS[m.norm, fused]
    return Op(OpKind.VECTOR, act, m=rows, n=width, vop=vop, cold_reads=int(fused), scaling=scaling).named(name, layers)


def residual_add_op(act: DType, rows: int, width: int, name: str, layers: int, *, scaling: Scaling) -> Op:
    """The residual add of an eager block: the block's output, just written, and the residual
    stream, written before the block's GEMMs streamed their weights through the L2 (cold)."""
    return Op(OpKind.VECTOR, act, m=rows, n=width, vop=VectorOp.ADD, cold_reads=1, scaling=scaling).named(name, layers)


def gemm_op(
    w: Workload,
    name: str,
    layers: int,
    m: int,
    k: int,
    n: int,
    groups: int = 1,
    weights: DType | None = None,
    *,
    scaling: Scaling,
    parallel: ParallelRole = ParallelRole.NONE,
) -> Op:
    """y[m, n] = x[m, k] W[n, k]^T against weights stored in `weights` (default the workload's):
    x in the format GEMM inputs are quantised to (`dtypes.compute`, W8A8's fp8), else the
    activations'; y in the activations' format."""
    d = w.dtypes
    a = d.gemm_input
    out = d.activations if a is not d.activations else None
    wd = weights or d.weights
    return Op(
        OpKind.GEMM, a, m=m, k=k, n=n, groups=groups, weight_dtype=wd, out_dtype=out, scaling=scaling, parallel=parallel
    ).named(name, layers)
