"""Properties `tools/hostile.py` checks after a run: results that are physically plausible,
files that must be kept, modes, temp files left behind, rows recorded by a sweep.

Each factory returns a check `(folder, outcome) -> None | what is wrong`. A check about a
result holds vacuously when the run was refused (exit 2): refusing is always allowed.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

TEMP_NAMES = (".tmp",)


def _refused(outcome) -> bool:
    return outcome.rc == 2


def _finite_positive(data: dict, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = data
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            return f"{key} = {value!r} is not a finite number above zero"
    return None


def _peaks(hw: dict) -> tuple[float, float]:
    """(peak FLOP/s at the fastest dtype, peak HBM bytes/s) of a resolved hardware config."""
    c, h = hw["cores"], hw["hbm"]
    mu = c["matrix_units"]
    flops = 2.0 * c["count"] * mu["count"] * mu["rows"] * mu["cols"] * max(mu["k_per_cycle"].values()) * hw["clock"]
    bw = h["stacks"] * h["channels_per_stack"] * h["channel_width_bits"] * h["data_rate"] / 8.0
    return flops, bw


def _step_floor(step: dict, flops_peak: float, bw_peak: float, chips: int) -> str | None:
    """A step may not beat its compute or its HBM roof (a little slack for rounding)."""
    if step is None:
        return None
    t = step.get("time_s")
    if not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        return f"{step.get('phase')} step time {t!r}"
    floor = max(step.get("flops", 0) / (flops_peak * chips), step.get("hbm_bytes", 0) / (bw_peak * chips))
    if t < floor * 0.999:
        return f"{step.get('phase')} step of {t:.3g} s beats its roofline floor of {floor:.3g} s"
    for op in step.get("ops", []):
        u = op.get("utilisation", 0)
        if not (0 <= u <= 1.0001) or op.get("stall_cycles", 0) < 0 or not math.isfinite(op.get("time_s", 0)):
            return (
                f"op {op.get('name')}: utilisation {u!r}, stalls {op.get('stall_cycles')!r}, time {op.get('time_s')!r}"
            )
    return None


def json_plausible(name: str, kind: str, cores: int | None = None):
    """The JSON result of a finished run is physically plausible: finite positive times and
    rates, no step faster than its compute or HBM roof, utilisation within [0, 1]."""

    def check(folder: Path, outcome) -> str | None:
        if _refused(outcome) or outcome.rc != 0:
            return None
        path = folder / name
        if not path.is_file():
            return f"exit 0 but {name} was not written"
        data = json.loads(path.read_text())
        if kind == "op":
            return _finite_positive(data, ("time_s",))
        if kind == "serve":
            return _finite_positive(data, ("duration_s", "ttft_s.mean", "e2e_s.mean", "requests_per_s"))
        problem = _finite_positive(data, ("ttft_s", "total_time_s", "throughput_tokens_per_s"))
        if problem:
            return problem
        hw = data["config"]["hardware"]
        if cores is not None and hw["cores"]["count"] != cores:
            return f"cores.count resolved to {hw['cores']['count']}, not {cores}"
        flops_peak, bw_peak = _peaks(hw)
        chips = 1  # the busiest chip's share is what a step reports
        mem = data["memory"]
        if mem["weights_bytes"] + mem["kv_cache_bytes"] > mem["capacity_bytes"] * 1.0001:
            return "ran although weights and KV cache exceed HBM"
        return _step_floor(data["prefill"], flops_peak, bw_peak, chips) or _step_floor(
            data.get("decode"), flops_peak, bw_peak, chips
        )

    return check


def json_key(name: str, dotted: str, want):
    """A finished run's JSON holds `want` at the dotted key."""

    def check(folder: Path, outcome) -> str | None:
        if outcome.rc != 0:
            return None
        value = json.loads((folder / name).read_text())
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return None if value == want else f"{dotted} is {value!r}, not {want!r}"

    return check


