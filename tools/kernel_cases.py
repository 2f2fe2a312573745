"""The H200's per-kernel durations as validate cases: archsim/data/h200_kernels.json.

    python3 tools/kernel_cases.py            # writes archsim/data/h200_kernels.json

`h200_llama3_8b_kernel_breakdown.json` holds the profiler's duration of every kernel of three
Llama-3-8B steps replayed as CUDA graphs on the H200 (decode batch 1 at KV 1,024, decode batch
32 at KV 2,048, prefill of 2,048 tokens), summed per kernel name over the step's calls. A kernel
whose calls all ran one shape of one op is a case of `kernel` timing (the profiler's duration,
no launch, no flush; its input written by the kernel before): its mean duration per call.
Each step's layer runs the kernels the case set's README lists; which kernel ran which op is
told apart by its calls per step and its tile (cuBLAS's nvjet names give the tile: 128x8 is
128 columns of the output by 8 rows) and by bytes: the gate+up projection is the largest GEMM
of a layer, then the down projection, the fused QKV and the output projection.

- GEMMs: every projection of the two decode steps, and the LM head; of the prefill, the gate+up
  projection and the LM head (its other three projections share one kernel name, 96 calls of
  three shapes: left out). A projection cuBLAS split along K (`splitK` in the name) is the GEMM
  kernel plus the `splitKreduce_kernel` that sums its slices (two such per layer: 64 calls per
  step), so its case is their sum, as a profiler's summed kernels of the op read it.
- Attention: cuDNN's flash kernel, one per layer. Decode: one query row per sequence over its KV
  length and the new token, no KV split (the step ran cuDNN's one-pass kernel); prefill: the
  heads of K and V expanded before it (the README's step 5), so it runs 32 KV heads.
- Vector: the normalisation kernel (two per layer and the final one, all of one shape); the
  batch-1 step's SiLU and multiply (one each per layer: a `silu_mul` case is both kernels); the
  batch-1 step's vectorised adds (six per layer: the two residual adds of [1, 4,096] and the
  rotary embedding's four of 2,048 and 512 elements, all below one wave, their mean taken as the
  residual add's).

Kernels with calls of several shapes (the rotary embedding's strided multiplies and copies, the
prefill's elementwise kernels) and the memsets are left out: no one shape ran them.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "archsim" / "data"
SOURCE = DATA / "h200_llama3_8b_kernel_breakdown.json"
OUT = DATA / "h200_kernels.json"


def _model() -> dict:
    """The Llama-3-8B shape the breakdown's steps ran: the calibration set's model steps' `model`."""
    cases = json.loads((DATA / "h200_calibration.json").read_text())["cases"]
    shapes = {json.dumps(c["model"], sort_keys=True) for c in cases if c["kind"] == "model_step"}
    if len(shapes) != 1:
        raise SystemExit(f"the calibration set's model steps name {len(shapes)} models; expected one")
    return json.loads(shapes.pop())


MODEL = _model()
REDUCE = "void cublasLt::splitKreduce_kernel"
NORM = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
SILU = "void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::silu_kernel"
MUL = "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor"
ADD = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add"
ATTENTION = "cudnn_generated_fort_native_sdpa"


def per_call_us(step: dict, prefix: str) -> float:
    """Mean duration per call of the one kernel of `step` whose name starts with `prefix`."""
    found = [k for name, k in step["kernels"].items() if name.startswith(prefix)]
    if len(found) != 1:
        raise SystemExit(f"{len(found)} kernels start with {prefix!r}; expected one")
    return found[0]["us"] / found[0]["calls"]


def case(id_: str, kind: str, us: float, **fields) -> dict:
    return {"id": id_, "kind": kind, "dtype": "bf16", "measured_ms": round(us / 1e3, 6), **fields}


