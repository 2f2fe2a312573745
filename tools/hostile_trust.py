"""The inputs of `tools/hostile.py` on what archsim reads back and where it writes beyond its
input files: its caches (the op cache and the config memo, tampered with and replaced), its
standard streams (closed, on a full disk, a reader that left) and sweep results folders (a
manifest of another format, tampered values, a part of another sweep).

A tampered cache must never change a result: each cache case runs against a copy of a warm
cache that a separate `archsim` made, altered, and its `--json` must equal that run's to the
value (`same_result`), with no code run from the cache (`nothing_ran`). A stream case must still
write every file it was asked for and end with one line and exit 1 (`stream_end`). A store case
must refuse by name (exit 2), never rank what it cannot trust.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hostile import Case, Expect, Outcome, Prop, Verdict
from hostile_cases import ROOT, SMALL

CACHE_ENV = (("ARCHSIM_CACHE_DIR", "cache"),)  # relative to the case's folder, its working directory
MARKER = "code-ran"  # what a planted pickle would create, if it were ever loaded
REFERENCE_RUNS = {
    "run": ("run", "--quiet", *SMALL, "--json", "out.json"),
    "serve": ("serve", "--quiet", "--requests", "4", "--json", "out.json"),
}

# ------------------------------------------------------------------------------------ the references

_MADE: dict[str, Path] = {}


def reference(kind: str) -> Path:
    """A folder with `cache/` warmed by `archsim` (a process of its own, as a user's earlier run)
    and `out.json`, what it printed: made once per harness run."""
    if kind not in _MADE:
        d = Path(tempfile.mkdtemp(prefix=f"archsim-hostile-cache-{kind}-"))
        env = {**os.environ, "ARCHSIM_CACHE_DIR": str(d / "cache"), "PYTHONPATH": str(ROOT)}
        argv = [sys.executable, "-m", "archsim", *REFERENCE_RUNS[kind]]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=d, env=env, timeout=300)
        assert done.returncode == 0, f"the reference {kind} must run: {done.stderr[-500:]}"
        _MADE[kind] = d
    return _MADE[kind]


def _cold_main(memo: bool):
    """archsim's main as a new process has it: no result memoised in this one (the harness's
    warm-up ran the same commands) and no cache file opened; the config memo on as the console
    script has it when `memo`."""

    def main(argv: list[str]) -> int:
        from archsim import opcache
        from archsim.cli import main as archsim_main
        from archsim.config import memo as config_memo
        from archsim.memo import clear_all

        clear_all()
        opcache._open.cache_clear()
        opcache._refused.clear()
        if memo:
            config_memo.for_command_line()
        return archsim_main(argv)

    return main


def _untouched_main(argv: list[str]) -> int:
    """`_cold_main` with every op's simulation refused: an intact cache must hold them all."""
    from archsim.runner import generation

    def simulated(op, chip, *args):
        raise AssertionError(f"simulated {op.name}: the intact cache was not read")

    generation.time_op = simulated
    return _cold_main(True)(argv)


# ----------------------------------------------------------------------------------------- checks


def same_result(kind: str):
    """The run's `--json` equals what the reference run printed, to every value."""

    def check(folder: Path, outcome: Outcome) -> str | None:
        if outcome.rc != 0:
            return None
        got = folder / "out.json"
        if not got.is_file():
            return "out.json was not written"
        want = json.loads((reference(kind) / "out.json").read_text())
        have = json.loads(got.read_text())
        if have == want:
            return None
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        return f"the result differs from the untampered run's in {', '.join(diff[:5])}"

    return check


def nothing_ran(folder: Path, outcome: Outcome) -> str | None:
    return f"{MARKER} exists: code planted in the cache ran" if (folder / MARKER).exists() else None


def stream_end(mode: str, files: tuple[str, ...]):
    """Every file asked for is written whole; the run ends with exit 1 and, where stderr is open,
    one line saying what became of stdout (its last line)."""

    def check(folder: Path, outcome: Outcome) -> str | None:
        if outcome.rc != 1:
            return f"exit {outcome.rc}, not 1"
        for name in files:
            p = folder / name
            if not p.is_file() or p.stat().st_size == 0:
                return f"{name} was not written"
            if name.endswith(".json"):
                json.loads(p.read_text())
        lines = outcome.err.strip().splitlines()
        if mode == "both-closed":
            return None if not lines else f"wrote to a closed stderr: {lines[-1][:120]!r}"
        errors = [line for line in lines if line.startswith("archsim: error")]
        if len(errors) != 1 or not lines[-1].startswith("archsim: error: stdout"):
            return f"does not end with one line about stdout: {lines[-3:]!r}"
        return None

    return check


