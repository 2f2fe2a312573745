"""A sweep's results folder: Parquet parts written atomically, a manifest, a summary, a lock.

The parts are the record: a point is done when a part holding its `config_hash` exists. Parts
live in `points/` and nothing else does, so the folder reads as one dataset with standard
tools (`pandas.read_parquet(DIR / "points")`, `pyarrow.dataset.dataset(DIR / "points")`; their
temporary files start with a dot, which both skip). A part
is written to a temporary file, flushed to disk and renamed into place, so it either exists
whole or not at all, whenever the process dies; a rerun reads the hashes of the parts and
runs only the rest, so every point is recorded exactly once. A part is named by the hash of
the points in it. `sweep.json` holds the settings that decide a row besides the configuration
(KV stride, columns, constraints, objectives): a folder holds results of one setting only.
`summary.json` is rewritten after every part. One writer at a time: `.lock` (flock, released by
the kernel when the holder dies, even by SIGKILL).

A folder that holds anything `archsim sweep` did not write (a file of the user's, another
tool's output) is refused, never written into: only the files named here, and the plots of
`archsim pareto`, may be in it. Only this module's own temporary files are ever deleted. A
manifest, summary or part that cannot be read is reported by name, not as an internal error.

Nothing read is trusted: a manifest of a format other than FORMAT is refused; each part records
the digest of its sweep's settings (Parquet metadata), and a part of other settings than the
manifest's (copied in from another sweep) is refused, so rows of two specs are never ranked
together; every value is checked on read (`check_rows`): a config_hash of 16 hex digits, once in
the folder; a status of the three; the columns of the manifest, typed as it says; an ok row's
numbers finite (a point whose objective is not finite is recorded as failed).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from collections import Counter
from functools import cached_property
from pathlib import Path

from archsim.errors import ConfigError
from archsim.report.export import write_text

POINTS = "points"  # the folder of the parts
PART_GLOB = f"{POINTS}/part-*.parquet"  # relative to the results folder
LEGACY_PART_GLOB = "part-*.parquet"  # parts of folders written before `points/`
MANIFEST = "sweep.json"
SUMMARY = "summary.json"
LOCK = ".lock"
ARROW_TYPES = {"int": "int64", "float": "float64", "str": "string", "bool": "bool_"}
OURS = re.compile(r"^(sweep\.json|summary\.json|\.lock|points|part-[0-9a-f]{16}\.parquet|pareto_.*\.png)$")
OUR_PART = re.compile(r"^part-[0-9a-f]{16}\.parquet$")
OUR_TEMP = re.compile(r"^\.part-[0-9a-f]{16}\.parquet\.\d+\.tmp$")  # a part being written (write_part)
TEXT_TEMP = re.compile(r"^\.(summary|sweep)\.json\.[0-9a-f]+\.tmp$")  # export.write_text's temporary files
FORMAT = 2  # of the manifest and the parts: a folder of another format is refused
READABLE = (1, 2)  # formats `read_results` reads (1: rows before they recorded their fidelity, all full)
FIDELITIES = ("full", "screen")  # archsim/choose/fidelity.py
SETTINGS_KEY = b"archsim.settings"  # Parquet metadata: the digest of the settings a part was run under
HASH = re.compile(r"^[0-9a-f]{16}$")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
STATUSES = ("ok", "infeasible", "failed")
PYARROW_MISSING = "sweeps write Parquet and need pyarrow: python3 -m pip install pyarrow"


class StoreError(ConfigError):
    """The results folder cannot be used as asked (another sweep in it, another writer)."""


def check_pyarrow() -> None:
    """StoreError saying how to install pyarrow where it is not installed; nothing imported (a
    sweep imports it when it first reads or writes a part, after its workers have their first
    points)."""
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:
        raise StoreError(PYARROW_MISSING)


def require_pyarrow():
    """pyarrow, or StoreError saying how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise StoreError(PYARROW_MISSING) from None
    return pyarrow


