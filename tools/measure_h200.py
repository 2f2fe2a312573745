#!/usr/bin/env python3
"""Measure a held-out set of H200 kernel timings in the ground-truth schema.

Usage (on a machine with an NVIDIA GPU and PyTorch):

    PYTHONUNBUFFERED=1 python3 tools/measure_h200.py [OUT.json]

OUT.json defaults to $OUT/h200_holdout.json (or ./h200_holdout.json when $OUT is
unset). Without a GPU, ``--dry-run`` prints the case list and checks it; the pure
Python parts (case list, repetition policy, statistics) need no torch.
Options: ``--kinds=attention_decode,...`` measures only those kinds;
``--attn-layout=bshd`` stores q/k/v as [B,S,H,D] and passes [B,H,S,D] transposed
views (default ``bhsd``: contiguous [B,H,S,D]); ``--no-ceilings`` skips the
ceiling measurements.

The output has the same schema as shared/groundtruth/h200_calibration.json:
``{"meta": {...}, "cases": [...]}``; every case has ``id`` (unique), ``kind``,
``dtype`` (``bf16`` or ``fp8``), ``measured_ms`` and the per-kind fields.

Method (the same as the calibration set): each case is warmed up first, then
timed with CUDA events around one call; before every timed repetition the L2 is
flushed by writing a 256 MiB buffer (followed by a short GPU spin so that the
CPU has queued the timed call before the GPU reaches it); the reported time is
the median over the repetitions (20 for short cases, 10 above 1 ms, 5 above 5
ms), in milliseconds, rounded to 5 significant digits.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

MIB = 1 << 20
GIB = 1 << 30
FLUSH_BYTES = 256 * MIB  # >= 128 MiB, more than 4x the H200's 60 MiB L2
MAX_GEMM_BYTES = 20e9  # skip GEMMs whose three tensors exceed this
SPIN_SECONDS = 100e-6  # GPU spin after the flush, before the timed call
TIME_LIMIT_S = 420.0  # stop starting new cases after this (safety net)
WARMUP_CALLS = 3

METHOD = (
    "median GPU time (ms) of one call, timed with torch.cuda.Event; warm-up calls "
    "first; before every timed repetition the L2 is flushed by writing (zero_) a "
    "256 MiB buffer, then a ~100 us GPU spin (torch.cuda._sleep) so the timed call "
    "is queued before the GPU reaches it; 20 timed repetitions (10 if a call takes "
    "over 1 ms, 5 if over 5 ms); 5 significant digits. gemm bf16: "
    "F.linear(x[M,K], W[N,K]) (cuBLAS). gemm fp8: torch._scaled_mm(x_e4m3[M,K], "
    "W_e4m3[N,K].t(), scale_a=scale_b=1.0 (fp32 scalar tensors), out_dtype=bf16). "
    "attention: F.scaled_dot_product_attention on [B,H,S,D] bf16 tensors, "
    "enable_gqa=True when heads_kv<heads_q, backend forced with sdpa_kernel "
    "(CUDNN_ATTENTION, FLASH_ATTENTION if cuDNN fails; see meta.sdpa_backend); "
    "prefill is_causal=True, decode query length 1 not causal. vector: rmsnorm = "
    "F.rms_norm(x, (N,), w, eps=1e-5); silu_mul = F.silu(x[:, :N]) * x[:, N:] on "
    "[M,2N]; add = a + b; softmax = torch.softmax(x, -1). copy: y.copy_(x) of "
    "`bytes` bytes (bf16 tensors). ceilings: hbm_copy_GBps = 2*4GiB/t of a 4 GiB "
    "copy; gemm_8192_TFLOPs = 2*8192^3/t of a bf16 8192^3 F.linear (and fp8 "
    "_scaled_mm when it works)."
)

# --------------------------------------------------------------------------- cases
# (label, K, N)
GEMM_BF16_SHAPES = [
    ("l3_70b.qkv", 8192, 10240),
    ("l3_70b.o", 8192, 8192),
    ("l3_70b.gate_up", 8192, 57344),
    ("l3_70b.down", 28672, 8192),
    ("mixtral_8x7b.expert_gate_up", 4096, 28672),
    ("mixtral_8x7b.expert_down", 14336, 4096),
    ("qwen2_7b.qkv", 3584, 4608),
    ("qwen2_7b.gate_up", 3584, 37888),
    ("qwen2_7b.down", 18944, 3584),
]
GEMM_BF16_MS = [1, 16, 128, 512, 2048, 8192]

GEMM_FP8_SHAPES = [
    ("l3_8b.qkv", 4096, 6144),
    ("l3_8b.gate_up", 4096, 28672),
    ("l3_8b.down", 14336, 4096),
]
GEMM_FP8_MS = [1, 128, 1024, 4096, 8192]
GEMM_FP8_EXTRA = [("square8192", 8192, 8192, 8192)]  # (label, M, K, N)

# (batch, heads_q, heads_kv, head_dim, seq)
ATTN_PREFILL = [
    (1, 64, 8, 128, 1024),
    (1, 64, 8, 128, 4096),
    (2, 32, 8, 128, 4096),
    (1, 28, 4, 128, 2048),
    (8, 32, 32, 128, 1024),
]
# (batch, heads_q, heads_kv, head_dim, kv_len)
ATTN_DECODE = [
    (1, 64, 8, 128, 1024),
    (1, 64, 8, 128, 8192),
    (16, 32, 8, 128, 4096),
    (64, 32, 32, 128, 1024),
    (4, 28, 4, 128, 16384),
]
VECTOR_OPS = ["rmsnorm", "silu_mul", "add", "softmax"]
VECTOR_MN = [(16, 8192), (256, 8192), (4096, 8192)]
VECTOR_EXTRA = [("silu_mul", 2048, 28672)]  # N is the half width, input [M, 2N]
COPY_MIB = [2, 32, 512, 2048]

# options (set from the command line, see main)
ATTN_LAYOUT = "bhsd"  # --attn-layout=bshd: q/k/v stored [B,S,H,D], passed transposed
KINDS: set[str] | None = None  # --kinds=a,b: measure only these kinds
SKIP_CEILINGS = False  # --no-ceilings


def gemm_bytes(M: int, K: int, N: int, in_elt: int = 2, out_elt: int = 2) -> int:
    """Bytes of x[M,K], W[N,K] and y[M,N]."""
    return (M * K + N * K) * in_elt + M * N * out_elt


def fmt_mib(nbytes: int) -> str:
    mib = nbytes / MIB
    return f"{mib:g}MiB"


def build_cases() -> list[dict]:
    """The case specs (everything but measured_ms), in measurement order."""
    cases: list[dict] = []
    for label, K, N in GEMM_BF16_SHAPES:
        for M in GEMM_BF16_MS:
            if gemm_bytes(M, K, N) > MAX_GEMM_BYTES:
                continue
            cases.append({"id": f"gemm/{label}/M{M}", "kind": "gemm", "dtype": "bf16", "M": M, "K": K, "N": N})
    for label, K, N in GEMM_FP8_SHAPES:
        for M in GEMM_FP8_MS:
            if gemm_bytes(M, K, N, 1, 2) > MAX_GEMM_BYTES:
                continue
            cases.append({"id": f"gemm/{label}.fp8/M{M}", "kind": "gemm", "dtype": "fp8", "M": M, "K": K, "N": N})
    for label, M, K, N in GEMM_FP8_EXTRA:
        cases.append({"id": f"gemm/{label}.fp8/M{M}", "kind": "gemm", "dtype": "fp8", "M": M, "K": K, "N": N})
    for b, hq, hkv, d, s in ATTN_PREFILL:
        cases.append(
            {
                "id": f"attention_prefill/b{b}_hq{hq}_hkv{hkv}_d{d}_s{s}",
                "kind": "attention_prefill",
                "dtype": "bf16",
                "batch": b,
                "heads_q": hq,
                "heads_kv": hkv,
                "head_dim": d,
                "seq": s,
                "causal": True,
            }
        )
    for b, hq, hkv, d, kv in ATTN_DECODE:
        cases.append(
            {
                "id": f"attention_decode/b{b}_hq{hq}_hkv{hkv}_d{d}_kv{kv}",
                "kind": "attention_decode",
                "dtype": "bf16",
                "batch": b,
                "heads_q": hq,
                "heads_kv": hkv,
                "head_dim": d,
                "kv_len": kv,
            }
        )
    for M, N in VECTOR_MN:
        for op in VECTOR_OPS:
            cases.append({"id": f"vector/{op}/M{M}_N{N}", "kind": "vector", "dtype": "bf16", "op": op, "M": M, "N": N})
    for op, M, N in VECTOR_EXTRA:
        cases.append({"id": f"vector/{op}/M{M}_N{N}", "kind": "vector", "dtype": "bf16", "op": op, "M": M, "N": N})
    for mib in COPY_MIB:
        nbytes = mib * MIB
        cases.append({"id": f"copy/{fmt_mib(nbytes)}", "kind": "copy", "dtype": "bf16", "bytes": nbytes})
    check_cases(cases)
    if KINDS is not None:
        cases = [c for c in cases if c["kind"] in KINDS]
    return cases


REQUIRED_FIELDS = {
    "gemm": ("M", "K", "N"),
    "attention_prefill": ("batch", "heads_q", "heads_kv", "head_dim", "seq", "causal"),
    "attention_decode": ("batch", "heads_q", "heads_kv", "head_dim", "kv_len"),
    "vector": ("op", "M", "N"),
    "copy": ("bytes",),
}


def check_cases(cases: list[dict]) -> None:
    ids = [c["id"] for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate case ids: {dup}")
    for c in cases:
        if c["kind"] not in REQUIRED_FIELDS:
            raise ValueError(f"{c['id']}: unknown kind {c['kind']}")
        if c["dtype"] not in ("bf16", "fp8"):
            raise ValueError(f"{c['id']}: bad dtype {c['dtype']}")
        missing = [f for f in REQUIRED_FIELDS[c["kind"]] if f not in c]
        if missing:
            raise ValueError(f"{c['id']}: missing {missing}")
        if c["kind"].startswith("attention") and c["heads_q"] % c["heads_kv"]:
            raise ValueError(f"{c['id']}: heads_q not a multiple of heads_kv")


def reps_for(est_ms: float) -> int:
    """Timed repetitions for a call that takes about est_ms."""
    if est_ms > 5.0:
        return 5
    if est_ms > 1.0:
        return 10
    return 20


def round_sig(x: float, sig: int = 5) -> float:
    return float(f"{x:.{sig}g}")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def default_out_path() -> str:
    return os.path.join(os.environ.get("OUT", "."), "h200_holdout.json")


def log(msg: str) -> None:
    print(msg, flush=True)


def nvidia_smi(fields: str) -> str | None:
    try:
        r = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip().splitlines()[0].strip()
    except Exception:
        pass
    return None


# --------------------------------------------------------------------------- GPU part
class _Skip(Exception):
    pass


class Bench:
    def __init__(self, torch):
        self.torch = torch
        self.dev = torch.device("cuda")
        self.flush_buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=self.dev)
        props = torch.cuda.get_device_properties(0)
        clock_khz = getattr(props, "clock_rate", 0) or 1980000
        self.spin_cycles = int(SPIN_SECONDS * clock_khz * 1e3)
        self.can_spin = hasattr(torch.cuda, "_sleep")

    def flush(self):
        self.flush_buf.zero_()
        if self.can_spin:
            self.torch.cuda._sleep(self.spin_cycles)

    def time(self, fn, reps: int | None = None) -> tuple[float, int, list[float]]:
        torch = self.torch
        for _ in range(WARMUP_CALLS):
            fn()
        torch.cuda.synchronize()
        # one flushed, timed call to choose the repetition count
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        self.flush()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        n = reps or reps_for(s.elapsed_time(e))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self.flush()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) for a, b in zip(starts, ends)]
        return median(times), n, times


def make_gemm_bf16(torch, M, K, N):
    F = torch.nn.functional
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    return lambda: F.linear(x, w)


def make_gemm_fp8(torch, M, K, N):
    f8 = torch.float8_e4m3fn
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16).to(f8)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).to(f8)  # row-major [N,K]
    wt = w.t()  # column-major [K,N]
    one_a = torch.tensor(1.0, device="cuda", dtype=torch.float32)
    one_b = torch.tensor(1.0, device="cuda", dtype=torch.float32)

    def fn():
        return torch._scaled_mm(x, wt, scale_a=one_a, scale_b=one_b, out_dtype=torch.bfloat16)

    out = fn()
    if isinstance(out, tuple):  # very old torch returned (out, amax)
        out = out[0]
    assert out.shape == (M, N) and out.dtype == torch.bfloat16, (out.shape, out.dtype)
    torch.cuda.synchronize()
    return fn


def sdpa_backends(torch):
    from torch.nn.attention import SDPBackend

    return [("CUDNN_ATTENTION", SDPBackend.CUDNN_ATTENTION), ("FLASH_ATTENTION", SDPBackend.FLASH_ATTENTION)]


def make_attention(torch, c, errors: list):
    """Returns (fn, backend_name). Tries cuDNN, then flash."""
    from torch.nn.attention import sdpa_kernel

    F = torch.nn.functional
    b, hq, hkv, d = c["batch"], c["heads_q"], c["heads_kv"], c["head_dim"]
    if c["kind"] == "attention_prefill":
        sq = skv = c["seq"]
        causal = True
    else:
        sq, skv = 1, c["kv_len"]
        causal = False
    if ATTN_LAYOUT == "bshd":
        # [B,S,H,D] storage viewed as [B,H,S,D] (as q/k/v come out of a projection)
        q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        v = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    else:
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)
    kwargs = {"is_causal": causal}
    if hkv < hq:
        kwargs["enable_gqa"] = True
    for name, backend in sdpa_backends(torch):

        def fn(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, **kwargs)

        try:
            out = fn()
            torch.cuda.synchronize()
            assert out.shape == (b, hq, sq, d), out.shape
            return fn, name
        except Exception as ex:
            errors.append(f"{c['id']}: {name} failed: {type(ex).__name__}: {str(ex)[:300]}")
    raise RuntimeError(f"no SDPA backend worked for {c['id']}")


def make_vector(torch, c):
    F = torch.nn.functional
    M, N, op = c["M"], c["N"], c["op"]
    bf = torch.bfloat16
    if op == "rmsnorm":
        x = torch.randn(M, N, device="cuda", dtype=bf)
        w = torch.randn(N, device="cuda", dtype=bf)
        return lambda: F.rms_norm(x, (N,), w, eps=1e-5)
    if op == "silu_mul":
        x = torch.randn(M, 2 * N, device="cuda", dtype=bf)
        return lambda: F.silu(x[:, :N]) * x[:, N:]
    if op == "add":
        a = torch.randn(M, N, device="cuda", dtype=bf)
        bb = torch.randn(M, N, device="cuda", dtype=bf)
        return lambda: a + bb
    if op == "softmax":
        x = torch.randn(M, N, device="cuda", dtype=bf)
        return lambda: torch.softmax(x, dim=-1)
    raise ValueError(op)


def make_copy(torch, nbytes):
    n = nbytes // 2
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def kernel_names(torch, fn) -> list[str]:
    """Names of the GPU kernels one call launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for ev in prof.events():
        dt = getattr(ev, "device_type", None)
        if dt is not None and "CUDA" in str(dt):
            names.append(ev.name[:160])
    return names


