"""Results as plain data (JSON-ready dicts) and files: JSON with the resolved config and its hash."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from archsim.config.resolved import ResolvedConfig
from archsim.engine.timing import OpTiming
from archsim.runner.generation import OpRecord, RunResult, StepResult


def timing_dict(t: OpTiming) -> dict:
    return {
        "time_s": t.time_s,
        "cycles": t.cycles,
        "compute_cycles": t.compute_cycles,
        "stall_cycles": t.stall_cycles,
        "overhead_cycles": t.overhead_cycles,
        "hbm_bytes": t.hbm_bytes,
        "l2_bytes": t.l2_bytes,
        "flops": t.flops,
        "min_bytes": t.min_bytes,
        "kernels": t.kernels,
        "active_cores": t.active_cores,
        "utilisation": t.utilisation,
        "achieved_flops_per_s": t.achieved_flops,
        "achieved_bytes_per_s": t.achieved_bytes_per_s,
        "bound": t.bound.value,
        "clock_hz": t.clock_hz,
        "energy_j": t.energy_j,
    }


def op_dict(r: OpRecord) -> dict:
    op = r.op
    shape = {
        k: getattr(op, k)
        for k in ("m", "k", "n", "groups", "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "bytes")
        if getattr(op, k)
    }
    return {
        "name": op.name,
        "kind": op.kind.value,
        "repeat": op.repeat,
        "shape": shape,
        "step_time_s": r.time_s,
        **timing_dict(r.timing),
    }


def step_dict(s: StepResult) -> dict:
    st = s.step
    return {
        "phase": st.phase.value,
        "batch": st.batch,
        "new_tokens": st.new_tokens,
        "kv_len": st.kv_len,
        "time_s": s.time_s,
        "hbm_bytes": s.hbm_bytes,
        "flops": s.flops,
        "ops": [op_dict(r) for r in s.ops],
    }


def run_dict(r: RunResult, resolved: ResolvedConfig) -> dict:
    fp = r.footprint
    return {
        "config_hash": resolved.hash,
        "ttft_s": r.ttft_s,
        "tpot_s": r.tpot_s,
        "throughput_tokens_per_s": r.throughput_tokens_per_s,
        "decode_tokens_per_s": r.decode_tokens_per_s,
        "total_time_s": r.total_time_s,
        "generated_tokens": r.generated_tokens,
        "interrupted": r.interrupted,
        "scenario": {"batch": r.batch, "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens},
        "memory": {
            "weights_bytes": fp.weights_bytes,
            "kv_cache_bytes": fp.kv_cache_bytes,
            "activations_bytes": fp.activations_bytes,
            "capacity_bytes": fp.capacity_bytes,
        },
        "prefill": step_dict(r.prefill),
        "decode": step_dict(r.decode) if r.decode else None,
        "decode_steps": {"kv_len": r.decode_kv_lens.tolist(), "time_s": r.decode_step_s.tolist()},
        "config": resolved.as_dict(),
    }


def _clean(x):
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def write_json(path: str | Path, data: dict) -> None:
    """Write `data` as sorted, indented JSON atomically (temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_clean(data), indent=1, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_text(path: str | Path, text: str) -> None:
    """Write a text file atomically (temp file, then rename), readable as the umask allows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