# ------------------------------------------------------------------------------------------ caches

T = {
    name: i
    for i, name in enumerate(
        (
            "cycles",
            "time_s",
            "compute_cycles",
            "stall_cycles",
            "overhead_cycles",
            "busy_core_cycles",
            "core_cycles",
            "hbm_bytes",
            "l2_bytes",
            "flops",
            "min_bytes",
            "kernels",
            "active_cores",
            "bound",
            "clock_hz",
            "energy_j",
        )
    )
}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_lines(path: Path, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))  # NaN and Infinity as Python writes them


def _chip_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/chip-*.jsonl"))


def _is_timing(v) -> bool:
    return isinstance(v, list) and len(v) == 3 and isinstance(v[0], list) and len(v[0]) == len(T)


def _is_tilings(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(t, list) and len(t) == 7 for t in v)


def _each_entry(files, pick, change):
    """A setup changing, in every file `files(cache)` gives, each entry's value that `pick` selects."""

    def make(folder: Path) -> None:
        for path in files(folder / "cache"):
            entries = _lines(path)
            for e in entries:
                if pick(e["v"]):
                    change(e["v"])
            _write_lines(path, entries)

    return make


def _timing(field: str, value):
    def change(v):
        v[0][T[field]] = value(v[0][T[field]]) if callable(value) else value

    return _each_entry(_chip_files, _is_timing, change)


def _energy(index: int, value):
    def change(v):
        v[1][index] = value

    return _each_entry(_chip_files, _is_timing, change)


def _power(value):
    def change(v):
        v[2] = value

    return _each_entry(_chip_files, _is_timing, change)


def _tilings(change):
    return _each_entry(_chip_files, _is_tilings, change)


def _system_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.glob("*/*.jsonl") if not p.name.startswith("chip-"))


def _system_value(value):
    def make(folder: Path) -> None:
        for path in _system_files(folder / "cache"):
            entries = _lines(path)
            for e in entries:
                e["v"] = value
            _write_lines(path, entries)

    return make


def _each_file(files, replace_with):
    """A setup replacing every file `files(cache)` gives by what `replace_with(path)` makes."""

    def make(folder: Path) -> None:
        for path in files(folder / "cache"):
            path.unlink()
            replace_with(path)

    return make


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(target: str):
    return lambda path: os.symlink(target, path)


def _sparse(size: int):
    def make(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)

    return make


def _bytes(data: bytes):
    return lambda path: path.write_bytes(data)


def _clashing(path: Path) -> None:
    """Every line given again with another value: which is right cannot be told."""
    entries = _lines(path.with_suffix(".orig"))
    for e in list(entries):
        v = json.loads(json.dumps(e["v"]))
        if _is_timing(v):
            v[2] = v[2] * 2 + 1
        elif isinstance(v, (int, float)):
            v = v * 3 + 1
        entries.append({"k": e["k"], "v": v})
    _write_lines(path, entries)


def _with_orig(files, make):
    def setup(folder: Path) -> None:
        for path in files(folder / "cache"):
            os.replace(path, path.with_suffix(".orig"))
            make(path)
            path.with_suffix(".orig").unlink()

    return setup


def _memo_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/validated/*.json"))


def _memo_doc(change, kind: str | None = None):
    def make(folder: Path) -> None:
        for path in _memo_files(folder / "cache"):
            doc = json.loads(path.read_text())
            if kind is None or doc.get("kind") == kind:
                change(doc)
                path.write_text(json.dumps(doc))

    return make


class _Planted:
    """A pickle that, loaded, would create MARKER in the working directory."""

    def __reduce__(self):
        return (open, (MARKER, "w"))


def _plant_pickles(folder: Path) -> None:
    payload = pickle.dumps(_Planted())
    for path in _memo_files(folder / "cache"):
        path.with_suffix(".pickle").write_bytes(payload)  # the name entries had when they were pickles
        path.write_bytes(payload)


def _chmod(which: str, mode: int):
    def make(folder: Path) -> None:
        cache = folder / "cache"
        target = {"root": cache, "version": next(cache.glob("*/")), "memo": next(cache.glob("*/validated"))}[which]
        os.chmod(target, mode)

    return make


