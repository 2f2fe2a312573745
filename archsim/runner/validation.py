"""Predict measured timings: each case of a ground-truth file simulated on a chip, under the
condition it was timed in.

Case schema (archsim/data/README.md): every case has `id`, `kind`, `dtype` (bf16, fp16 or fp8)
and `measured_ms`, plus per-kind fields (FIELDS) and the optional ones of its kind (OPTIONAL).
Every field is modelled or refused by name: a field no kind knows is an error naming it, never
ignored. A `gemm` case may say `groups`: a batched GEMM, one kernel over `groups` independent
GEMMs of its shape (groups x M x N outputs, each group its own weights). An `attention_decode`
case splits the KV length across blocks as the attention library does (`split_kv`, the
heuristic `run` plays: archsim/compiler/attention.py `kv_splits`) unless it says `split_kv:
false` (or its file's `meta.split_kv` does); an `attention_prefill` case may carry `kv_len`,
tokens already cached before its `seq` new ones. `allreduce` cases (`ranks` chips, `bytes` per
rank) run on a multi-chip system, each launched on idle chips: the collective, and once the wait
for its last rank to start (the system's `interconnect.launch_jitter`, archsim/hardware/arrival.py).
`model` (a name) and `tp` (a tensor-parallel width) on a single-op case are labels of where its
shape came from: its fields are already the shape on one chip, so they change nothing. `count: n` says the op ran n times in one timed region and
`measured_ms` is the whole region: the first run as the condition times it (a lone launch after
the flush, the host's round trip), the n - 1 after it back to back, each with its launch gap
(none under `kernel` timing, where only kernel durations add up).

How a case was timed is `timing` (per case, or the file's `meta.timing`, whose first word
counts: "kernel: summed GPU durations ..." is `kernel`), one of archsim.choose.Condition:
`standalone` (a launch timed on its own after the L2 was flushed by writes: the H200 sets'
single kernels, the default), `graph` (a CUDA graph replay: the H200 `model_step` cases, their
default), `kernel` (a profiler's summed kernel durations, inputs just written by the op before)
or `host` (the host's wall clock around launch and synchronize: the chip's stated round trip,
`overheads.host`, once, on the first kernel of any kind or on an all-reduce; refused on a chip
that states none, and for model steps, replayed as CUDA graphs). Which vector kernels ran
is the file's `meta.vector_kernels` ({op: style}): `eager` (PyTorch's own kernels; SiLU·mul as
two kernels on the halves, the default) or `per_token` (a serving engine's custom kernel, one
thread block per token with scalar loads). A per-token
`rotary` case also says `heads_q` and `heads_kv`, the query and key heads of its N per token
(N = (heads_q + heads_kv) x head_dim, head_dim ROTARY_HEAD_DIM unless given): they set its
kernel's thread block.
`meta.resolution` ("1 us") is the timer's: each duration it reports is truncated to a whole
number of it, each kernel's under `kernel` timing (PyTorch's profiler counts a kernel's
whole microseconds: `KinetoEvent::durationUs`, an integer division of nanoseconds), the timed
interval's otherwise; the prediction is truncated as the timer would.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from archsim.choose import Condition, kernel_durations_s, simulate_collective, simulate_op
from archsim.graph.builder import Step, silu_mul_ops
from archsim.graph.model import DTypes, Fusion, ModelSpec, Phase, Scenario, Workload
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import DType, System
from archsim.hardware.collectives import lone_wait_s, system_fabric
from archsim.runner.floor import floor_by_kind
from archsim.runner.generation import simulate_step
from archsim.units import Dim, parse_quantity

FIELDS = {
    "gemm": ("M", "K", "N"),
    "attention_prefill": ("batch", "heads_q", "heads_kv", "head_dim", "seq", "causal"),
    "attention_decode": ("batch", "heads_q", "heads_kv", "head_dim", "kv_len"),
    "vector": ("op", "M", "N"),
    "copy": ("bytes",),
    "allreduce": ("ranks", "bytes"),
    "model_step": ("model", "phase", "batch", "new_tokens", "kv_len", "embedding_and_head"),
}
MODEL_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
DTYPES = ("bf16", "fp16", "fp8")
COMMON = ("id", "kind", "dtype", "measured_ms", "timing")  # every case's (timing optional)
OPTIONAL = {  # the fields a kind may carry beyond FIELDS
    "gemm": ("groups", "count"),
    "attention_prefill": ("kv_len", "count"),
    "attention_decode": ("split_kv", "count"),
    "vector": ("heads_q", "heads_kv", "head_dim", "count"),  # the heads of a rotary case alone
    "copy": ("count",),
    "allreduce": ("count",),
    "model_step": (),
}
LABELS = ("model", "tp")  # where a single-op case's shape came from; they change nothing
MAX_COUNT = 1 << 16  # runs of one op in a timed region
VECTOR_OPS = {"rmsnorm": VectorOp.RMSNORM, "silu_mul": VectorOp.SILU_MUL, "add": VectorOp.ADD,
              "softmax": VectorOp.SOFTMAX, "rotary": VectorOp.ROPE, "layernorm": VectorOp.LAYERNORM,
              "gelu": VectorOp.GELU}  # fmt: skip
VECTOR_STYLES = ("eager", "per_token")
BOOL_FIELDS = ("causal", "embedding_and_head", "split_kv")
NO_HOST_COST = (
    "timing host: {chip} states no host launch-and-synchronize cost (overheads.host), the round trip "
    "a host wall-clock time adds to the kernels; host-timed cases are refused until the chip states a "
    "sourced value"
)
HOST_UNMODELLED = "timing host: the host round trip of a {kind} is not modelled (only single ops')"
ROTARY_HEAD_DIM = 128  # a rotary case's head_dim unless it says (Llama-family models)
# Cases beyond these sizes are refused before any work: a case is one kernel or one model step
# of a real chip, and a shape this large is a typo (and would exhaust memory when mapped).
MAX_DIM = 1 << 20  # rows, columns, heads, tokens of one case
MAX_ELEMENTS = 1 << 40  # product of a case's dimensions (elements or attended pairs x heads)
MAX_BYTES = 1 << 40  # a copy or all-reduce buffer (1 TiB)


class CaseError(ValueError):
    """A case that cannot be simulated: unknown kind, missing or bad field."""


@dataclass(frozen=True)
class CaseResult:
    """One case: measured, predicted as the case's timer would read it, and the simulated time
    before the timer (the same but where the file states a resolution)."""

    id: str
    kind: str
    measured_ms: float
    predicted_ms: float
    simulated_ms: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_ms - self.measured_ms) / self.measured_ms

    def beyond_resolution_pct(self, resolution_ms: float) -> float:
        """The absolute error in excess of one step of the timer's resolution, in percent of the
        measurement: a timer of resolution r reads a duration d as floor(d / r) r, so a reading
        and a prediction one step apart may stand for durations a hair apart (2.0 and 1.99 us
        read 2 and 1 on a 1 us timer); with an exact timer (r = 0), the whole error."""
        return 100.0 * max(0.0, abs(self.predicted_ms - self.measured_ms) - resolution_ms) / self.measured_ms


@dataclass(frozen=True)
class CaseFile:
    """What a case file says of all its cases: how they were timed and which vector kernels ran."""

    timing: Condition | None = None
    vector_kernels: tuple[tuple[str, str], ...] = ()
    resolution_s: float = 0.0  # the timer's: durations it reports are whole multiples (0: exact)
    split_kv: bool = True  # decode attention split the KV length as the library does, unless a case says

    @classmethod
    def from_meta(cls, meta: Any) -> CaseFile:
        if not isinstance(meta, dict):
            return cls()
        timing = _condition(meta["timing"], "meta.timing") if "timing" in meta else None
        styles = meta.get("vector_kernels", {})
        if not isinstance(styles, dict):
            raise CaseError(f"meta.vector_kernels must be an object of op: style (got {styles!r:.60})")
        for op, style in styles.items():
            if op not in VECTOR_OPS or style not in VECTOR_STYLES:
                raise CaseError(
                    f"meta.vector_kernels: {op!r}: {style!r} must map one of {', '.join(VECTOR_OPS)} "
                    f"to {' or '.join(VECTOR_STYLES)}"
                )
        resolution = 0.0
        if "resolution" in meta:
            try:
                resolution = parse_quantity(meta["resolution"], Dim.SECONDS)
            except ValueError as err:
                raise CaseError(f"meta.resolution: {err}") from None
            if resolution <= 0:
                raise CaseError(f"meta.resolution must be greater than zero (got {meta['resolution']!r:.40})")
        split = meta.get("split_kv", True)
        if not isinstance(split, bool):
            raise CaseError(f"meta.split_kv must be true or false (got {split!r:.40})")
        return cls(timing, tuple(sorted(styles.items())), resolution, split)

    def style(self, op: str) -> str:
        return dict(self.vector_kernels).get(op, "eager")


def _condition(value: Any, where: str) -> Condition:
    """A timing condition from `value`: its first word (`"kernel: summed durations"` is kernel)."""
    word = value.split(":", 1)[0].strip().lower() if isinstance(value, str) else value
    try:
        return Condition(word)
    except ValueError:
        raise CaseError(
            f"{where} must start with one of {', '.join(c.value for c in Condition)} (got {value!r:.60})"
        ) from None


def _whole(case: dict, name: str, low: int = 1, high: int = MAX_DIM) -> int:
    value = case[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(f"{name} must be a whole number (got {value!r:.40})")
    if not low <= value <= high:
        raise CaseError(f"{name} must be from {low} to {high:,} (got {value:,})")
    return value


def check_case(case: dict) -> None:
    """Raise CaseError naming what is wrong with the case: every field's type and range."""
    kind = case.get("kind")
    if kind not in FIELDS:
        raise CaseError(f"unknown kind {kind!r:.40}; expected one of {', '.join(FIELDS)}")
    known = known_fields(kind)
    unknown = [f for f in case if f not in known]
    if unknown:
        article = "an" if kind.startswith("a") else "a"
        raise CaseError(
            f"unknown field {unknown[0]!r:.40}: {article} {kind} case has "
            f"{', '.join(f for f in known if f not in COMMON)}"
        )
    missing = [f for f in ("measured_ms", "dtype", *FIELDS[kind]) if f not in case]
    if kind == "model_step" and isinstance(case.get("model"), dict):
        missing += [f"model.{f}" for f in MODEL_FIELDS if f not in case["model"]]
    if missing:
        raise CaseError(f"missing field(s): {', '.join(missing)}")
    if case["dtype"] not in DTYPES:
        raise CaseError(f"dtype must be one of {', '.join(DTYPES)} (got {case['dtype']!r:.40})")
    measured = case["measured_ms"]
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or not math.isfinite(measured):
        raise CaseError(f"measured_ms must be a finite number (got {measured!r:.40})")
    if measured <= 0:
        raise CaseError(f"measured_ms must be greater than zero (got {measured!r})")
    for name in BOOL_FIELDS:
        if name in case and not isinstance(case[name], bool):
            raise CaseError(f"{name} must be true or false (got {case[name]!r:.40})")
    if "timing" in case:
        _condition(case["timing"], "timing")
    if "count" in case:
        _whole(case, "count", 1, MAX_COUNT)
    if "model" in case and kind != "model_step" and not isinstance(case["model"], str):
        raise CaseError(f"model must be a name (got {case['model']!r:.40})")
    if "tp" in case:
        _whole(case, "tp", 1, 1 << 16)
    _check_sizes(case, kind)


