"""Kernels compiled ahead of time, so that a process runs them without loading Numba.

Loading Numba and its cached machine code costs a process 0.6-0.7 s (importing numba 0.3 s, its
typing and lowering registries 0.35 s), more than the simulation of a small run. The kernels a
process calls from Python (`ENTRIES`) are therefore also compiled, once per machine and per
digest of archsim's kernel sources, into one extension module by Numba's ahead-of-time compiler
(`numba.pycc`), in a child process; it is kept beside Numba's own cache
(`folder()`), and a process imports it in milliseconds. It is the same
LLVM code as Numba's JIT makes, for this machine's CPU and without fast-math, so its numbers are
the JIT's to the bit (tests/test_aot.py).

The kernels compiled are those made with `jit.njit_entry`, each for the types its argument
annotations name (`ARGUMENT_TYPES`; a kernel's signature is its one declaration). A compiled
function reads its arguments as the types it was built for, unchecked, so a call is passed to it
only when every argument is exactly such a type (`adapter`: C-contiguous, aligned, writeable
int64 or float64 arrays, Python or numpy scalars of the kind, the record named); any other call
goes to Numba's JIT, loaded then (archsim/jit.py). The module is compiled by
archsim/aot_build.py, in a child process; this module only finds, builds and loads it, and
imports nothing of archsim but archsim/kernel_sources.py.

The module is built by the first process that calls a kernel too large to run as Python
(archsim/jit.py) after archsim's kernel sources changed, where Numba would otherwise compile
them, in 20-40 s; the command line names it in its progress line. A file lock makes concurrent
processes (a sweep's workers) build it once (POSIX; where there are no such locks it is not
built). Where it cannot be built (no C compiler, no numba.pycc), the reason is kept in the
folder (`FAILED`), said once on a terminal, and Numba's JIT compiles the kernels as before; a
build that was killed (a signal, Ctrl-C) is not remembered as failed: the next process builds it.
`ARCHSIM_AOT=0` turns all of it off.

The module is code: it is imported only from a folder that is the user's own and writable by no
one else, and only a file that is the user's own and writable by no one else (`trusted`); the
folder is made 0700. Otherwise the kernels are refused (`opcache.CacheFolderError`, saying the
fix), as the op cache refuses such a folder.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

MODULE = "archsim_kernels"
FAILED = "build-failed.txt"  # in the module's folder: why it could not be built
KILLED = "killed by signal"  # a build that did not fail but was stopped: not remembered
BUILD_TIMEOUT_S = 900

# The argument types an entry kernel's annotations may name, a letter each: I / F a 1-D
# C-contiguous int64 / float64 array, G a 2-D C-contiguous float64 one, i / f an int64 / float64
# scalar, b a bool (archsim/jit.py declares the array names). Any other name is a record: a
# NamedTuple of floats in the kernel module's globals (MemoryParams), P, passed to the module as
# a float64 array of its fields.
ARGUMENT_TYPES = {"I64Array": "I", "F64Array": "F", "F64Array2D": "G", "int": "i", "float": "f", "bool": "b"}
INT64_RANGE = (-(2**63), 2**63 - 1)


def enabled() -> bool:
    return os.environ.get("ARCHSIM_AOT", "1") != "0" and os.environ.get("NUMBA_DISABLE_JIT") != "1"


def export_name(qualified: str) -> str:
    return qualified.replace(".", "_")


def signature(func: Callable) -> tuple[str, type | None]:
    """The letters of an entry kernel's arguments (`ARGUMENT_TYPES`) from its annotations, and
    the record class its P argument names (None if none). A missing or unknown annotation is a
    TypeError: the kernel could not be compiled ahead of time."""
    code = func.__code__
    names = code.co_varnames[: code.co_argcount]
    letters, record = [], None
    for name in names:
        note = func.__annotations__.get(name)
        note = _type_name(note)  # also a module without `from __future__ import annotations`
        letter = ARGUMENT_TYPES.get(note) if isinstance(note, str) else None
        if letter is None:
            found = func.__globals__.get(note) if isinstance(note, str) else None
            if not _is_record(found) or (record is not None and found is not record):
                raise TypeError(f"{func.__module__}.{func.__qualname__}: argument {name!r} is annotated {note!r}, not one of "
                                f"{sorted(ARGUMENT_TYPES)} or a NamedTuple of floats")  # fmt: skip
            letter, record = "P", found
        letters.append(letter)
    return "".join(letters), record


def _is_record(cls: object) -> bool:
    """A NamedTuple class whose fields are all annotated float."""
    fields = getattr(cls, "_fields", None) or ()
    notes = getattr(cls, "__annotations__", {})
    return (
        isinstance(cls, type)
        and issubclass(cls, tuple)
        and bool(fields)
        and all(_type_name(notes.get(f)) == "float" for f in fields)
    )


def _type_name(note: object) -> object:
    """An annotation's name: a string as written, a ForwardRef's text, or a class's name."""
    return getattr(note, "__forward_arg__", None) or getattr(note, "__name__", note)