def _copy_cache(kind: str):
    def make(folder: Path) -> None:
        shutil.copytree(reference(kind) / "cache", folder / "cache", symlinks=True)

    return make


def _then(*setups):
    def make(folder: Path) -> None:
        for s in setups:
            s(folder)

    return make


def _set(key, value):
    return lambda d: d.update({key: value})


def _record(*path_and_value):
    *path, key, value = path_and_value

    def change(d):
        node = d["record"]
        for p in path:
            node = node[p]
        node[key] = value

    return change


def _drop(*path):
    def change(d):
        node = d["record"]
        for p in path[:-1]:
            node = node[p]
        node.pop(path[-1])

    return change


NAN, INF = float("nan"), float("inf")

OP_CACHE = {
    # each op's timing: a field out of range, of another type, or no longer consistent with the chip
    "time-negative": _timing("time_s", -1e-6),
    "time-nan": _timing("time_s", NAN),
    "time-inf": _timing("time_s", INF),
    "time-zero": _timing("time_s", 0.0),
    "time-text": _timing("time_s", "1e-6"),
    "time-null": _timing("time_s", None),
    "time-halved": _timing("time_s", lambda t: t / 2),  # no longer its cycles at the chip's clock
    "cycles-negative": _timing("cycles", -5),
    "cycles-float": _timing("cycles", 10.5),
    "cycles-bool": _timing("cycles", True),
    "cycles-huge": _timing("cycles", 10**40),
    "compute-past-cycles": _timing("compute_cycles", 10**15),
    "stall-negative": _timing("stall_cycles", -1),
    "overhead-negative": _timing("overhead_cycles", -1),
    "busy-past-cores": _timing("busy_core_cycles", 1e30),
    "hbm-bytes-negative": _timing("hbm_bytes", -4096.0),
    "hbm-bytes-nan": _timing("hbm_bytes", NAN),
    "flops-negative": _timing("flops", -1.0),
    "kernels-negative": _timing("kernels", -1),
    "active-cores-too-many": _timing("active_cores", 10**6),
    "bound-unknown": _timing("bound", "vibes"),
    "bound-not-largest": _timing("bound", "overhead"),
    "clock-zero": _timing("clock_hz", 0.0),
    "clock-negative": _timing("clock_hz", -1.98e9),
    "clock-above-chip": _timing("clock_hz", 1e12),
    "energy-total-off": _timing("energy_j", lambda e: e * 2 + 1),
    "energy-part-negative": _energy(4, -1.0),
    "energy-part-nan": _energy(0, NAN),
    "energy-part-huge": _energy(6, 1e300),  # the parts no longer add up to the timing's energy
    "power-negative": _power(-700.0),
    "power-inf": _power(INF),
    "power-text": _power("700 W"),
    "timing-short": _each_entry(_chip_files, _is_timing, lambda v: v[0].pop()),
    "timing-not-a-list": _each_entry(_chip_files, _is_timing, lambda v: v.__setitem__(0, {"a": 1})),
    # a GEMM's tilings: not ones the compiler forms for the op on the chip
    "tiling-too-big": _tilings(lambda v: [t.__setitem__(slice(0, 3), [512, 512, 512]) for t in v]),
    "tiling-odd-edge": _tilings(lambda v: v[0].__setitem__(1, 100)),
    "tiling-zero-edge": _tilings(lambda v: v[0].__setitem__(0, 0)),
    "tiling-negative-edge": _tilings(lambda v: v[0].__setitem__(2, -64)),
    "tiling-float-edge": _tilings(lambda v: v[0].__setitem__(0, 64.5)),
    "tiling-split-odd": _tilings(lambda v: v[0].__setitem__(slice(3, 5), ["split-k", 5])),
    "tiling-mapping-unknown": _tilings(lambda v: v[0].__setitem__(3, "magic")),
    "tiling-raster-unknown": _tilings(lambda v: v[0].__setitem__(5, "spiral")),
    "tiling-group-huge": _tilings(lambda v: v[0].__setitem__(slice(5, 7), ["grouped", 10**6])),
    "tiling-twice": _tilings(lambda v: v.append(list(v[0]))),
    "tiling-empty": _tilings(lambda v: v.clear()),
    # whole files replaced: the entries' file must be regular, of bounded size, and not blocking
    "file-fifo": _each_file(_chip_files, _fifo),
    "file-link-dev-zero": _each_file(_chip_files, _link("/dev/zero")),
    "file-link-urandom": _each_file(_chip_files, _link("/dev/urandom")),
    "file-link-elsewhere": _each_file(_chip_files, _link("/etc/hostname")),
    "file-dangling-link": _each_file(_chip_files, _link("/nonexistent/archsim")),
    "file-huge-sparse": _each_file(_chip_files, _sparse(1 << 40)),
    "file-binary": _each_file(_chip_files, _bytes(os.urandom(4096))),
    "file-empty": _each_file(_chip_files, _bytes(b"")),
    "file-directory": _each_file(_chip_files, lambda p: p.mkdir()),
    "file-nan-lines": _each_file(_chip_files, _bytes(b'{"k": "x", "v": NaN}\n' * 100)),
    "file-deep-json": _each_file(_chip_files, _bytes(b'{"k": "x", "v": ' + b"[" * 100000 + b"\n")),
    "file-clashing-lines": _with_orig(_chip_files, _clashing),
    # the cache folders: writable by others, so anything in them may have been planted
}