def known_fields(kind: str) -> tuple[str, ...]:
    """The fields a case of `kind` may carry: every case's, its kind's, its optional ones and,
    but for a model step (whose `model` is the model itself), the labels."""
    return (*COMMON, *FIELDS[kind], *OPTIONAL[kind], *(LABELS if kind != "model_step" else ()))


def _check_sizes(case: dict, kind: str) -> None:
    if kind == "gemm":
        m, _k, n = (_whole(case, f) for f in ("M", "K", "N"))
        g = _whole(case, "groups") if "groups" in case else 1
        if g * m * n > MAX_ELEMENTS:
            raise CaseError(f"groups x M x N = {g * m * n:,} is more than {MAX_ELEMENTS:,}")
    elif kind in ("attention_prefill", "attention_decode"):
        b, hq, hkv, _d = (_whole(case, f) for f in ("batch", "heads_q", "heads_kv", "head_dim"))
        if hq % hkv:
            raise CaseError(f"heads_kv ({hkv}) must divide heads_q ({hq})")
        q = _whole(case, "seq") if kind == "attention_prefill" else 1
        past = _whole(case, "kv_len", 0) if kind == "attention_prefill" and "kv_len" in case else 0
        kv = q + past if kind == "attention_prefill" else _whole(case, "kv_len")
        if b * hq * q * kv > MAX_ELEMENTS:
            raise CaseError(f"batch x heads_q x queries x keys = {b * hq * q * kv:,} is more than {MAX_ELEMENTS:,}")
    elif kind == "vector":
        if case["op"] not in VECTOR_OPS:
            raise CaseError(f"unknown vector op {case['op']!r:.40}; expected one of {', '.join(VECTOR_OPS)}")
        if _whole(case, "M") * _whole(case, "N") > MAX_ELEMENTS:
            raise CaseError(f"M x N is more than {MAX_ELEMENTS:,}")
        heads = [f for f in ("heads_q", "heads_kv", "head_dim") if f in case]
        if heads and case["op"] != "rotary":
            raise CaseError(f"{heads[0]} applies to a rotary case, not {case['op']}")
        if heads and not {"heads_q", "heads_kv"} <= set(heads):
            raise CaseError(f"a rotary case that gives {heads[0]} needs heads_q and heads_kv")
        if heads:
            hq, hkv = _whole(case, "heads_q"), _whole(case, "heads_kv", 0)
            d = _whole(case, "head_dim", 2, 1024) if "head_dim" in case else ROTARY_HEAD_DIM
            if (hq + hkv) * d != case["N"]:
                raise CaseError(f"N ({case['N']}) must be (heads_q + heads_kv) x head_dim = {(hq + hkv) * d}")
    elif kind == "copy":
        _whole(case, "bytes", 1, MAX_BYTES)
    elif kind == "allreduce":
        _whole(case, "ranks", 2, 1 << 16)
        _whole(case, "bytes", 1, MAX_BYTES)
    elif kind == "model_step":
        _check_model_step(case)


