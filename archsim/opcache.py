"""A memo of op results on disk, so that repeated serves, runs and sweep points do not simulate
again the shapes they timed before (beside Numba's cache of compiled kernels).

An entry is keyed by three digests (SHA-256): of the ops (a sequence of frozen `Op` records, by
their repr: kind, dtype, shape, repeat), of the resolved chip (the frozen `System` record: chip,
chip count, interconnect and host link, by repr; where the file was read from is left out; or
the `Chip` alone for the timing of one op on it), and of archsim's version (its version number,
the text of its source files, so that a changed model never reads what the old one computed,
and whether the kernels run compiled or as Python, so that neither reads what the other
computed and the two can be compared). A value is a JSON number, or a list of them.

Three kinds of entry: the time of a list of ops on a system (the serving step model's parts),
one op's timing and energy on a chip (`timed_value`, `timed_from_value`: every field of its
`OpTiming` and `EnergySplit`, integers and floats as computed, so what is read back is equal to
what was simulated, bit for bit), and one op's time, energy and kernel power alone
(`cost_value`, `cost_from_value`: a step part's ops and a decode's attention samples, which need
no more).

Layout: DIR/<version digest>/<system digest>.jsonl (and chip-<chip digest>.jsonl for the
timings of single ops), one `{"k": KEY, "v": VALUE}` a line, each
appended by a single write(2) on a file opened O_APPEND (the lines of a `batched_writes`
block by one write(2) at its end). Writers of several processes (sweep
workers, two serves at once) thus add whole lines; a reader skips a line it cannot parse (a
writer killed mid-line) and a key written twice holds the same value. DIR is $ARCHSIM_CACHE_DIR,
else $XDG_CACHE_HOME/archsim, else ~/.cache/archsim. ARCHSIM_NO_CACHE=1, `set_enabled(False)`
or the commands' `--no-cache` turn it off; a cache that cannot be written is read-only, and one
that cannot be read is empty: the cache never fails a simulation.

Nothing read from it is trusted: what is read can only be a miss, never a changed result. The
folders are created 0700 and used only while they are the user's own and writable by no one else
(as ssh checks its own): a folder owned by another user or writable by others is refused, the
command with it (`CacheFolderError`, one line saying why and the fix), as anything in it may have
been planted.
A file is read only if it is a regular file (opened without following a link or blocking on a
FIFO) of at most MAX_FILE_BYTES. A line that is not a whole JSON entry (NaN and Infinity
included) is skipped, a key given twice with two values is a miss, and every value is checked
against the chip it is read for before it is used (`timed_from_value`, `seconds_from_value`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
import sys
import threading
from collections.abc import Sequence
from dataclasses import fields, replace
from enum import Enum
from functools import lru_cache
from operator import attrgetter
from pathlib import Path

from archsim.cache_folders import folder_problem, refusal, unsafe
from archsim.engine.timing import UNIT_BOUND, Bound, OpTiming
from archsim.graph.ops import Op
from archsim.hardware import Chip, System
from archsim.hardware.power import EnergySplit
from archsim.kernel_sources import package_sources

SOURCE_ROOT = Path(__file__).resolve().parent
PACKAGE_ROOT = SOURCE_ROOT  # the package's own sources (SOURCE_ROOT may be pointed elsewhere)
# A file is read whole into memory: a line is about 0.6 kB (one op's timing), so 64 MiB holds
# some 100,000 op shapes, more than months of runs on one chip put there, and bounds what a file
# planted or grown without end can take. A larger file is left alone (a miss for every key).
MAX_FILE_BYTES = 64 << 20
FOLDER_MODE = 0o700
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
    if SOURCE_ROOT == PACKAGE_ROOT:  # read once a process, with the kernels' digest
        sources = package_sources()
    else:
        sources = {path: path.read_bytes() for path in SOURCE_ROOT.rglob("*.py")}
    for path in sorted(sources):
        h.update(str(path.relative_to(SOURCE_ROOT)).encode())
        h.update(sources[path])
    return f"{__version__}-{h.hexdigest()[:16]}"


def system_digest(system: System) -> str:
    """The resolved chip, its count, interconnect and host link (not the file it came from)."""
    return digest(repr(replace(system, source="")))


@lru_cache(maxsize=256)
def chip_digest(chip: Chip) -> str:
    """The resolved chip alone (what one op's timing depends on)."""
    return digest(repr(chip))


def ops_key(ops: Sequence[object], tag: str = "") -> str:
    """The key of a sequence of ops (and of what is computed from them, `tag`): the digest of
    their repr. A single op's key is kept by its fields' values and their types, which decide
    its repr where each is a whole number, a flag, text, None or an enum member (a float's need
    not: 0.0 == -0.0), so that a sweep's points, whose steps are the same ops built again for
    another chip, hash each op's repr once."""
    if len(ops) == 1 and type(ops[0]) is Op:
        values = _op_fields(ops[0])
        types = tuple(map(type, values))
        if _repr_fixed(types):
            seen = (tag, values, types)
            key = _op_keys.get(seen)
            if key is None:
                if len(_op_keys) >= MAX_OP_KEYS:
                    _op_keys.clear()
                key = _op_keys[seen] = digest(tag + "|" + repr(tuple(ops)))
            return key
    return digest(tag + "|" + repr(tuple(ops)))


MAX_OP_KEYS = 4096  # single ops' keys kept (a run's thousands of ops are copies of a few dozen)
_op_keys: dict[tuple, str] = {}
_op_fields = attrgetter(*(f.name for f in fields(Op)))


@lru_cache(maxsize=64)
def _repr_fixed(types: tuple[type, ...]) -> bool:
    """Whether equal values of each of `types` have one repr: whole numbers, flags, text, None,
    enum members."""
    return all(t in (int, bool, str, type(None)) or issubclass(t, Enum) for t in types)


def reject_constant(name: str):
    """json's `parse_constant` for an entry: NaN and Infinity make the entry a miss."""
    raise ValueError(f"{name} is not a number an entry holds")


def read_regular(path: Path, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of the regular file at `path`, or None: missing, a link, a FIFO, a device, a
    folder, over `limit` bytes, or unreadable. Opened without following a link and without
    blocking (a FIFO with no writer would block the open), and checked before it is read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= limit else None  # grown past the bound while read
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_entries(data: bytes, clashing: set[str] | None = None) -> dict[str, object]:
    """The entries of a cache file's lines: a line that is not a whole `{"k": KEY, "v": VALUE}`
    (cut short by a writer that died, or with NaN or Infinity) is skipped; a key given twice with
    two values holds neither (which is right cannot be told; it is added to `clashing`), with one
    value twice it holds it."""
    values: dict[str, object] = {}
    clashing = set() if clashing is None else clashing
    for line in data.split(b"\n"):
        try:
            entry = json.loads(line, parse_constant=reject_constant)
            key, value = entry["k"], entry["v"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        if not isinstance(key, str):
            continue
        if key in values and values[key] != value:
            clashing.add(key)
        values.setdefault(key, value)
    for key in clashing:
        del values[key]
    return values


# what json.dumps(entry, separators=(",", ":"), allow_nan=False) writes, by one encoder made once
# (json.dumps makes one a call with these arguments)
_LINE = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class OpCache:
    """The entries of one resolved system under this version of archsim."""

    def __init__(self, path: Path):
        self.path = path
        data = read_regular(path)
        self.clashing: set[str] = set()  # keys the file gives two values: never appended again
        self.values: dict[str, object] = parse_entries(data, self.clashing) if data else {}
        # a file that is not a regular one of bounded size is not appended to either
        self.writable = data is not None or not os.path.lexists(path)

    def get(self, key: str):
        return self.values.get(key)

    def put(self, key: str, value) -> None:
        """Record `value` (a JSON number or list) under `key`, appended as one line (at the end
        of the `batched_writes` block it is put in, with the block's other lines)."""
        if key in self.values:
            return
        self.values[key] = value
        if not self.writable or key in self.clashing:
            return
        line = (_LINE.encode({"k": key, "v": value}) + "\n").encode()
        pending = getattr(_batch, "lines", None)
        if pending is not None:
            pending.setdefault(self, []).append(line)
            return
        self._append([line])

    def _append(self, lines: list[bytes]) -> None:
        """Append `lines` by one write(2), those that keep the file within MAX_FILE_BYTES (the
        first that would not, and every line after it, are kept in memory only)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        try:
            try:
                fd = os.open(self.path, flags, 0o600)
            except FileNotFoundError:  # its folder is not there (yet)
                if make_folders(self.path.parent) is None:
                    raise OSError("cache folder not usable") from None
                fd = os.open(self.path, flags, 0o600)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise OSError("not a regular file")
                size, fit = st.st_size, 0
                for line in lines:
                    if size + len(line) > MAX_FILE_BYTES:
                        break
                    size, fit = size + len(line), fit + 1
                if fit:
                    os.write(fd, b"".join(lines[:fit]))
                if fit < len(lines):
                    raise OSError("full")
            finally:
                os.close(fd)
        except (OSError, ValueError):
            self.writable = False  # a read-only or full disk: keep the values in memory


_batch = threading.local()  # this thread's lines put inside `batched_writes`, by cache


@contextlib.contextmanager
def batched_writes():
    """Within the block, the lines this thread puts are appended at its end, each cache's by one
    write(2) (in the order they were put, the same lines a put at a time appends): a run's
    thousand decode-attention samples open their file once, not a thousand times. Values put are
    read back at once, from memory. A block inside another is part of it."""
    if getattr(_batch, "lines", None) is not None:
        yield
        return
    _batch.lines = {}
    try:
        yield
    finally:
        pending, _batch.lines = _batch.lines, None
        for cache, lines in pending.items():
            if cache.writable:
                cache._append(lines)


_refused: set[str] = set()  # folders refused in this process (kept for the tests' fresh starts)


def trusted_folders(*folders: Path) -> bool:
    """Whether every one of `folders` may hold a cache: CacheFolderError naming the first that
    another user may have written to (owned by another, writable by others), and its fix; False,
    said once, for one that cannot be used (not a folder, unreadable: the cache is off)."""
    for folder in folders:
        why = folder_problem(folder)
        if why is not None and unsafe(why):
            raise refusal(folder, why)
        if why is not None:
            _say_off(folder, why)
            return False
    return True


def _say_off(folder: Path, why: str) -> None:
    """Say once per folder that the cache is off because of `why`."""
    if str(folder) in _refused:
        return
    _refused.add(str(folder))
    from archsim.errors import printable

    line = f"archsim: warning: cache folder {folder} {why}: not used (set ARCHSIM_CACHE_DIR, or --no-cache)"
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no stderr to say it on
        print(printable(line), file=sys.stderr)


def check_folders() -> None:
    """CacheFolderError, before any work, where the cache is on and its folders may not hold one."""
    if enabled():
        root = Path(_cache_folder())
        trusted_folders(root, root / code_version())


def make_folders(folder: Path) -> Path | None:
    """`folder` (the cache folder or one under it) made, with every folder from the cache folder
    down to it 0700, and checked; None if it cannot be made or may not hold a cache."""
    root = Path(_cache_folder())
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        return None
    chain = [root]
    for part in parts:
        chain.append(chain[-1] / part)
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        for f in chain:
            with contextlib.suppress(FileExistsError):
                os.mkdir(f, FOLDER_MODE)
    except OSError:
        return None
    return folder if trusted_folders(*chain) else None


@lru_cache(maxsize=64)
def _open(directory: str, version: str, system_key: str) -> OpCache | None:
    if not trusted_folders(Path(directory), Path(directory) / version):
        return None
    return OpCache(Path(directory) / version / f"{system_key}.jsonl")


def cache_for(system: System) -> OpCache | None:
    """The cache of `system` (None when the cache is off, or its folder may not hold one)."""
    if not enabled():
        return None
    return _open(_cache_folder(), code_version(), system_digest(system))


def cache_for_chip(chip: Chip) -> OpCache | None:
    """The cache of single-op timings on `chip` (None when the cache is off, or its folder may
    not hold one)."""
    if not enabled():
        return None
    return _open(_cache_folder(), code_version(), "chip-" + chip_digest(chip))


def version_folder() -> Path:
    """The folder of this version's entries (DIR/<version>)."""
    return Path(_cache_folder()) / code_version()


TIMING_FIELDS = tuple(f.name for f in fields(OpTiming))
COUNT_FIELDS = frozenset(f.name for f in fields(OpTiming) if f.type in (int, "int"))  # whole numbers


_timing_fields = attrgetter(*TIMING_FIELDS)


def timing_value(t: OpTiming) -> list:
    """An OpTiming as a JSON list of its fields in order (the bound by its name)."""
    return [v if type(v) in _PLAIN else _plain(v) for v in _timing_fields(t)]


_PLAIN = frozenset((int, float))  # kept as they are


def _plain(v: object) -> object:
    """`v` as JSON keeps it: a Bound by its name, a NumPy scalar as the Python number it holds."""
    return v.value if isinstance(v, Bound) else v.item() if hasattr(v, "item") else v


def _amount(v: object) -> bool:
    """Whether `v` is a finite, non-negative JSON number (not a boolean)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def timing_from_value(value: object) -> OpTiming | None:
    """The OpTiming `timing_value` wrote, or None for an entry of another shape or with a value
    no timing has: a count that is not a whole number, an amount negative or not finite, a bound
    of no name (never an error)."""
    if not isinstance(value, list) or len(value) != len(TIMING_FIELDS):
        return None
    record = dict(zip(TIMING_FIELDS, value, strict=True))
    try:
        record["bound"] = Bound(record["bound"])
    except (ValueError, TypeError):
        return None
    for k, v in record.items():
        if k != "bound" and not (_amount(v) and (k not in COUNT_FIELDS or isinstance(v, int))):
            return None
    return OpTiming(**record)


def timing_fits_chip(t: OpTiming, chip: Chip) -> bool:
    """Whether `t` is a timing `choose.timed.time_op` gives on `chip`: its time is its cycles at
    the chip's clock, to the bit; its compute and fixed cycles and its stalls within them; its
    time by cause adding up to its time (to float rounding); its bound its binding unit's (the
    highest utilisation of its own peak); its clock above 0 and at most the chip's (the chip's
    own without a power model); its active cores at most the chip's; its busy cycles at most its
    cores' cycles; with a power model or none."""
    played = t.cycles - t.overhead_cycles
    return (
        t.time_s == t.cycles / chip.clock_hz
        and t.compute_cycles <= played
        and t.stall_cycles <= played
        and math.isclose(t.by_cause.total_s, t.time_s, rel_tol=1e-9, abs_tol=1e-18)
        and t.bound.value == UNIT_BOUND[t.binding_unit]
        and 0 < t.clock_hz <= chip.clock_hz
        and (chip.power is not None or t.clock_hz == chip.clock_hz)
        and t.active_cores <= chip.cores
        and t.busy_core_cycles <= t.core_cycles
    )


ENERGY_FIELDS = tuple(f.name for f in fields(EnergySplit))
_energy_fields = attrgetter(*ENERGY_FIELDS)


def timed_value(timing: OpTiming, energy: EnergySplit, power_w: float) -> list:
    """An op's timing, its energy by unit and its kernels' power as one JSON list."""
    parts = _energy_fields(energy)
    return [timing_value(timing), [v if type(v) in _PLAIN else _plain(v) for v in parts], float(power_w)]


def timed_from_value(value: object, chip: Chip) -> tuple[OpTiming, EnergySplit, float] | None:
    """What `timed_value` wrote for an op on `chip`, or None (a miss, never an error) for an entry
    of another shape, a value no timing has, or a timing `chip` cannot give (`timing_fits_chip`);
    its energies finite and non-negative, adding up to the timing's energy to the bit, and all
    zero, as its power, without a power model."""
    if not isinstance(value, list) or len(value) != 3:
        return None
    timing, energy, power_w = value
    t = timing_from_value(timing)
    if t is None or not isinstance(energy, list) or len(energy) != len(ENERGY_FIELDS):
        return None
    if not all(_amount(v) for v in [*energy, power_w]) or not timing_fits_chip(t, chip):
        return None
    split = EnergySplit(*energy)
    if split.total_j != t.energy_j or (chip.power is None and (t.energy_j != 0 or power_w != 0)):
        return None
    return t, split, power_w


def cost_value(time_s: float, energy: EnergySplit, power_w: float) -> list:
    """An op's time, its energy by unit and its kernels' power (choose.timed.OpCost) as one JSON list."""
    return [float(time_s), [float(getattr(energy, name)) for name in ENERGY_FIELDS], float(power_w)]


def cost_from_value(value: object, chip: Chip) -> tuple[float, EnergySplit, float] | None:
    """What `cost_value` wrote for an op on `chip`, or None (a miss, never an error) for an entry
    of another shape or with an amount that is not a finite, non-negative number; with no power
    model, any energy or power but zero is a miss."""
    if not isinstance(value, list) or len(value) != 3:
        return None
    time_s, energy, power_w = value
    if not isinstance(energy, list) or len(energy) != len(ENERGY_FIELDS):
        return None
    if not all(_amount(v) for v in [time_s, *energy, power_w]):
        return None
    if chip.power is None and (any(energy) or power_w):
        return None
    return float(time_s), EnergySplit(*energy), power_w


def seconds_from_value(value: object) -> float | None:
    """A time in seconds kept as an entry (a list of ops' time on a system), or None for one that
    is not a finite, non-negative number."""
    return float(value) if isinstance(value, (int, float)) and _amount(value) else None