def settings_digest(settings: dict) -> str:
    """The digest of a sweep's settings (what a part records of the sweep it belongs to)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def arrow_schema(columns: list[tuple[str, str, str]], settings: dict | None = None, fidelity: bool = True):
    """The schema of a part: the fixed columns (`fidelity` after the error, but in format 1), then
    `columns`; with the digest of `settings`."""
    pa = require_pyarrow()
    fields = [
        pa.field("config_hash", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
    ]
    if fidelity:
        fields.append(pa.field("fidelity", pa.string(), nullable=False))
    fields += [pa.field(name, getattr(pa, ARROW_TYPES[kind])()) for name, kind, _ in columns]
    return pa.schema(fields, metadata=None if settings is None else {SETTINGS_KEY: settings_digest(settings)})


FLOAT_EXACT_INT = 2**53  # whole numbers a float64 column holds exactly (pyarrow refuses the others)


def table_of(rows: list[dict], schema):
    """The Arrow table of `rows` (dicts by column name, a missing key a null), as
    `pyarrow.Table.from_pylist` makes it, without pyarrow's first conversion from Python objects
    importing pandas (0.17 s of CPU, a thirtieth of a 288-point sweep on two cores): each column
    laid out in Arrow's buffers directly where its values are of its type (a str, a bool, a whole
    number, or a float or a whole number that float64 holds exactly, or None); any other value
    leaves the table to pyarrow, so what it refuses is refused as before."""
    pa = require_pyarrow()
    columns = []
    for name, kind in zip(schema.names, schema.types, strict=True):
        column = _column(pa, kind, [r.get(name) for r in rows])
        if column is None:
            return pa.Table.from_pylist(rows, schema=schema)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _column(pa, kind, values: list):
    """An Arrow array of `values` (of `kind`: string, bool, int64 or float64), or None where a
    value is not of that type as `table_of` takes it."""
    import numpy as np

    n = len(values)
    valid = np.array([v is not None for v in values], dtype=bool)
    buffers = [pa.py_buffer(np.packbits(valid, bitorder="little"))]
    present = [v for v in values if v is not None]
    if kind == pa.string():
        if not all(type(v) is str for v in present):
            return None
        data = [b"" if v is None else v.encode("utf-8") for v in values]
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(d) for d in data], out=offsets[1:])
        buffers += [pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    elif kind == pa.bool_():
        if not all(type(v) is bool for v in present):
            return None
        buffers.append(pa.py_buffer(np.packbits(np.array([v is True for v in values], dtype=bool), bitorder="little")))
    elif kind == pa.int64():
        if not all(type(v) is int and INT64_MIN <= v <= INT64_MAX for v in present):
            return None
        buffers.append(pa.py_buffer(np.array([v or 0 for v in values], dtype=np.int64)))
    elif kind == pa.float64():
        exact = (float,) if any(type(v) is int and abs(v) > FLOAT_EXACT_INT for v in present) else (float, int)
        if not all(type(v) in exact for v in present):
            return None
        buffers.append(pa.py_buffer(np.array([0.0 if v is None else v for v in values], dtype=np.float64)))
    else:
        return None
    return pa.Array.from_buffers(kind, n, buffers, null_count=n - len(present))


def part_name(hashes: list[str]) -> str:
    return "part-" + hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:16] + ".parquet"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a platform without directory handles
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ResultStore:
    """The results folder of one sweep setting, held (locked) while it is open."""

    def __init__(self, out_dir: str | Path, settings: dict, columns: list[tuple[str, str, str]]):
        self.dir = Path(out_dir)
        self.settings = settings
        self.columns = columns
        self._lock_fd: int | None = None

    @cached_property
    def schema(self):
        """The parts' Arrow schema (pyarrow imported when a part is first written)."""
        return arrow_schema(self.columns, self.settings)

    def open(self) -> ResultStore:
        """Create or reopen the folder: lock it, check its settings, drop half-written parts."""
        if os.path.lexists(self.dir) and not self.dir.is_dir():
            raise StoreError(f"{self.dir} is a file, not a folder: give --out a new or empty folder")
        self.dir.mkdir(parents=True, exist_ok=True)
        foreign = foreign_files(self.dir)
        if foreign:
            raise StoreError(
                f"{self.dir} holds files archsim sweep did not write ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}): give --out a new or empty folder"
            )
        self._lock()
        manifest = self.dir / MANIFEST
        if manifest.exists():
            held = read_manifest(self.dir).get("settings")
            if held != self.settings:
                self.close()
                raise StoreError(
                    f"{self.dir} holds results of a sweep with other settings "
                    f"({_difference(held, self.settings)}): use another --out"
                )
        else:
            write_text(manifest, _json({"format": FORMAT, "settings": self.settings}))
        self.points.mkdir(exist_ok=True)
        for legacy in self.dir.glob(LEGACY_PART_GLOB):
            os.replace(legacy, self.points / legacy.name)
        for folder in (self.dir, self.points):
            for stale in folder.iterdir():
                if (OUR_TEMP.match(stale.name) or TEXT_TEMP.match(stale.name)) and stale.is_file():
                    stale.unlink(missing_ok=True)
        return self

    @property
    def points(self) -> Path:
        return self.dir / POINTS

    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"another sweep is writing to {self.dir}") from None
        self._lock_fd = fd

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> ResultStore:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def done(self) -> dict[str, str]:
        """config_hash -> status of every recorded point."""
        return {h: status for h, (status, _) in self.recorded().items()}

    def recorded(self) -> dict[str, tuple[str, str]]:
        """config_hash -> (status, fidelity) of every recorded point."""
        hashes: list = []
        statuses: list = []
        fidelities: list = []
        for part in parts(self.dir.glob(PART_GLOB)):
            table = _read_part(part, columns=["config_hash", "status", "fidelity"])
            hashes += table.column("config_hash").to_pylist()
            statuses += table.column("status").to_pylist()
            fidelities += table.column("fidelity").to_pylist()
        check_keys(hashes, statuses, self.dir)
        bad = next((f for f in fidelities if f not in FIDELITIES), None)
        if bad is not None:
            raise _tampered(self.dir, "fidelity", bad)
        return dict(zip(hashes, zip(statuses, fidelities, strict=True), strict=True))

    def replace_rows(self, rows: list[dict]) -> None:
        """Put `rows` in place of the recorded rows of their points (a point re-run at full
        fidelity): each part holding one is rewritten whole, atomically, under its own name (it
        holds the same points)."""
        new = {r["config_hash"]: r for r in rows}
        for part in parts(self.dir.glob(PART_GLOB)):
            held = _read_part(part, columns=["config_hash", "status"]).column("config_hash").to_pylist()
            if new.keys() & set(held):
                old = _read_part(part).cast(self.schema).to_pylist()
                self.write_part([new.get(r["config_hash"], r) for r in old])

    def write_part(self, rows: list[dict]) -> Path:
        """Write rows as one part, atomically: temp file, fsync, rename, fsync of the folder."""
        import pyarrow.parquet as pq

        table = table_of(rows, self.schema)
        final = self.points / part_name([r["config_hash"] for r in rows])
        tmp = self.points / f".{final.name}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as f:
                pq.write_table(table, f, compression="zstd")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.points)
        return final

    def write_summary(self, summary: dict) -> None:
        write_text(self.dir / SUMMARY, _json(summary))


