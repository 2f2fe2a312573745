"""One op on a chip, as `archsim op` simulates it: `op("gemm", "h200", M=1, K=8192, N=28672)`.

`build_op` turns an op's kind and sizes into the graph's Op; `archsim op` and `archsim explain
op` build theirs with it (their flags are its keywords), so both read a description the same
way. Times in seconds, sizes in elements, `bytes` in bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archsim.api.inputs import Hardware, as_hardware
from archsim.engine.timing import OpTiming
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp

if TYPE_CHECKING:
    from archsim.api.explanation import Explanation

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
    from archsim.hardware import DType

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


@dataclass(frozen=True, eq=False)
class OpReport:
    """One op's timing on a chip (`archsim op`'s result): `.timing` holds every figure."""

    op: Op
    kind: str
    timing: OpTiming
    hardware: Hardware
    standalone: bool = False

    @property
    def time_s(self) -> float:
        return self.timing.time_s

    @property
    def bound(self) -> str:
        return self.timing.bound.value

    def explain(self) -> Explanation:
        """Its time by cause, what binds it and each resource's elasticity (archsim/api/explanation.py)."""
        from archsim.api.explanation import explain_op
        from archsim.choose import Condition

        return explain_op(self.op, self.hardware, Condition.STANDALONE if self.standalone else Condition.GRAPH)

    def to_dict(self) -> dict[str, Any]:
        """What `archsim op --json` writes of the timing (without the configuration)."""
        from archsim.report.export import timing_dict

        return {"op": self.kind, **timing_dict(self.timing)}

    def __repr__(self) -> str:
        from archsim.units import format_seconds

        t = self.timing
        return (
            f"OpReport({self.kind} on {self.hardware.name}: {format_seconds(t.time_s)}, {t.bound.value}-bound "
            f"({t.binding_unit} {100 * t.unit_utilisation[t.binding_unit]:.0f}%))"
        )

    def _repr_html_(self) -> str:
        from archsim.api.display import html_table
        from archsim.units import format_rate, format_seconds

        t = self.timing
        rows = [
            ("time", format_seconds(t.time_s)),
            ("bound", f"{t.bound.value} ({t.binding_unit} {100 * t.unit_utilisation[t.binding_unit]:.0f}%)"),
            ("achieved", f"{format_rate(t.achieved_flops, 'FLOP/s')}, {format_rate(t.achieved_bytes_per_s, 'B/s')}"),
        ]
        return html_table(f"{self.kind} on {self.hardware.name}", rows)


def op(kind: str, hardware: Hardware | str = "h200", *, standalone: bool = False, **sizes: Any) -> OpReport:
    """Simulate one op as `archsim op` does: `op("gemm", "h200", M=1, K=8192, N=28672)`,
    `op("attention", hw, batch=8, kv_len=4096)`, `op("rmsnorm", hw, M=8, N=4096)`. The keywords
    are `build_op`'s; `standalone`: with the cost of a kernel launched on its own (default: back
    to back, as in a CUDA graph). ValueError for a bad description, RefusedError for an op
    the chip cannot take."""
    from archsim.choose import Condition, simulate_op
    from archsim.runner.size import check_op

    hw = as_hardware(hardware)
    built = build_op(kind, **sizes)
    check_op(built, hw.system.chip, kind)
    timing = simulate_op(built, hw.system.chip, Condition.STANDALONE if standalone else Condition.GRAPH)
    return OpReport(built, kind, timing, hw, standalone)