def _check_model_step(case: dict) -> None:
    m = case["model"]
    if not isinstance(m, dict):
        raise CaseError(f"model must be an object of {', '.join(MODEL_FIELDS)} (got {m!r:.40})")
    unknown = [f for f in m if f not in MODEL_FIELDS]
    if unknown:
        raise CaseError(f"unknown field model.{unknown[0]:.40}: a model has {', '.join(MODEL_FIELDS)}")
    for f in MODEL_FIELDS:
        try:
            _whole(m, f)
        except CaseError as err:
            raise CaseError(f"model.{err}") from None
    if m["heads"] % m["kv_heads"]:
        raise CaseError(f"model.kv_heads ({m['kv_heads']}) must divide model.heads ({m['heads']})")
    if case["phase"] not in ("prefill", "decode"):
        raise CaseError(f"phase must be prefill or decode (got {case['phase']!r:.40})")
    batch, new = _whole(case, "batch"), _whole(case, "new_tokens")
    _whole(case, "kv_len", 0)
    if case["phase"] == "decode" and new != 1:
        raise CaseError(f"a decode step has new_tokens 1 (got {new})")
    if batch * (new + case["kv_len"]) * m["hidden"] > MAX_ELEMENTS:
        raise CaseError(f"batch x tokens x hidden is more than {MAX_ELEMENTS:,}")