def decode_cases(name: str, step: dict, tiles: dict[str, str]) -> list[dict]:
    """One decode step's cases; `tiles` names each projection's nvjet kernel (less the prefix)."""
    m, h = step["batch"], MODEL["hidden"]
    tag = f"b{m}"

    def gemm(op: str) -> float:
        us = per_call_us(step, "nvjet_sm90_tst_" + tiles[op])
        return us + per_call_us(step, REDUCE) if "splitK" in tiles[op] else us

    qkv = (MODEL["heads"] + 2 * MODEL["kv_heads"]) * MODEL["head_dim"]
    out = [
        case(f"{tag}.qkv", "gemm", gemm("qkv"), M=m, K=h, N=qkv),
        case(f"{tag}.o", "gemm", gemm("o"), M=m, K=h, N=h),
        case(f"{tag}.gate_up", "gemm", gemm("gate_up"), M=m, K=h, N=2 * MODEL["ffn"]),
        case(f"{tag}.down", "gemm", gemm("down"), M=m, K=MODEL["ffn"], N=h),
        case(f"{tag}.lm_head", "gemm", gemm("lm_head"), M=m, K=h, N=MODEL["vocab"]),
        case(
            f"{tag}.attention",
            "attention_decode",
            per_call_us(step, ATTENTION),
            batch=m,
            heads_q=MODEL["heads"],
            heads_kv=MODEL["kv_heads"],
            head_dim=MODEL["head_dim"],
            kv_len=step["kv_len"] + 1,
        ),
        case(f"{tag}.rmsnorm", "vector", per_call_us(step, NORM), op="rmsnorm", M=m, N=h),
    ]
    if m == 1:  # the halves of [1, 2 ffn] are contiguous: vectorised kernels, one shape each
        silu_mul = per_call_us(step, SILU) + per_call_us(step, MUL)
        out.append(case(f"{tag}.silu_mul", "vector", silu_mul, op="silu_mul", M=m, N=MODEL["ffn"]))
        out.append(case(f"{tag}.add", "vector", per_call_us(step, ADD), op="add", M=m, N=h))
    return [dict(c, id=f"{name}/{c['id']}") for c in out]


def prefill_cases(name: str, step: dict) -> list[dict]:
    m, h = step["new_tokens"], MODEL["hidden"]
    out = [
        case("gate_up", "gemm", per_call_us(step, "nvjet_sm90_tst_320x128"), M=m, K=h, N=2 * MODEL["ffn"]),
        case("lm_head", "gemm", per_call_us(step, "nvjet_sm90_tst_256x8"), M=1, K=h, N=MODEL["vocab"]),
        case(
            "attention",
            "attention_prefill",
            per_call_us(step, ATTENTION),
            batch=step["batch"],
            heads_q=MODEL["heads"],
            heads_kv=MODEL["heads"],
            head_dim=MODEL["head_dim"],
            seq=m,
            causal=True,
        ),
        case("rmsnorm", "vector", per_call_us(step, NORM), op="rmsnorm", M=m, N=h),
    ]
    return [dict(c, id=f"{name}/{c['id']}") for c in out]


def kernel_cases(breakdown: dict) -> dict:
    steps = breakdown["steps"]
    cases = decode_cases(
        "decode_b1_kv1024",
        steps["decode_b1_kv1024"],
        {
            "qkv": "64x8_64x16_4x1_v_bz_TNT",
            "o": "64x8_64x16_2x1_v_bz_splitK_TNT",
            "gate_up": "128x8_64x12_2x1_v_bz_TNT",
            "down": "128x8_64x12_2x1_v_bz_splitK_TNT",
            "lm_head": "256x8_64x6_2x1_v_bz_TNT",
        },
    )
    cases += decode_cases(
        "decode_b32_kv2048",
        steps["decode_b32_kv2048"],
        {
            "qkv": "64x32_64x16_4x1_v_bz_TNT",
            "o": "64x32_64x16_2x1_v_bz_splitK_TNT",
            "gate_up": "128x32_64x10_2x1_v_bz_TNT",
            "down": "128x32_64x10_2x1_v_bz_splitK_TNT",
            "lm_head": "512x32_64x3_2x1_v_bz_TNT",
        },
    )
    cases += prefill_cases("prefill_b1_s2048", steps["prefill_b1_s2048"])
    meta = {
        "device": breakdown["meta"]["device"],
        "software": breakdown["meta"]["software"],
        "timing": "kernel: each kernel's profiled GPU duration inside a CUDA-graph replay of a Llama-3-8B"
        " step, the mean over its calls (no launch, no L2 flush; inputs just written by the kernel before)",
        "source": "h200_llama3_8b_kernel_breakdown.json, by tools/kernel_cases.py (which kernel ran which op)",
        "split_kv": False,
    }
    return {"meta": meta, "cases": cases}


def main() -> None:
    OUT.write_text(json.dumps(kernel_cases(json.loads(SOURCE.read_text())), indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