def gpu_main(out_path: str) -> int:
    t0 = time.time()
    import torch

    log(f"[{time.time() - t0:6.1f}s] torch {torch.__version__} imported; cuda={torch.cuda.is_available()}")
    if not torch.cuda.is_available():
        log("no CUDA device")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    smi = nvidia_smi("driver_version,clocks.max.sm,clocks.max.mem,power.limit")
    smi_now = nvidia_smi("clocks.sm,clocks.mem,power.draw,temperature.gpu,pstate")
    meta = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "mem_gib": round(props.total_memory / GIB, 1),
        "software": f"torch {torch.__version__} (cuBLAS, cuDNN/flash SDPA)",
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "compute_capability": f"{props.major}.{props.minor}",
        "clocks_and_power": smi,
        "clocks_and_power_fields": "driver_version, clocks.max.sm, clocks.max.mem, power.limit",
        "clocks_at_start": smi_now,
        "method": METHOD,
        "sdpa_backend": {},
        "sdpa_backend_errors": [],
        "kernels_per_case": {},
        "failures": [],
        "skipped": [],
        "notes": [],
        "ceilings": {},
    }
    result = {"meta": meta, "cases": []}

    def dump():
        d = os.path.dirname(os.path.abspath(out_path))
        os.makedirs(d, exist_ok=True)
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, out_path)

    bench = Bench(torch)
    log(
        f"[{time.time() - t0:6.1f}s] {props.name}, {props.multi_processor_count} SMs, "
        f"L2 {meta['l2_bytes']}, spin {bench.spin_cycles} cycles ({bench.can_spin})"
    )

    meta["attention_layout"] = ATTN_LAYOUT
    if KINDS is not None:
        meta["kinds_measured"] = sorted(KINDS)
    # ---- ceilings (also warm the clocks up)
    try:
        if SKIP_CEILINGS:
            raise _Skip()
        fn = make_gemm_bf16(torch, 8192, 8192, 8192)
        ms, n, _ = bench.time(fn)
        meta["ceilings"]["gemm_8192_TFLOPs"] = round(2 * 8192**3 / (ms * 1e-3) / 1e12, 1)
        del fn
        fn = make_copy(torch, 4 * GIB)
        ms, n, _ = bench.time(fn)
        meta["ceilings"]["hbm_copy_GBps"] = round(2 * 4 * GIB / (ms * 1e-3) / 1e9, 1)
        del fn
    except _Skip:
        pass
    except Exception as ex:
        meta["failures"].append(f"ceilings: {type(ex).__name__}: {str(ex)[:300]}")
        traceback.print_exc()
    try:
        if SKIP_CEILINGS:
            raise _Skip()
        fn = make_gemm_fp8(torch, 8192, 8192, 8192)
        ms, n, _ = bench.time(fn)
        meta["ceilings"]["gemm_fp8_8192_TFLOPs"] = round(2 * 8192**3 / (ms * 1e-3) / 1e12, 1)
        del fn
    except _Skip:
        pass
    except Exception as ex:
        meta["failures"].append(f"ceiling fp8: {type(ex).__name__}: {str(ex)[:300]}")
    torch.cuda.empty_cache()
    log(f"[{time.time() - t0:6.1f}s] ceilings {meta['ceilings']}")
    dump()

    cases = build_cases()
    last_kind = None
    profiled_kinds = set()
    census: list[dict] = []

    def rebuild(c):
        if c["kind"] == "gemm" and c["dtype"] == "bf16":
            return make_gemm_bf16(torch, c["M"], c["K"], c["N"])
        if c["kind"] == "gemm":
            return make_gemm_fp8(torch, c["M"], c["K"], c["N"])
        if c["kind"].startswith("attention"):
            fn, _ = make_attention(torch, c, [])
            return fn
        if c["kind"] == "vector":
            return make_vector(torch, c)
        return make_copy(torch, c["bytes"])

    for i, c in enumerate(cases):
        if time.time() - t0 > TIME_LIMIT_S:
            meta["skipped"].append(f"{c['id']}: time limit")
            continue
        if c["kind"] != last_kind:
            torch.cuda.empty_cache()
            dump()
            last_kind = c["kind"]
        c = dict(c)
        try:
            extra_note = None
            if c["kind"] == "gemm" and c["dtype"] == "bf16":
                fn = make_gemm_bf16(torch, c["M"], c["K"], c["N"])
            elif c["kind"] == "gemm":
                try:
                    fn = make_gemm_fp8(torch, c["M"], c["K"], c["N"])
                except Exception as ex:
                    if c["M"] % 16 == 0:
                        raise
                    meta["failures"].append(f"{c['id']}: {type(ex).__name__}: {str(ex)[:300]}")
                    m16 = (c["M"] + 15) // 16 * 16
                    fn = make_gemm_fp8(torch, m16, c["K"], c["N"])
                    extra_note = f"{c['id']} failed at M={c['M']}; measured M={m16} instead"
                    c["id"] = c["id"].rsplit("/M", 1)[0] + f"/M{m16}"
                    c["M"] = m16
            elif c["kind"].startswith("attention"):
                fn, backend = make_attention(torch, c, meta["sdpa_backend_errors"])
                meta["sdpa_backend"][c["id"]] = backend
            elif c["kind"] == "vector":
                fn = make_vector(torch, c)
            elif c["kind"] == "copy":
                fn = make_copy(torch, c["bytes"])
            else:
                raise ValueError(c["kind"])
            if any(x["id"] == c["id"] for x in result["cases"]):
                meta["skipped"].append(f"{c['id']}: duplicate after padding")
                continue
            ms, n, times = bench.time(fn)
            c["measured_ms"] = round_sig(ms)
            result["cases"].append(c)
            if extra_note:
                meta["notes"].append(extra_note)
            # kernel census (run after all timings): every attention case and the
            # first case of every other kind/dtype
            key = c["kind"] + "/" + c["dtype"]
            if c["kind"].startswith("attention") or key not in profiled_kinds:
                census.append(c)
                profiled_kinds.add(key)
            spread = (max(times) - min(times)) / ms if ms > 0 else 0.0
            log(
                f"[{time.time() - t0:6.1f}s] {i + 1:3d}/{len(cases)} {c['id']:55s} "
                f"{c['measured_ms']:10.5g} ms  (n={n}, spread {spread:.0%})"
            )
            del fn
        except Exception as ex:
            meta["failures"].append(f"{c['id']}: {type(ex).__name__}: {str(ex)[:300]}")
            log(f"[{time.time() - t0:6.1f}s] {i + 1:3d}/{len(cases)} {c['id']} FAILED: {ex}")
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
    meta["clocks_at_end"] = nvidia_smi("clocks.sm,clocks.mem,power.draw,temperature.gpu,pstate")
    dump()
    # ---- kernel census with torch.profiler, after all timings so that the
    # profiler cannot disturb them
    for c in census:
        if time.time() - t0 > TIME_LIMIT_S:
            meta["notes"].append("kernel census cut short by the time limit")
            break
        try:
            fn = rebuild(c)
            meta["kernels_per_case"][c["id"]] = kernel_names(torch, fn)
            del fn
        except Exception as ex:
            meta["notes"].append(f"profiler failed on {c['id']}: {str(ex)[:200]}")
    log(
        f"[{time.time() - t0:6.1f}s] kernel census done: "
        + "; ".join(f"{k}: {len(v)}" for k, v in meta["kernels_per_case"].items())
    )
    meta["wall_s"] = round(time.time() - t0, 1)
    dump()
    counts = {}
    for c in result["cases"]:
        counts[f"{c['kind']}/{c['dtype']}"] = counts.get(f"{c['kind']}/{c['dtype']}", 0) + 1
    log(f"[{time.time() - t0:6.1f}s] wrote {len(result['cases'])} cases to {out_path}: {counts}")
    log(f"failures: {meta['failures']}")
    log(f"sdpa backends: {sorted(set(meta['sdpa_backend'].values()))}")
    return 0