SERVE_CACHE = {  # the serving step model's parts: a time of a list of ops on a system
    "part-negative": _system_value(-1.0),
    "part-nan": _system_value(NAN),
    "part-inf": _system_value(INF),
    "part-text": _system_value("0.001"),
    "part-bool": _system_value(True),
    "part-list": _system_value([0.001]),
    "part-fifo": _each_file(_system_files, _fifo),
    "part-clashing-lines": _with_orig(_system_files, _clashing),
}

MEMO = {
    "pickle-planted": _plant_pickles,
    "format-other": _memo_doc(_set("format", 2)),
    "format-bool": _memo_doc(_set("format", True)),
    "key-other": _memo_doc(_set("key", "0" * 32)),
    "kind-other": _memo_doc(_set("kind", "workload"), "hardware"),
    "source-other": _memo_doc(_set("source", "/elsewhere/h200.yaml")),
    "record-source-other": _memo_doc(_record("source", "/elsewhere/h200.yaml")),
    "clock-text": _memo_doc(_record("chip", "clock_hz", "fast"), "hardware"),
    "clock-zero-text": _memo_doc(_record("chip", "clock_hz", "0"), "hardware"),
    "clock-bool": _memo_doc(_record("chip", "clock_hz", True), "hardware"),
    "cores-float": _memo_doc(_record("chip", "cores", 132.5), "hardware"),
    "cores-other": _memo_doc(_record("chip", "cores", 8), "hardware"),
    "chip-name-other": _memo_doc(_record("chip", "name", "NVIDIA A100"), "hardware"),
    "chips-other": _memo_doc(_record("chips", 64), "hardware"),
    "field-missing": _memo_doc(_drop("chip", "clock_hz"), "hardware"),
    "field-extra": _memo_doc(_record("chip", "turbo", 2), "hardware"),
    "enum-unknown": _memo_doc(_record("chip", "core", "array", "dataflow", "xs"), "hardware"),
    "subclass-os-system": _memo_doc(_record("chip", "@", "os:system"), "hardware"),
    "subclass-foreign": _memo_doc(_record("chip", "@", "subprocess:Popen"), "hardware"),
    "subclass-not-derived": _memo_doc(_record("chip", "@", "archsim.hardware.chip:Hbm"), "hardware"),
    "model-layers-other": _memo_doc(_record("model", "layers", 1), "workload"),
    "model-name-other": _memo_doc(_record("model", "name", "GPT-5"), "workload"),
    "scenario-other": _memo_doc(_record("scenario", "batch", 64), "workload"),
    "dtype-unknown": _memo_doc(_record("dtypes", "weights", "fp3"), "workload"),
    "record-list": _memo_doc(_set("record", [1, 2])),
    "config-list": _memo_doc(_set("config", [])),
    "entry-fifo": _each_file(_memo_files, _fifo),
    "entry-link-dev-zero": _each_file(_memo_files, _link("/dev/zero")),
    "entry-huge-sparse": _each_file(_memo_files, _sparse(1 << 40)),
    "entry-binary": _each_file(_memo_files, _bytes(b"\x80\x04\x95" + os.urandom(64))),
    "entry-nan": _each_file(_memo_files, _bytes(b"NaN")),
    "entry-directory": _each_file(_memo_files, lambda p: p.mkdir()),
}