def case_condition(case: dict, meta: CaseFile) -> Condition:
    """How the case was timed: its own `timing`, the file's, or the kind's default."""
    if "timing" in case:
        return _condition(case["timing"], "timing")
    if meta.timing is not None:
        return meta.timing
    return Condition.GRAPH if case["kind"] == "model_step" else Condition.STANDALONE


def case_ops(case: dict, meta: CaseFile = CaseFile()) -> list[Op]:
    """The kernel(s) a single-kernel case ran."""
    kind, dt = case["kind"], DType(case["dtype"])
    if kind == "gemm":  # a batched GEMM is one kernel over its groups
        g = case.get("groups", 1)
        shape = {"m": case["M"], "k": case["K"], "n": case["N"], "groups": g}
        return [Op(OpKind.GEMM, dt, **shape, out_dtype=DType.BF16, scaling=Scaling.FIXED)]
    if kind in ("attention_prefill", "attention_decode"):
        prefill = kind == "attention_prefill"
        q = case["seq"] if prefill else 1
        kv = case["seq"] + case.get("kv_len", 0) if prefill else case["kv_len"]
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
                split_kv=not prefill and bool(case.get("split_kv", meta.split_kv)),
                scaling=Scaling.FIXED,
            )
        ]
    if kind == "vector":
        op, style = case["op"], meta.style(case["op"])
        if op == "silu_mul" and style == "eager":  # on the halves of a [M, 2N] tensor, as eager code runs it
            return silu_mul_ops(dt, case["M"], case["N"], eager=True)
        vector = Op(OpKind.VECTOR, dt, m=case["M"], n=case["N"], vop=VECTOR_OPS[op], scaling=Scaling.FIXED)
        if op == "add":  # a block's residual add: inside a running model its residual operand is cold
            vector = replace(vector, cold_reads=1)
        if style != "per_token":
            return [vector]
        if op == "rotary":  # its block is set by the q heads; it rotates them, then the k heads
            if "heads_q" not in case or "heads_kv" not in case:
                raise CaseError("a per-token rotary case needs heads_q and heads_kv (its q and k heads on the chip)")
            heads = {
                "heads": case["heads_q"],
                "kv_heads": case["heads_kv"],
                "head_dim": case.get("head_dim", ROTARY_HEAD_DIM),
            }
            vector = replace(vector, **heads)
        return [replace(vector, per_row=True)]
    if kind == "copy":
        return [Op(OpKind.COPY, dt, bytes=int(case["bytes"]), scaling=Scaling.FIXED)]
    if kind == "allreduce":
        return [Op(OpKind.ALL_REDUCE, dt, bytes=int(case["bytes"]), ranks=case["ranks"], m=1, scaling=Scaling.FIXED)]
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