def parse_options(argv: list[str]) -> list[str]:
    """Sets the module options from --flags; returns the positional arguments."""
    global ATTN_LAYOUT, KINDS, SKIP_CEILINGS
    for a in argv[1:]:
        if a.startswith("--attn-layout="):
            ATTN_LAYOUT = a.split("=", 1)[1]
            if ATTN_LAYOUT not in ("bhsd", "bshd"):
                raise SystemExit(f"bad --attn-layout {ATTN_LAYOUT}")
        elif a.startswith("--kinds="):
            KINDS = set(a.split("=", 1)[1].split(","))
            bad = KINDS - set(REQUIRED_FIELDS)
            if bad:
                raise SystemExit(f"unknown kinds {sorted(bad)}")
        elif a == "--no-ceilings":
            SKIP_CEILINGS = True
        elif a.startswith("--") and a != "--dry-run":
            raise SystemExit(f"unknown option {a}")
    return [a for a in argv[1:] if not a.startswith("--")]


def main(argv: list[str]) -> int:
    args = parse_options(argv)
    if "--dry-run" in argv:
        cases = build_cases()
        counts: dict[str, int] = {}
        for c in cases:
            k = f"{c['kind']}/{c['dtype']}"
            counts[k] = counts.get(k, 0) + 1
            print(c["id"])
        print(f"{len(cases)} cases: {counts}")
        return 0
    out_path = args[0] if args else default_out_path()
    return gpu_main(out_path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