# the cache folders writable by others, so anything in them may have been planted: refused by
# name (exit 2, the folder and the fix), never read
FOLDERS = {
    "op-folder-root-world-writable": ("run", _chmod("root", 0o777)),
    "op-folder-root-group-writable": ("run", _chmod("root", 0o770)),
    "op-folder-version-world-writable": ("run", _chmod("version", 0o777)),
    "op-folder-root-sticky-world": ("run", _chmod("root", 0o1777)),
    "memo-folder-memo-world-writable": ("run", _chmod("memo", 0o777)),
    "serve-folder-root-world-writable": ("serve", _chmod("root", 0o777)),
}


def cache_cases(full: bool) -> list[Case]:
    """The op cache and the config memo, copied from a warm run and tampered with: the run must
    give the untampered run's result, in time, running nothing from the cache."""
    props = (
        Prop("same result as untampered", same_result("run")),
        Prop("no code run", nothing_ran, Verdict.SECURITY),
    )
    out = [
        Case(
            "cache/intact-is-read",
            REFERENCE_RUNS["run"],
            setup=_copy_cache("run"),
            env=CACHE_ENV,
            expect=Expect.RUN,
            props=props,
            target=_untouched_main,
        )
    ]
    for group, table, kind in (("op", OP_CACHE, "run"), ("memo", MEMO, "run"), ("serve", SERVE_CACHE, "serve")):
        for name, tamper in table.items():
            out.append(
                Case(
                    f"cache/{group}-{name}",
                    REFERENCE_RUNS[kind],
                    setup=_then(_copy_cache(kind), tamper),
                    env=CACHE_ENV,
                    expect=Expect.RUN,
                    props=(Prop("same result as untampered", same_result(kind)), props[1]),
                    target=_cold_main(memo=group == "memo" or kind == "run"),
                    timeout_s=20,
                )
            )
    for name, (kind, tamper) in FOLDERS.items():
        out.append(
            Case(
                f"cache/{name}",
                REFERENCE_RUNS[kind],
                setup=_then(_copy_cache(kind), tamper),
                env=CACHE_ENV,
                expect=Expect.REFUSE,
                where="cache",
                props=(props[1],),
                target=_cold_main(memo=True),
                timeout_s=20,
            )
        )
    return out


# ----------------------------------------------------------------------------------------- streams


def _stream_main(mode: str):
    """archsim's main as the console script runs it with stdout (and stderr) in `mode`: closed
    before the start, on a full disk, a pipe whose reader has left, or both streams closed."""

    def main(argv: list[str]) -> int:
        from archsim import cli

        if mode in ("closed", "both-closed"):
            os.close(1)
            sys.stdout = None  # as the interpreter starts with descriptor 1 closed
            if mode == "both-closed":
                os.close(2)
                sys.stderr = None
            cli._standard_fds_open()
        else:
            if mode == "full":
                fd = os.open("/dev/full", os.O_WRONLY)
            else:
                read, fd = os.pipe()
                os.close(read)  # the reader left before the first line
            os.dup2(fd, 1)
            os.close(fd)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (block-buffered, as to a file)
        code = cli.main(argv)
        if sys.stdout is not None:
            try:
                sys.stdout.flush()
            except (OSError, ValueError):  # what cli.exit_now does with it
                code = code or 1
        return code

    return main


STREAM_MODES = ("closed", "full", "pipe", "both-closed")