def predict_ms(case: dict, system: System, meta: CaseFile = CaseFile(), collectives: System | None = None) -> float:
    """The case's predicted time on `system` (collectives on `collectives`, or on `system`), as
    its timer reads it."""
    return predict(case, system, meta, collectives)[0]


def predict(
    case: dict, system: System, meta: CaseFile = CaseFile(), collectives: System | None = None
) -> tuple[float, float]:
    """(the case's time as its timer reads it, the simulated time), in ms."""
    check_case(case)
    r = meta.resolution_s
    condition = case_condition(case, meta)
    kind = case["kind"]
    if condition is Condition.HOST:
        if kind == "model_step":
            raise CaseError(HOST_UNMODELLED.format(kind=kind))
        chip = (collectives or system).chip if kind == "allreduce" else system.chip
        if chip.overheads.host_s <= 0:
            raise CaseError(NO_HOST_COST.format(chip=chip.name))
    if kind == "model_step":
        if condition is not Condition.GRAPH:
            raise CaseError(f"a model_step is timed as a CUDA graph replay (got timing {condition.value})")
        w, step = model_step_workload(case)
        t = simulate_step(w, system, step).time_s
        return 1e3 * truncate(t, r), 1e3 * t
    ops = case_ops(case, meta)
    runs = int(case.get("count", 1))
    if condition is Condition.KERNEL:  # timed inside a running model: the input was just written
        ops = [replace(op, hot=True) if op.kind in (OpKind.VECTOR, OpKind.COPY) else op for op in ops]
    if kind == "allreduce":
        fabric = collectives or system
        if fabric.interconnect is None or fabric.chips < case["ranks"]:
            raise CaseError(
                f"an all-reduce over {case['ranks']} chips needs a multi-chip system "
                f"({fabric.chip.name} x{fabric.chips}{' has no links' if fabric.interconnect is None else ''})"
            )
        t = runs * simulate_collective(ops[0], fabric).time_s + lone_wait_s(system_fabric(fabric), case["ranks"])
        if condition is Condition.HOST:
            t += fabric.chip.overheads.host_s
        return 1e3 * truncate(t, r), 1e3 * t
    chip = system.chip
    t = sum(simulate_op(op, chip, condition, first=(i == 0)).time_s for i, op in enumerate(ops))
    if runs > 1:  # the later runs follow back to back: a launch gap each, no lone launch or flush
        later = Condition.KERNEL if condition is Condition.KERNEL else Condition.GRAPH
        t += (runs - 1) * sum(simulate_op(op, chip, later, first=False).time_s for op in ops)
    if condition is Condition.KERNEL and r > 0:
        read = sum(truncate(d, r) for op in ops for d in kernel_durations_s(op, chip))
        return 1e3 * runs * read, 1e3 * t
    return 1e3 * truncate(t, r), 1e3 * t