def _json(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _difference(held: dict | None, wanted: dict) -> str:
    if not isinstance(held, dict):
        return "unreadable settings"
    keys = [k for k in sorted(set(held) | set(wanted)) if held.get(k) != wanted.get(k)]
    return "different " + ", ".join(keys)


def count_statuses(done: dict[str, str], hashes: list[str]) -> Counter:
    """How many of `hashes` are recorded, by status."""
    return Counter(done[h] for h in hashes if h in done)


def read_results(out_dir: str | Path):
    """Every row of a results folder as one Arrow table (StoreError if it holds none)."""
    require_pyarrow()
    import pyarrow as pa

    d = Path(out_dir)
    if not d.is_dir():
        raise StoreError(f"{d}: no such results folder")
    found = parts(d.glob(PART_GLOB)) or parts(d.glob(LEGACY_PART_GLOB))
    if not found:
        raise StoreError(f"{d} holds no results (no {PART_GLOB} files): run `archsim sweep SPEC --out {d}` first")
    manifest = read_manifest(d, READABLE)
    settings, fidelity = manifest.get("settings"), manifest.get("format", FORMAT) != 1
    tables = [_read_part(p) for p in found]
    columns = settings["columns"] if isinstance(settings, dict) else None
    digest = settings_digest(settings) if isinstance(settings, dict) else None
    want = arrow_schema([tuple(c) for c in columns], fidelity=fidelity) if columns is not None else tables[0].schema
    digests = {_part_digest(t) for t in tables} - {None}
    for p, t in zip(found, tables):
        if not t.schema.equals(want):
            raise StoreError(f"{p}: its columns differ from the sweep's: not a part of this sweep; move it away")
        held = _part_digest(t)
        if held is not None and (held != digest if digest is not None else len(digests) > 1):
            raise StoreError(
                f"{p}: holds rows of a sweep with other settings than {d / MANIFEST}'s: results of two "
                "sweeps are never ranked together; move it to that sweep's folder"
            )
    table = pa.concat_tables(tables)
    if not fidelity:  # format 1: every row was simulated at full fidelity
        table = table.add_column(3, pa.field("fidelity", pa.string(), nullable=False), [["full"] * len(table)])
    check_rows(table, d, None if columns is None else {c[0] for c in columns if c[2] == "objective"})
    return table


def _part_digest(table) -> str | None:
    """The settings digest a part records (None: a part written before parts recorded it)."""
    meta = table.schema.metadata or {}
    value = meta.get(SETTINGS_KEY)
    return value.decode("ascii", "replace") if value is not None else None


def check_rows(table, folder: Path, objectives: set[str] | None = None) -> None:
    """StoreError naming the first value no sweep writes: a config_hash that is not 16 hex digits
    or is in the folder twice, a status of no name, in an ok row a number missing or NaN, or an
    objective (of `objectives`; None: every number) that is not finite."""
    hashes, statuses = table.column("config_hash").to_pylist(), table.column("status").to_pylist()
    check_keys(hashes, statuses, folder)
    import pyarrow.types as types

    ok = [s == "ok" for s in statuses]
    for name in table.column_names[4:]:
        column = table.column(name)
        if not (types.is_floating(column.type) or types.is_integer(column.type)):
            continue
        finite = objectives is None or name in objectives  # (a derived value may overflow to inf)
        for v, in_ok in zip(column.to_pylist(), ok, strict=True):
            if in_ok and (v is None or math.isnan(v) or (finite and math.isinf(v))):
                raise _tampered(folder, name, v, "in an ok row")


def check_keys(hashes: list, statuses: list, folder: Path) -> None:
    """StoreError naming the first config_hash that is not 16 hex digits or is in the folder
    twice, or the first status of no name (what a resumed sweep reads of its parts)."""
    bad = next((h for h in hashes if not isinstance(h, str) or not HASH.match(h)), None)
    if bad is not None:
        raise _tampered(folder, "config_hash", bad)
    if len(set(hashes)) != len(hashes):
        twice = next(h for h, n in Counter(hashes).items() if n > 1)
        raise _tampered(folder, "config_hash", twice, "recorded twice")
    bad = next((s for s in statuses if s not in STATUSES), None)
    if bad is not None:
        raise _tampered(folder, "status", bad)


def _tampered(folder: Path, column: str, value, why: str = "") -> StoreError:
    shown = repr(value)[:40]
    return StoreError(
        f"{folder}: column {column}: {shown} {why or 'is no value a sweep writes'}: the results were "
        "altered or are not archsim's; move the folder's contents away and rerun the sweep"
    )


def read_manifest(out_dir: str | Path, formats: tuple[int, ...] = (FORMAT,)) -> dict:
    """The manifest of a results folder ({} if it has none); StoreError if it is damaged or of
    another format than `formats` (written by another version of archsim)."""
    path = Path(out_dir) / MANIFEST
    data = _read_json(path, "results manifest")
    if not data:
        return data
    held = data.get("format")
    if type(held) is int and held == 1 and held not in formats:
        raise StoreError(
            f"{path}: results of format 1, written before each row recorded the fidelity it was "
            "simulated at: `archsim pareto` still reads them (as full fidelity); to add points, rerun "
            "the sweep into a new folder"
        )
    if type(held) is not int or held not in formats:
        shown = f"format {held}" if type(held) is int and abs(held) < 10**9 else "no format number"
        raise StoreError(
            f"{path}: results of {shown}; this archsim reads format {FORMAT}: use the archsim that "
            "wrote them, or rerun the sweep into a new folder"
        )
    if not _settings_ok(data.get("settings")):
        raise StoreError(
            f"{path}: its settings are not as a sweep writes them (columns of [name, type, role]): "
            "it was damaged or is not archsim's: move the folder's contents away and rerun"
        )
    return data


def _settings_ok(settings: object) -> bool:
    """Whether a manifest's settings name their columns as a sweep writes them: [name, type, role]."""
    if not isinstance(settings, dict) or not isinstance(settings.get("columns"), list):
        return False
    return all(
        isinstance(c, list) and len(c) == 3 and all(isinstance(x, str) for x in c) and c[1] in ARROW_TYPES
        for c in settings["columns"]
    )


def read_summary(out_dir: str | Path) -> dict:
    """The summary of a results folder ({} if it has none); StoreError if it is damaged."""
    return _read_json(Path(out_dir) / SUMMARY, "results summary")


def _read_json(path: Path, what: str) -> dict:
    if not os.path.lexists(path):
        return {}
    try:
        if not path.is_file():
            raise ValueError("not a regular file")
        data = json.loads(path.read_bytes()[: 16 << 20].decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as err:
        raise StoreError(
            f"{path}: not a readable {what} ({type(err).__name__}: {str(err)[:80]}); "
            "it was damaged or is not archsim's: move the folder's contents away and rerun"
        ) from None
    return data


def parts(paths) -> list[Path]:
    """Results parts, sorted, each a regular file (StoreError naming one that is not)."""
    found = sorted(paths)
    for p in found:
        if not (os.path.exists(p) and stat.S_ISREG(os.stat(p).st_mode)):
            raise StoreError(f"{p}: is not a regular file, so not a results part; move it away and rerun")
    return found


def _read_part(part: Path, columns: list[str] | None = None):
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(part, columns=columns)
    except Exception as err:  # pyarrow's errors for a damaged or foreign file are of many types
        raise StoreError(f"{part}: not a readable results part ({str(err)[:120]}); move it away and rerun") from None
    missing = [c for c in ("config_hash", "status") if c not in table.column_names]
    if missing:
        raise StoreError(f"{part}: has no {', '.join(missing)} column, so not a results part; move it away")
    return table


def foreign_files(out_dir: Path) -> list[str]:
    """Names in a results folder (and its `points/`) that neither the store nor `archsim pareto` writes."""
    names = [
        p.name
        for p in out_dir.iterdir()
        if not (OURS.match(p.name) or OUR_TEMP.match(p.name) or TEXT_TEMP.match(p.name))
    ]
    points = out_dir / POINTS
    if os.path.lexists(points):
        if not points.is_dir():
            names.append(POINTS)
        else:
            names += [
                f"{POINTS}/{p.name}" for p in points.iterdir() if not (OUR_PART.match(p.name) or OUR_TEMP.match(p.name))
            ]
    return sorted(names)