def stream_cases(full: bool) -> list[Case]:
    """Every command whose stdout is closed, full or left by its reader: its files written, one
    line at the end, exit 1."""
    from hostile_cases import _prior_sweep, case_file, small_cases, spec
    from hostile_props import parquet_rows

    commands: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {  # argv, files, in CI
        "run-table": (("run", *SMALL, "--json", "o.json", "--csv", "o.csv", "--trace-out", "t.json"), ("o.json", "o.csv", "t.json"), True),
        "run-quiet": (("run", "--quiet", *SMALL, "--json", "o.json"), ("o.json",), True),
        "run-format-json": (("run", *SMALL, "--format", "json", "--json", "o.json"), ("o.json",), True),
        "run-format-csv": (("run", *SMALL, "--format", "csv", "--csv", "o.csv"), ("o.csv",), True),
        "op-gemm": (("op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--json", "o.json", "--trace-out", "t.json"), ("o.json", "t.json"), True),
        "serve": (("serve", "--requests", "4", "--json", "o.json", "--trace-out", "t.json"), ("o.json", "t.json"), True),
        "serve-format-json": (("serve", "--requests", "4", "--format", "json", "--json", "o.json"), ("o.json",), False),
        "list": (("list",), (), True),
        "list-format-json": (("list", "--format", "json"), (), False),
        "validate": (("validate", "c.json", "--json", "o.json"), ("o.json",), True),
        "compare": (("compare", "h200", "a100", *SMALL, "--json", "o.json"), ("o.json",), False),
        "pareto": (("pareto", "out", "--maximize", "tpot_ms", "--minimize", "clock", "--no-plot", "--json", "o.json"), ("o.json",), True),
        "sweep": (("sweep", "s.yaml", "--out", "swept", "--workers", "1"), ("swept/summary.json",), False),
        "help": (("run", "--help"), (), True),
    }  # fmt: skip
    out = []
    for name, (argv, files, in_ci) in commands.items():
        for mode in STREAM_MODES:
            props = [Prop("files written, one line, exit 1", stream_end(mode, files), Verdict.DATA)]
            if name == "sweep":
                props.append(Prop("rows recorded", parquet_rows("swept", at_least_ok=1), Verdict.DATA))
            out.append(
                Case(
                    f"streams/{name}-{mode}",
                    argv,
                    files=(("c.json", case_file(small_cases()[0])), ("s.yaml", spec())),
                    setup=_prior_sweep() if name == "pareto" else None,
                    expect=Expect.EITHER,
                    failed_ok=True,
                    props=tuple(props),
                    target=_stream_main(mode),
                    timeout_s=60 if name in ("sweep", "compare") else 30,
                    ci=in_ci or mode == "closed",
                )
            )
    return out


# ------------------------------------------------------------------------------------------ stores

STORE_VARIANTS = r"""
import json, shutil, sys
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq

src, root = Path(sys.argv[1]), Path(sys.argv[2])


def copy(name):
    d = root / name / "out"
    shutil.copytree(src, d)
    return d


def manifest(name, change):
    d = copy(name)
    doc = json.loads((d / "sweep.json").read_text())
    change(doc)
    (d / "sweep.json").write_text(json.dumps(doc))


def rows(name, change, metadata=True):
    d = copy(name)
    for part in sorted((d / "points").glob("part-*.parquet")):
        t = pq.read_table(part)
        data = t.to_pylist()
        change(data)
        new = pa.Table.from_pylist(data, schema=t.schema)
        if not metadata:
            new = new.replace_schema_metadata(None)
        pq.write_table(new, part)


def put(key, value):
    return lambda doc: doc.__setitem__(key, value)


def drop(key):
    return lambda doc: doc.pop(key)


def settings(key, value):
    return lambda doc: doc["settings"].__setitem__(key, value)


def first(column, value):
    def change(data):
        data[0][column] = value
    return change


for name, change in {
    "format-3": put("format", 3), "format-0": put("format", 0), "format-negative": put("format", -1),
    "format-text": put("format", "1"), "format-true": put("format", True), "format-null": put("format", None),
    "format-missing": drop("format"), "format-float": put("format", 1.0), "format-huge": put("format", 10**30),
    "format-long-text": put("format", "x" * 10000),
    "settings-missing": drop("settings"), "settings-list": put("settings", []),
    "columns-missing": lambda d: d["settings"].pop("columns"), "columns-text": settings("columns", "clock"),
    "columns-short": settings("columns", [["clock", "float"]]),
    "columns-type-unknown": settings("columns", [["clock", "complex", "parameter"], ["tpot_ms", "float", "objective"]]),
    "columns-name-number": settings("columns", [[1, "float", "parameter"], ["tpot_ms", "float", "objective"]]),
    "columns-other": settings("columns", [["cores", "int", "parameter"], ["tpot_ms", "float", "objective"]]),
}.items():
    manifest(name, change)

for name, change in {
    "objective-nan": first("tpot_ms", float("nan")), "objective-inf": first("tpot_ms", float("inf")),
    "objective-minus-inf": first("tpot_ms", float("-inf")), "objective-null": first("tpot_ms", None),
    "parameter-nan": first("clock", float("nan")), "parameter-null": first("clock", None),
    "hash-short": first("config_hash", "abc"), "hash-empty": first("config_hash", ""),
    "hash-upper": first("config_hash", "ABCDEF0123456789"), "hash-escape": first("config_hash", "\x1b[2J0123456789ab"),
    "hash-long": first("config_hash", "0" * 17), "status-unknown": first("status", "great"),
    "status-empty": first("status", ""),
    "row-twice": lambda data: data.append(dict(data[0])),
}.items():
    rows(name, change)

rows("settings-digest-other", lambda data: None)
for part in (root / "settings-digest-other" / "out" / "points").glob("part-*.parquet"):
    t = pq.read_table(part)
    pq.write_table(t.replace_schema_metadata({b"archsim.settings": b"0123456789abcdef"}), part)
rows("settings-digest-garbage", lambda data: None)
for part in (root / "settings-digest-garbage" / "out" / "points").glob("part-*.parquet"):
    t = pq.read_table(part)
    pq.write_table(t.replace_schema_metadata({b"archsim.settings": b"\xff\x00" * 1000}), part)
rows("legacy-part-no-digest", lambda data: None, metadata=False)
"""