def truncate(duration_s: float, resolution_s: float) -> float:
    """`duration_s` as a timer of `resolution_s` reports it, its whole multiples of the
    resolution (`duration_s` itself where the resolution is 0: an exact timer). A duration a
    rounding error short of a multiple counts as that multiple."""
    if resolution_s <= 0:
        return duration_s
    return math.floor(duration_s / resolution_s + 1e-9) * resolution_s


def case_id(case: object, index: int) -> str:
    """A case's name in results and errors: its `id` as text, or `#index` (its place in its
    list) where it has none."""
    return str(case["id"]) if isinstance(case, dict) and "id" in case else f"#{index}"


def repeated_id(seen: dict[str, int], cid: str, index: int) -> str | None:
    """The problem of case `index` named `cid` where an earlier case has that name (`seen`: the
    first place of each name so far, kept up to date), else None. A result, a held-out set and a
    row of the JSON each name a case by its id, so two cases may not share one."""
    first = seen.setdefault(cid, index)
    return None if first == index else f"id {cid!r:.60} is case #{first}'s too: each case needs its own id"


def validate_cases(
    cases: list,
    system: System,
    meta: CaseFile = CaseFile(),
    collectives: System | None = None,
    refuse: Callable[[dict], str | None] | None = None,
    done: Callable[[int], None] | None = None,
) -> tuple[list[CaseResult], list[tuple[str, str]]]:
    """Results for every good case and (id, problem) for every bad one, a case that repeats an
    earlier one's id among them, or that `refuse` says why it will not simulate (the command
    line's size limits); `done(i)` after case i either way. One bad case loses nothing."""
    results, errors = [], []
    seen: dict[str, int] = {}
    for i, case in enumerate(cases):
        cid = case_id(case, i)
        try:
            if not isinstance(case, dict):
                raise CaseError("a case must be an object")
            why = repeated_id(seen, cid, i) or (refuse(case) if refuse else None)
            if why:
                raise CaseError(why)
            predicted, simulated = predict(case, system, meta, collectives)
            results.append(CaseResult(cid, case["kind"], float(case["measured_ms"]), predicted, simulated))
        except (CaseError, ValueError, TypeError) as err:
            errors.append((cid, str(err)))
        if done:
            done(i)
    return results, errors


def cases_of(results: list[CaseResult], cases: list) -> list[dict]:
    """The case objects of `cases` that gave `results`: of each id, its first case (a later one
    of the same id is refused, `repeated_id`), where a result has that id."""
    done = {r.id for r in results}
    seen: dict[str, int] = {}
    return [c for i, c in enumerate(cases) if (cid := case_id(c, i)) in done and repeated_id(seen, cid, i) is None]


def summarise(results: list[CaseResult], cases: list | None = None) -> dict[str, dict]:
    """Per kind: the cases, their mean and worst absolute error, and with `cases` (the case
    objects, of which those with a result count), the error floor of any model whose time never
    falls as a case grows (archsim/runner/floor.py)."""
    out: dict[str, list[float]] = {}
    for r in results:
        out.setdefault(r.kind, []).append(abs(r.error_pct))
    floors: dict[str, float] = {}
    if cases is not None:
        floors = floor_by_kind(cases_of(results, cases))
    return {
        k: {"n": len(v), "mean_abs_error_pct": sum(v) / len(v), "max_abs_error_pct": max(v)}
        | ({"floor_pct": floors.get(k, 0.0)} if cases is not None else {})
        for k, v in sorted(out.items())
    }
