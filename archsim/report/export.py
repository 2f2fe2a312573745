"""Results as plain data (JSON-ready dicts) and files: JSON with the resolved config and its hash.

Every file archsim writes goes through `write_text`: a regular file only (a folder, FIFO, device
or socket at the path is refused, never replaced), written to a temporary file beside it that
is removed on every failure, created with the permissions the umask gives (0644 under the usual
022), then renamed into place. `check_output` runs the same checks before a command starts its
simulation, so a bad output path costs nothing; every error names the user's path.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archsim.config.resolved import ResolvedConfig
from archsim.engine.timing import OpTiming
from archsim.errors import OutputError

if TYPE_CHECKING:
    from archsim.hardware import System
    from archsim.runner.energy import RunEnergy
    from archsim.runner.generation import OpRecord, RunResult, StepResult


def timing_dict(t: OpTiming) -> dict[str, Any]:
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
        "binding_unit": t.binding_unit,
        "unit_utilisation": t.unit_utilisation,
        "time_by_cause_s": {k: v for k, v in t.by_cause.as_dict().items() if k != "schedule_s"},
        "clock_hz": t.clock_hz,
        "energy_j": t.energy_j,
    }


def op_dict(r: OpRecord, system: System | None = None) -> dict[str, Any]:
    """An op of a step; with the system, its energy by unit and its kernels' power."""
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
        **(_op_energy(r, system) if system is not None and system.chip.power is not None else {}),
    }


def _op_energy(r: OpRecord, system: System) -> dict[str, Any]:
    from archsim.report.energy import split_dict
    from archsim.runner.energy import timed

    t = timed(r, system)
    return {"energy_by_unit": split_dict(t.energy), "kernel_power_w": t.kernel_power_w}


def step_dict(s: StepResult, system: System | None = None, ops: bool = True) -> dict[str, Any]:
    """The step's section of `run_dict`; without `ops`, its list of ops left empty."""
    st = s.step
    return {
        "phase": st.phase.value,
        "batch": st.batch,
        "new_tokens": st.new_tokens,
        "kv_len": st.kv_len,
        "time_s": s.time_s,
        "time_by_cause_s": s.by_cause.as_dict(),
        "hbm_bytes": s.hbm_bytes,
        "flops": s.flops,
        "ops": [op_dict(r, system) for r in s.ops] if ops else [],
    }


def run_dict(
    r: RunResult,
    resolved: ResolvedConfig,
    system: System | None = None,
    energy: RunEnergy | None = None,
    area: dict[str, Any] | None = None,
    ops: bool = True,
) -> dict[str, Any]:
    """The document of `archsim run --json`; with the system, each op's energy, with the run's
    energy and the die's area (`report.energy.area_dict`) their sections and headline figures;
    without `ops`, the steps' lists of ops left empty (what only their numbers are read from)."""
    from archsim.report.energy import energy_dict, energy_summary

    fp = r.footprint
    steps = {"kv_len": r.decode_kv_lens.tolist(), "time_s": r.decode_step_s.tolist()}
    if energy is not None:
        steps["energy_j"] = energy.decode_step_j.tolist()
    return {
        "config_hash": resolved.hash,
        "ttft_s": r.ttft_s,
        "tpot_s": r.tpot_s,
        "throughput_tokens_per_s": r.throughput_tokens_per_s,
        "decode_tokens_per_s": r.decode_tokens_per_s,
        "total_time_s": r.total_time_s,
        "time_by_cause_s": r.by_cause.as_dict(),
        "generated_tokens": r.generated_tokens,
        "interrupted": r.interrupted,
        "scenario": {"batch": r.batch, "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens},
        "memory": {
            "weights_bytes": fp.weights_bytes,
            "kv_cache_bytes": fp.kv_cache_bytes,
            "activations_bytes": fp.activations_bytes,
            "capacity_bytes": fp.capacity_bytes,
        },
        "prefill": step_dict(r.prefill, system, ops),
        "decode": step_dict(r.decode, system, ops) if r.decode else None,
        "decode_steps": steps,
        **energy_summary(energy),
        "energy": energy_dict(energy),
        "area_mm2": area["die_mm2"] if area else None,
        "area": area,
        "config": resolved.as_dict(),
    }


def _clean(x: object) -> object:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


MAX_NAME_BYTES = 255  # a file name's length on every common file system


def _nearest_existing(p: Path) -> Path:
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def check_output(path: str | Path, inputs: tuple[str, ...] = (), folder: bool = False) -> None:
    """OutputError unless `path` can be written: a regular file (or, with `folder`, a folder)
    or nothing yet, in a folder that exists or can be made, not one of the run's `inputs`."""
    text = str(path)
    if not text.strip():
        raise OutputError("an output path must not be empty")
    p = Path(os.path.realpath(text))
    if len(p.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise OutputError(f"{text}: the file name is longer than {MAX_NAME_BYTES} bytes")
    if os.path.exists(p):
        mode = os.stat(p).st_mode
        if folder and not stat.S_ISDIR(mode):
            raise OutputError(f"{text}: is a file, not a folder")
        if not folder and stat.S_ISDIR(mode):
            raise OutputError(f"{text}: is a folder, not a file")
        if not folder and not stat.S_ISREG(mode):
            raise OutputError(f"{text}: is not a regular file (a device, FIFO or socket): archsim writes files only")
        for given in inputs:
            if given and os.path.exists(given) and os.path.samefile(given, p):
                raise OutputError(f"{text}: is an input of this run; write the output elsewhere")
    base = _nearest_existing(p.parent)
    if not base.is_dir():
        raise OutputError(f"{text}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OutputError(f"{text}: the folder {base} is not writable")


def check_outputs(
    named: list[tuple[str, str | None]], inputs: tuple[str, ...] = (), folders: tuple[str, ...] = ()
) -> None:
    """`check_output` for every (flag, path) given, and no two outputs at the same path."""
    seen: dict[str, str] = {}
    for flag, path in named:
        if path is None:
            continue
        check_output(path, inputs, folder=flag in folders)
        key = os.path.realpath(path)
        if key in seen:
            raise OutputError(f"{path}: given to both {seen[key]} and {flag}; one file cannot hold both")
        seen[key] = flag


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """Write `data` as sorted, indented JSON atomically (temp file, then rename)."""
    write_text(path, json.dumps(_clean(data), indent=1, sort_keys=True) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write a text file atomically: a temp file beside it (removed on any failure), created as
    the umask allows, then renamed over the path. OutputError names `path` if it cannot be."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | Path, data: bytes) -> None:
    given = str(path)
    check_output(given)
    final = Path(os.path.realpath(given))
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"{given}: cannot make its folder ({err.strerror or err})") from None
    tmp = final.parent / f".{final.name[:200]}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, final)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{given}: cannot write ({err.strerror or err})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