def shows_literally(text: str):
    """A finished run shows `text` as it is (markup not applied, nothing stripped)."""
    want = "".join(text.split())

    def check(folder: Path, outcome) -> str | None:
        if outcome.rc != 0:
            return None
        got = "".join(outcome.text.split())
        return None if want in got else f"{text!r} does not appear as written"

    return check


def stays_unchanged(files: dict[str, str]):
    """Files the user had are there afterwards with the same content."""

    def check(folder: Path, outcome) -> str | None:
        for name, content in files.items():
            p = folder / name
            if not p.is_file():
                return f"{name} is gone"
            if p.read_text() != content:
                return f"{name} was overwritten"
        return None

    return check


def file_is(name: str, kind: str):
    """`name` is afterwards a FIFO, a folder, a regular file, or absent."""

    def check(folder: Path, outcome) -> str | None:
        p = folder / name
        if kind == "absent":
            return f"{name} exists" if os.path.lexists(p) else None
        if not os.path.lexists(p):
            return f"{name} is gone"
        mode = os.lstat(p).st_mode
        is_kind = {"fifo": stat.S_ISFIFO, "dir": stat.S_ISDIR, "file": stat.S_ISREG}[kind](mode)
        return None if is_kind else f"{name} is no longer a {kind}"

    return check


def written_mode(name: str, mode: int):
    """A finished run wrote `name` with permissions `mode` (the umask is 022)."""

    def check(folder: Path, outcome) -> str | None:
        if outcome.rc != 0:
            return None
        p = folder / name
        if not p.is_file():
            return f"{name} was not written"
        got = p.stat().st_mode & 0o777
        return None if got == mode else f"{name} has mode {got:04o}, not {mode:04o}"

    return check


def no_temp_files(under: str = "."):
    """No temporary or half-written files are left behind, whatever the exit."""

    def check(folder: Path, outcome) -> str | None:
        base = folder / under
        if not base.is_dir():
            return None
        for p in base.rglob("*"):
            if p.name == ".lock":
                continue
            if (p.name.startswith(".") and p.is_file()) or p.name.endswith(TEMP_NAMES):
                return f"left {p.relative_to(folder)}"
        return None

    return check


def parquet_rows(
    under: str,
    ok: int | None = None,
    failed: int | None = None,
    rows: int | None = None,
    at_least_rows: int | None = None,
    at_least_ok: int | None = None,
    total_from_summary: bool = False,
):
    """The rows a sweep recorded in `under`: counts by status (unless the spec was refused)."""

    def check(folder: Path, outcome) -> str | None:
        if _refused(outcome):
            return None
        import pyarrow.parquet as pq

        statuses = []
        for part in sorted((folder / under).glob("part-*.parquet")) + sorted(
            (folder / under).glob("points/part-*.parquet")
        ):
            statuses += pq.read_table(part, columns=["status"]).column("status").to_pylist()
        n_ok, n_failed = statuses.count("ok"), statuses.count("failed")
        if ok is not None and n_ok != ok:
            return f"{n_ok} ok rows, not {ok} ({len(statuses)} rows)"
        if failed is not None and n_failed != failed:
            return f"{n_failed} failed rows, not {failed}"
        if rows is not None and len(statuses) != rows:
            return f"{len(statuses)} rows, not {rows}"
        if at_least_rows is not None and len(statuses) < at_least_rows:
            return f"{len(statuses)} rows, fewer than {at_least_rows}"
        if at_least_ok is not None and n_ok < at_least_ok:
            return f"{n_ok} ok rows, fewer than {at_least_ok}"
        if total_from_summary:
            summary = json.loads((folder / under / "summary.json").read_text())
            samples = summary.get("samples", summary["points_total"])
            if summary["points_total"] != samples or len(statuses) != summary["points_total"]:
                return f"points_total {summary['points_total']}, rows {len(statuses)}, samples {samples}"
        return None

    return check