_ARRAY_CHECK = (
    "if type({{a}}) is not ndarray or {{a}}.ndim != {ndim} or ({{a}}.dtype is not {dtype} and {{a}}.dtype != {dtype}):"
    " return MISS\n    flags = {{a}}.flags\n    if not (flags.c_contiguous and flags.behaved): return MISS"
)
_CHECKS = {  # the test of argument `a` for each letter; `return MISS` where it fails
    "I": _ARRAY_CHECK.format(ndim=1, dtype="I64"),
    "F": _ARRAY_CHECK.format(ndim=1, dtype="F64"),
    "G": _ARRAY_CHECK.format(ndim=2, dtype="F64"),
    "i": "if not ((type({a}) is int and LOW <= {a} <= HIGH) or type({a}) is int64): return MISS",
    "f": "if type({a}) is not float and type({a}) is not float64: return MISS",
    "b": "if type({a}) is not bool and type({a}) is not bool_: return MISS",
    "P": "if type({a}) is not Record: return MISS\n    {a} = fields({a})\n    if {a} is None: return MISS",
}
MISS = (False, None)


def _fields(p) -> np.ndarray | None:
    """A record as the float64 array of its fields, or None if one is not a float (the JIT would
    type such a record apart). Kept per record: a phase's is memoised upstream."""
    got = _field_arrays.get(p)
    if got is None:
        if any(type(x) is not float for x in p):
            return None
        if len(_field_arrays) >= 4096:
            _field_arrays.clear()
        got = _field_arrays[p] = np.array(p, dtype=np.float64)
    return got


_field_arrays: dict = {}


def adapter(function: Callable, codes: str, record: type | None = None) -> Callable[[tuple], tuple[bool, object]]:
    """A call of the module's `function` for arguments of `codes` (`signature`; `record` the
    class of a P): (True, its result), or (False, None) where the arguments are not those types
    (the caller then takes the JIT's path). Written out per entry, a test per argument, as it
    runs at every kernel call."""
    names = [f"a{i}" for i in range(len(codes))]
    lines = [f"def call(args):\n    if len(args) != {len(codes)}: return MISS\n    {', '.join(names)}, = args"]
    lines += ["    " + _CHECKS[code].format(a=name) for code, name in zip(codes, names)]
    lines.append(f"    return True, function({', '.join(names)})")
    scope: dict[str, Any] = {
        "MISS": MISS,
        "function": function,
        "ndarray": np.ndarray,
        "I64": np.dtype(np.int64),
        "F64": np.dtype(np.float64),
        "int64": np.int64,
        "float64": np.float64,
        "bool_": np.bool_,
        "LOW": INT64_RANGE[0],
        "HIGH": INT64_RANGE[1],
        "Record": record,
        "fields": _fields,
    }
    exec("\n".join(lines), scope)
    return scope["call"]


def folder() -> Path:
    """Where this machine's module for these sources is kept: in Numba's cache folder for them
    (`kernel_sources.kernel_cache_dir()`, or NUMBA_CACHE_DIR where that is set), named by a
    digest of the kernel sources (whose annotations say what each entry takes), of this file and
    the builder's (how arguments are passed), and by the CPU (a module built for one CPU may not
    run on another that shares the home folder)."""
    import hashlib

    from archsim import kernel_sources

    digest = kernel_sources.kernel_sources_digest()
    base = Path(os.environ.get("NUMBA_CACHE_DIR") or kernel_sources.kernel_cache_dir())
    here = Path(__file__)
    sources = digest.encode() + here.read_bytes() + here.with_name("aot_build.py").read_bytes()
    return base / f"aot-{hashlib.sha256(sources).hexdigest()[:16]}-{_cpu_key()}"


