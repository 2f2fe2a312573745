"""Predict measured timings: each case of a ground-truth file simulated on a chip.

Case schema (see archsim/data/README.md): every case has `id`, `kind`, `dtype` and
`measured_ms`, plus per-kind fields; an `attention_decode` case may say `split_kv: true` when
the measured kernel split the KV length across blocks (the default is no split). Single kernels were launched and timed on their own, so
they pay the chip's standalone launch cost; `model_step` cases were replayed as a CUDA graph,
so they run through the normal step builder and runner with back-to-back kernels only, in the
`eager` fusion profile that matches what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.choose import simulate_op
from archsim.graph.builder import Step, silu_mul_ops
from archsim.graph.model import DTypes, Fusion, ModelSpec, Phase, Scenario, Workload
from archsim.graph.ops import Op, OpKind, VectorOp
from archsim.hardware import DType, System
from archsim.runner.generation import simulate_step

FIELDS = {
    "gemm": ("M", "K", "N"),
    "attention_prefill": ("batch", "heads_q", "heads_kv", "head_dim", "seq", "causal"),
    "attention_decode": ("batch", "heads_q", "heads_kv", "head_dim", "kv_len"),
    "vector": ("op", "M", "N"),
    "copy": ("bytes",),
    "model_step": ("model", "phase", "batch", "new_tokens", "kv_len", "embedding_and_head"),
}
MODEL_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
VECTOR_KERNELS = {  # the one kernel of each measured vector case; silu_mul ran eager SiLU and multiply
    "rmsnorm": VectorOp.RMSNORM,
    "silu_mul": None,
    "add": VectorOp.ADD,
    "softmax": VectorOp.SOFTMAX,
}


class CaseError(ValueError):
    """A case that cannot be simulated: unknown kind, missing or bad field."""


@dataclass(frozen=True)
class CaseResult:
    id: str
    kind: str
    measured_ms: float
    predicted_ms: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_ms - self.measured_ms) / self.measured_ms


def check_case(case: dict) -> None:
    """Raise CaseError naming what is wrong with the case."""
    kind = case.get("kind")
    if kind not in FIELDS:
        raise CaseError(f"unknown kind {kind!r}; expected one of {', '.join(FIELDS)}")
    missing = [f for f in ("measured_ms", "dtype", *FIELDS[kind]) if f not in case]
    if kind == "model_step" and isinstance(case.get("model"), dict):
        missing += [f"model.{f}" for f in MODEL_FIELDS if f not in case["model"]]
    if missing:
        raise CaseError(f"missing field(s): {', '.join(missing)}")
    if case["dtype"] not in ("bf16", "fp8"):
        raise CaseError(f"dtype must be bf16 or fp8 (got {case['dtype']!r})")
    if kind == "vector" and case["op"] not in VECTOR_KERNELS:
        raise CaseError(f"unknown vector op {case['op']!r}; expected one of {', '.join(VECTOR_KERNELS)}")
    if not isinstance(case["measured_ms"], (int, float)) or case["measured_ms"] <= 0:
        raise CaseError(f"measured_ms must be a positive number (got {case['measured_ms']!r})")


def _kernels_s(ops: list[Op], system: System) -> float:
    """A timed region of kernels launched one after another: one standalone launch, then gaps."""
    chip = system.chip
    return sum(simulate_op(op, chip, standalone=(i == 0)).time_s for i, op in enumerate(ops))


def case_ops(case: dict) -> list[Op]:
    """The kernel(s) a single-kernel case ran."""
    kind, dt = case["kind"], DType(case["dtype"])
    if kind == "gemm":
        return [Op(OpKind.GEMM, dt, m=case["M"], k=case["K"], n=case["N"], out_dtype=DType.BF16)]
    if kind in ("attention_prefill", "attention_decode"):
        prefill = kind == "attention_prefill"
        q = case["seq"] if prefill else 1
        kv = case["seq"] if prefill else case["kv_len"]
        return [
            Op(
                OpKind.ATTENTION,
                dt,
                batch=case["batch"],
                heads=case["heads_q"],
                kv_heads=case["heads_kv"],
                head_dim=case["head_dim"],
                q_len=q,
                kv_len=kv,
                causal=bool(prefill and case["causal"]),
                split_kv=bool(case.get("split_kv", False)),
            )
        ]
    if kind == "vector":
        if case["op"] == "silu_mul":  # on the halves of a [M, 2N] tensor, as the eager step runs it
            return silu_mul_ops(dt, case["M"], case["N"], eager=True)
        return [Op(OpKind.VECTOR, dt, m=case["M"], n=case["N"], vop=VECTOR_KERNELS[case["op"]])]
    if kind == "copy":
        return [Op(OpKind.COPY, dt, bytes=int(case["bytes"]))]
    raise CaseError(f"kind {kind!r} is not a single-kernel case")


def model_step_workload(case: dict) -> tuple[Workload, Step]:
    m = case["model"]
    dt = DType(case["dtype"])
    model = ModelSpec(
        name=str(case["id"]),
        layers=int(m["layers"]),
        hidden=int(m["hidden"]),
        heads=int(m["heads"]),
        kv_heads=int(m["kv_heads"]),
        head_dim=int(m["head_dim"]),
        ffn=int(m["ffn"]),
        vocab=int(m["vocab"]),
    )
    phase = Phase(case["phase"])
    new, past = int(case["new_tokens"]), int(case["kv_len"])
    w = Workload(model, DTypes(dt, dt, dt), Scenario(int(case["batch"]), max(1, new), 1), Fusion.EAGER)
    return w, Step(phase, int(case["batch"]), new, past, bool(case["embedding_and_head"]))


def predict_ms(case: dict, system: System) -> float:
    check_case(case)
    if case["kind"] == "model_step":
        w, step = model_step_workload(case)
        return 1e3 * simulate_step(w, system, step).time_s
    return 1e3 * _kernels_s(case_ops(case), system)


def validate_cases(cases: list[dict], system: System) -> tuple[list[CaseResult], list[tuple[str, str]]]:
    """Results for every good case and (id, problem) for every bad one; one bad case loses nothing."""
    results, errors = [], []
    for i, case in enumerate(cases):
        cid = str(case.get("id", f"#{i}")) if isinstance(case, dict) else f"#{i}"
        try:
            if not isinstance(case, dict):
                raise CaseError("a case must be an object")
            results.append(CaseResult(cid, case["kind"], float(case["measured_ms"]), predict_ms(case, system)))
        except (CaseError, ValueError, TypeError) as err:
            errors.append((cid, str(err)))
    return results, errors


def summarise(results: list[CaseResult]) -> dict[str, dict]:
    out: dict[str, list[float]] = {}
    for r in results:
        out.setdefault(r.kind, []).append(abs(r.error_pct))
    return {
        k: {"n": len(v), "mean_abs_error_pct": sum(v) / len(v), "max_abs_error_pct": max(v)}
        for k, v in sorted(out.items())
    }
