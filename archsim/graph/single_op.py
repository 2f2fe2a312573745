"""One op described by its kind and sizes, as `archsim op`, `archsim explain op` and the API's
`archsim.op` take it (their flags and keywords are `build_op`'s), so all read a description the
same way. Sizes in elements, `bytes` in bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from archsim.graph.ops import Op, OpKind, Scaling, VectorOp

SIZES = {"gemm": ("M", "K", "N"), "attention": ("kv_len",), "copy": ("bytes",)}  # vector ops: M, N
KINDS = ("gemm", "attention", "copy", *(v.value for v in VectorOp))


def build_op(
    kind: str,
    *,
    M: int | None = None,
    K: int | None = None,
    N: int | None = None,
    dtype: str = "bf16",
    weight_dtype: str | None = None,
    batch: int = 1,
    heads: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    q_len: int = 1,
    kv_len: int | None = None,
    causal: bool = False,
    split_kv: bool = True,
    bytes: int | None = None,
    strided: bool = False,
    hot: bool = False,
    flag: Callable[[str], str] = str,
) -> Op:
    """The Op of `kind` ("gemm", "attention", "copy" or a vector op such as "rmsnorm") with its
    sizes; ValueError for a missing size or a keyword that does not apply, naming it by `flag`
    (the command line passes one that writes `weight_dtype` as `--weight-dtype`)."""
    from archsim.dtypes import DType

    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)} (got {kind!r})")
    given = {"M": M, "K": K, "N": N, "kv_len": kv_len, "bytes": bytes}
    needed = SIZES.get(kind, ("M", "N"))
    missing = [flag(n) for n in needed if given[n] is None]
    if missing:
        raise ValueError(f"op {kind} needs its sizes: {', '.join(map(flag, needed))} (missing {', '.join(missing)})")
    m, k, n, size = (v or 0 for v in (M, K, N, bytes))  # those its kind needs are given (above)
    dt = DType(dtype)
    wd = DType(weight_dtype) if weight_dtype else None
    if wd is not None and kind not in ("gemm", "attention"):
        raise ValueError(f"{flag('weight_dtype')}: applies to a GEMM's weights or attention's KV cache, not {kind}")
    if not split_kv and kind != "attention":
        raise ValueError(f"{flag('no_split_kv')}: applies to decode attention, not {kind}")
    if (strided or hot) and kind in ("gemm", "attention"):
        raise ValueError(f"{flag('strided' if strided else 'hot')}: applies to vector ops and copies, not {kind}")
    if kind == "gemm":
        return Op(OpKind.GEMM, dt, m=m, k=k, n=n, weight_dtype=wd, scaling=Scaling.FIXED)
    if kind == "attention":
        assert kv_len is not None
        if heads % kv_heads:
            raise ValueError(f"{flag('kv_heads')}: must divide {flag('heads')} ({heads}) (got {kv_heads})")
        return Op(
            OpKind.ATTENTION,
            dt,
            batch=batch,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            q_len=q_len,
            kv_len=max(kv_len, q_len),
            causal=causal,
            kv_dtype=wd,
            split_kv=q_len == 1 and split_kv,  # the library's split, as run plays it
            scaling=Scaling.FIXED,
        )
    if kind == "copy":
        return Op(OpKind.COPY, dt, bytes=size, strided=strided, hot=hot, scaling=Scaling.FIXED)
    return Op(OpKind.VECTOR, dt, m=m, n=n, vop=VectorOp(kind), strided=strided, hot=hot, scaling=Scaling.FIXED)