def _cpu_key() -> str:
    """This machine's CPU, named without loading LLVM: its architecture and a digest of the
    first processor's model and feature flags (Linux), or of what `platform` says."""
    import hashlib
    import platform

    text = f"{platform.machine()} {platform.processor()}"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read(65536).split("\n\n")[0]
        text += "".join(line for line in first.splitlines() if line.startswith(("model name", "flags")))
    except OSError:
        pass
    return f"{platform.machine() or 'cpu'}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def module_file(where: Path) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = where / f"{MODULE}{suffix}"
        if path.is_file():
            return path
    return None


_loaded: dict[str, ModuleType | None] = {}
_lock = threading.Lock()


def load(build: bool) -> ModuleType | None:
    """The compiled module for this machine and these sources, built first if `build` and it
    has not been (nor failed to be); None where there is none (the JIT is then used)."""
    if not enabled():
        return None
    where = folder()
    key = str(where)
    with _lock:
        if key in _loaded and (_loaded[key] is not None or not build):
            return _loaded[key]
        trusted(where)
        path = module_file(where)
        if path is None and build and buildable(where):
            path = _build_locked(where)
        module = _import(path) if path is not None and trusted(where, path) else None
        _loaded[key] = module
        return module


def trusted(where: Path, module: Path | None = None) -> bool:
    """True when the module's folder and the folder above it (and `module`, if given) are the
    user's own and writable by no one else; CacheFolderError naming the first that is not."""
    from archsim.cache_folders import file_problem, folder_problem, refusal, unsafe

    for path in (where.parent, where):
        why = folder_problem(path)
        if why is not None and unsafe(why) and not (path == where.parent and _sticky(path)):
            raise refusal(path, why, "NUMBA_CACHE_DIR", "ARCHSIM_AOT=0")
    if module is None or (why := file_problem(module)) is None:
        return True
    if unsafe(why):
        raise refusal(module, why, "NUMBA_CACHE_DIR", "ARCHSIM_AOT=0")
    return False


def _sticky(folder: Path) -> bool:
    """Whether others may add to `folder` but not rename or remove what they do not own (/tmp):
    the module's own folder in it, checked itself, cannot be swapped."""
    import stat

    try:
        return bool(os.stat(folder).st_mode & stat.S_ISVTX)
    except OSError:
        return False


def buildable(where: Path | None = None) -> bool:
    """Whether `load(build=True)` would build the module: enabled, not built, not failed."""
    where = where or folder()
    return enabled() and module_file(where) is None and not (where / FAILED).exists()


def _import(path: Path) -> ModuleType | None:
    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:  # a damaged or foreign file: the JIT instead
        return None
    return module


def _build_locked(where: Path) -> Path | None:
    """Build the module into `where` unless a concurrent process does (then wait for it)."""
    try:
        import fcntl
    except ImportError:  # no POSIX file locks (Windows): not built automatically
        return None
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(where, 0o700)
        trusted(where)
        lock = open(where / "build.lock", "w")  # noqa: SIM115 (held for the build)
    except OSError:
        return None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = module_file(where)  # built while this process waited
        if path is None and not (where / FAILED).exists():
            why = _run_build(where)
            path = module_file(where)
            if path is None and why is not None and why.startswith(KILLED):  # tried again by the next process
                return None
            if path is None:
                with contextlib.suppress(OSError):  # a full disk: tried again by the next process
                    (where / FAILED).write_text((why or "no module was written") + "\n")
                if sys.stderr.isatty():  # said once, where someone reads it; kept in the folder
                    print(
                        f"archsim: the kernels could not be compiled ahead of time ({why}); "
                        f"Numba compiles them in each process instead (see {where / FAILED})",
                        file=sys.stderr,
                        flush=True,
                    )
    return path


def _run_build(where: Path) -> str | None:
    """Build the module in a child process (Numba, its compiler and the C toolchain are loaded
    there, not here); why it failed, or None."""
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "archsim.aot_build", tmp],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                env={**os.environ, "ARCHSIM_AOT": "0"},
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{type(err).__name__}: {err}"
        built = module_file(Path(tmp))
        if done.returncode < 0:  # killed by a signal (the machine's memory, Ctrl-C): not the build's fault
            return f"{KILLED} {-done.returncode}"
        if done.returncode != 0 or built is None:
            lines = (done.stderr or done.stdout or "").strip().splitlines()
            errors = [line for line in lines if re.match(r"\w*(Error|Exception)\b", line)]
            return (errors or lines or [f"exit {done.returncode}"])[-1]  # the exception's line, not a hint after it
        os.replace(built, where / built.name)  # whole or not at all
    return None