_VARIANTS: list[Path] = []


def store_variants() -> Path:
    """Copies of the prior sweep's folder, each altered one way (written by a separate Python
    with pyarrow, which stays out of the harness process that forks the cases)."""
    if not _VARIANTS:
        from hostile_cases import _prior_sweep_dir

        root = Path(tempfile.mkdtemp(prefix="archsim-hostile-stores-"))
        done = subprocess.run(
            [sys.executable, "-c", STORE_VARIANTS, str(_prior_sweep_dir()), str(root)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"the store variants must be made: {done.stderr[-800:]}"
        _VARIANTS.append(root)
    return _VARIANTS[0]


def _variant(name: str):
    def make(folder: Path) -> None:
        shutil.copytree(store_variants() / name / "out", folder / "out")

    return make


STORE_REFUSED = (
    *(f"format-{v}" for v in ("3", "0", "negative", "text", "true", "null", "missing", "float", "huge", "long-text")),
    "settings-missing",
    "settings-list",
    "columns-missing",
    "columns-text",
    "columns-short",
    "columns-type-unknown",
    "columns-name-number",
    "columns-other",
    "objective-nan",
    "objective-inf",
    "objective-minus-inf",
    "objective-null",
    "parameter-nan",
    "parameter-null",
    "hash-short",
    "hash-empty",
    "hash-upper",
    "hash-escape",
    "hash-long",
    "status-unknown",
    "status-empty",
    "row-twice",
    "settings-digest-other",
    "settings-digest-garbage",
)


def store_trust_cases(full: bool) -> list[Case]:
    """`pareto` on a results folder it cannot trust refuses it by name; a sweep resumed into it
    refuses it or records its points, never ends in an internal error."""
    from hostile_cases import spec

    pareto = ("pareto", "out", "--maximize", "tpot_ms", "--minimize", "clock", "--no-plot")
    out = [
        Case(
            "store/pareto-legacy-part-no-digest",
            pareto,
            setup=_variant("legacy-part-no-digest"),
            expect=Expect.RUN,
            timeout_s=20,
        )
    ]
    for name in STORE_REFUSED:
        out.append(Case(f"store/pareto-{name}", pareto, setup=_variant(name), expect=Expect.REFUSE, where="out"))
        out.append(
            Case(
                f"store/resume-{name}",
                ("sweep", "s.yaml", "--out", "out", "--workers", "1", "--quiet"),
                files=(("s.yaml", spec()),),
                setup=_variant(name),
                expect=Expect.EITHER,
                where="out",
                timeout_s=40,
            )
        )
    return out


__all__ = ["cache_cases", "store_trust_cases", "stream_cases"]
