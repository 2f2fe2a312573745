"""A memo of op results on disk, so that repeated serves, runs and sweep points do not simulate
again the shapes they timed before (beside Numba's cache of compiled kernels).

An entry is keyed by three digests (SHA-256): of the ops (a sequence of frozen `Op` records, by
their repr: kind, dtype, shape, repeat), of the resolved chip (the frozen `System` record: chip,
chip count, interconnect and host link, by repr; where the file was read from is left out; or
the `Chip` alone for the timing of one op on it), and of archsim's version (its version number,
the text of its source files, so that a changed model never reads what the old one computed,
and whether the kernels run compiled or as Python, so that neither reads what the other
computed and the two can be compared). A value is a JSON number, or a list of them.

Two kinds of entry: the time of a list of ops on a system (the serving step model's parts), and
one op's timing and energy on a chip (`timed_value`, `timed_from_value`: every field of its
`OpTiming` and `EnergySplit`, integers and floats as computed, so what is read back is equal to
what was simulated, bit for bit).

Layout: DIR/<version digest>/<system digest>.jsonl (and chip-<chip digest>.jsonl for the
timings of single ops), one `{"k": KEY, "v": VALUE}` a line, each
appended by a single write(2) on a file opened O_APPEND. Writers of several processes (sweep
workers, two serves at once) thus add whole lines; a reader skips a line it cannot parse (a
writer killed mid-line) and a key written twice holds the same value. DIR is $ARCHSIM_CACHE_DIR,
else $XDG_CACHE_HOME/archsim, else ~/.cache/archsim. ARCHSIM_NO_CACHE=1, `set_enabled(False)`
or the commands' `--no-cache` turn it off; a cache that cannot be written is read-only, and one
that cannot be read is empty: the cache never fails a simulation.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path

from archsim.engine.timing import Bound, OpTiming
from archsim.hardware import Chip, System
from archsim.hardware.power import EnergySplit

SOURCE_ROOT = Path(__file__).resolve().parent
_enabled: list[bool] = [os.environ.get("ARCHSIM_NO_CACHE", "") in ("", "0")]


def set_enabled(flag: bool) -> None:
    """Turn the disk cache on or off for this process (`--no-cache`)."""
    _enabled[0] = flag
    _open.cache_clear()


def enabled() -> bool:
    return _enabled[0]


def cache_dir() -> Path:
    """Where the cache lives: $ARCHSIM_CACHE_DIR, $XDG_CACHE_HOME/archsim or ~/.cache/archsim."""
    return Path(_cache_folder())


def _cache_folder() -> str:
    """`cache_dir()` as text, worked out once per value of the variables it reads (every op
    that a run times asks for its cache)."""
    env = os.environ
    return _folder_of(env.get("ARCHSIM_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@lru_cache(maxsize=16)
def _folder_of(archsim_dir: str | None, xdg_dir: str | None, _home: str | None) -> str:
    if archsim_dir:
        return str(Path(archsim_dir))
    base = xdg_dir or str(Path.home() / ".cache")
    return str(Path(base) / "archsim")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@lru_cache(maxsize=1)
def code_version() -> str:
    """archsim's version number, a digest of every source file of the package, and the engine
    (`jit`: Numba-compiled kernels; `python`: the same kernels interpreted, NUMBA_DISABLE_JIT=1)."""
    from archsim import __version__

    engine = "python" if os.environ.get("NUMBA_DISABLE_JIT") == "1" else "jit"
    h = hashlib.sha256(f"{__version__}|{engine}".encode())
    for path in sorted(SOURCE_ROOT.rglob("*.py")):
        h.update(str(path.relative_to(SOURCE_ROOT)).encode())
        h.update(path.read_bytes())
    return f"{__version__}-{h.hexdigest()[:16]}"


def system_digest(system: System) -> str:
    """The resolved chip, its count, interconnect and host link (not the file it came from)."""
    return digest(repr(replace(system, source="")))


@lru_cache(maxsize=256)
def chip_digest(chip: Chip) -> str:
    """The resolved chip alone (what one op's timing depends on)."""
    return digest(repr(chip))


def ops_key(ops: Sequence[object], tag: str = "") -> str:
    """The key of a sequence of ops (and of what is computed from them, `tag`)."""
    return digest(tag + "|" + repr(tuple(ops)))


class OpCache:
    """The entries of one resolved system under this version of archsim."""

    def __init__(self, path: Path):
        self.path = path
        self.values: dict[str, object] = {}
        self.writable = True
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            text = ""
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                self.values[str(entry["k"])] = entry["v"]
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a writer that died

    def get(self, key: str):
        return self.values.get(key)

    def put(self, key: str, value) -> None:
        """Record `value` (a JSON number or list) under `key`, appended as one line."""
        if key in self.values:
            return
        self.values[key] = value
        if not self.writable:
            return
        line = (json.dumps({"k": key, "v": value}, separators=(",", ":")) + "\n").encode()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            try:
                fd = os.open(self.path, flags, 0o644)
            except FileNotFoundError:  # its folder is not there (yet)
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, flags, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError:
            self.writable = False  # a read-only or full disk: keep the values in memory


@lru_cache(maxsize=64)
def _open(directory: str, version: str, system_key: str) -> OpCache:
    return OpCache(Path(directory) / version / f"{system_key}.jsonl")


def cache_for(system: System) -> OpCache | None:
    """The cache of `system` (None when the cache is off)."""
    if not enabled():
        return None
    return _open(_cache_folder(), code_version(), system_digest(system))


def cache_for_chip(chip: Chip) -> OpCache | None:
    """The cache of single-op timings on `chip` (None when the cache is off)."""
    if not enabled():
        return None
    return _open(_cache_folder(), code_version(), "chip-" + chip_digest(chip))


TIMING_FIELDS = tuple(f.name for f in fields(OpTiming))


def timing_value(t: OpTiming) -> list:
    """An OpTiming as a JSON list of its fields in order (the bound by its name)."""
    values = (getattr(t, name) for name in TIMING_FIELDS)
    return [v.value if isinstance(v, Bound) else v.item() if hasattr(v, "item") else v for v in values]


def timing_from_value(value: object) -> OpTiming | None:
    """The OpTiming `timing_value` wrote, or None for an entry of another shape (never an error)."""
    if not isinstance(value, list) or len(value) != len(TIMING_FIELDS):
        return None
    record = dict(zip(TIMING_FIELDS, value, strict=True))
    try:
        record["bound"] = Bound(record["bound"])
    except ValueError:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in record.items() if k != "bound"):
        return None
    return OpTiming(**record)


ENERGY_FIELDS = tuple(f.name for f in fields(EnergySplit))


def timed_value(timing: OpTiming, energy: EnergySplit, power_w: float) -> list:
    """An op's timing, its energy by unit and its kernels' power as one JSON list."""
    parts = (getattr(energy, name) for name in ENERGY_FIELDS)
    return [timing_value(timing), [v.item() if hasattr(v, "item") else v for v in parts], float(power_w)]


def timed_from_value(value: object) -> tuple[OpTiming, EnergySplit, float] | None:
    """What `timed_value` wrote, or None for an entry of another shape (never an error)."""
    if not isinstance(value, list) or len(value) != 3:
        return None
    timing, energy, power_w = value
    t = timing_from_value(timing)
    if t is None or not isinstance(energy, list) or len(energy) != len(ENERGY_FIELDS):
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in [*energy, power_w]):
        return None
    return t, EnergySplit(*energy), power_w
