"""Kernels compiled ahead of time, so that a process runs them without loading Numba.

Loading Numba and its cached machine code costs a process 0.6-0.7 s (importing numba 0.3 s, its
typing and lowering registries 0.35 s), more than the simulation of a small run. The kernels a
process calls from Python (`ENTRIES`) are therefore also compiled, once per machine and per
digest of archsim's kernel sources, into one extension module by Numba's ahead-of-time compiler
(`numba.pycc`), in a child process; it is kept beside Numba's own cache
(`folder()`), and a process imports it in milliseconds. It is the same
LLVM code as Numba's JIT makes, for this machine's CPU and without fast-math, so its numbers are
the JIT's to the bit (tests/test_aot.py).

A compiled function reads its arguments as the types it was built for, unchecked, so a call is
passed to it only when every argument is exactly such a type (`adapter`: 1-D C-contiguous,
aligned, writeable int64 or float64 arrays, Python or numpy scalars of the kind); any other call
goes to Numba's JIT, loaded then (archsim/jit.py).

The module is built by the first process that calls a kernel too large to run as Python
(archsim/jit.py) after archsim's kernel sources changed, where Numba would otherwise compile
them, in 20-40 s; the command line names it in its progress line. A file lock makes concurrent
processes (a sweep's workers) build it once (POSIX; where there are no such locks it is not
built). Where it cannot be built (no C compiler, no numba.pycc), the reason is kept in the
folder (`FAILED`), said once on a terminal, and Numba's JIT compiles the kernels as before.
`ARCHSIM_AOT=0` turns all of it off.
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

import numpy as np

MODULE = "archsim_kernels"
FAILED = "build-failed.txt"  # in the module's folder: why it could not be built
BUILD_TIMEOUT_S = 900

# Kernels called from Python, each with the argument types archsim calls it with, a letter each:
# I / F a 1-D C-contiguous int64 / float64 array, i / f an int64 / float64 scalar, b a bool, and
# P the event loop's MemoryParams (passed to the module as a float64 array of its fields).
ENTRIES = {
    "archsim.engine.kernels.simulate_phase": "IIFFIFFFiPb",
    "archsim.compiler.l2reuse._walk_waves": "IIIIIIiifffff",
    "archsim.compiler.program.deal_cores": "Fi",
    "archsim.serving.kernels.apply_decodes": "IiIIIiFffIFb",
    "archsim.serving.kernels.apply_tokens": "IIIIIFFfIF",
    "archsim.serving.kernels.decode_bounds": "IIIIIiib",
    "archsim.serving.kernels.hist_add_steps": "IFFii",
    "archsim.serving.kernels.plan_running": "IIIIIIiiib",
    "archsim.serving.kernels.step_shape": "IIIII",
}
INT64_RANGE = (-(2**63), 2**63 - 1)


def enabled() -> bool:
    return os.environ.get("ARCHSIM_AOT", "1") != "0" and os.environ.get("NUMBA_DISABLE_JIT") != "1"


def export_name(qualified: str) -> str:
    return qualified.replace(".", "_")


def _memory_params():
    from archsim.hardware.memory import MemoryParams

    return MemoryParams


_CHECKS = {  # the test of argument `a` for each letter of ENTRIES; `return MISS` where it fails
    "I": "if type({a}) is not ndarray or {a}.ndim != 1 or ({a}.dtype is not I64 and {a}.dtype != I64): return MISS\n"
    "    flags = {a}.flags\n    if not (flags.c_contiguous and flags.behaved): return MISS",
    "F": "if type({a}) is not ndarray or {a}.ndim != 1 or ({a}.dtype is not F64 and {a}.dtype != F64): return MISS\n"
    "    flags = {a}.flags\n    if not (flags.c_contiguous and flags.behaved): return MISS",
    "i": "if not ((type({a}) is int and LOW <= {a} <= HIGH) or type({a}) is int64): return MISS",
    "f": "if type({a}) is not float and type({a}) is not float64: return MISS",
    "b": "if type({a}) is not bool and type({a}) is not bool_: return MISS",
    "P": "if type({a}) is not MemoryParams: return MISS\n    {a} = fields({a})\n    if {a} is None: return MISS",
}
MISS = (False, None)


def _fields(p) -> np.ndarray | None:
    """A MemoryParams as the float64 array of its fields, or None if one is not a float (the
    JIT would type such a record apart). Kept per record: a phase's is memoised upstream."""
    got = _field_arrays.get(p)
    if got is None:
        if any(type(x) is not float for x in p):
            return None
        if len(_field_arrays) >= 4096:
            _field_arrays.clear()
        got = _field_arrays[p] = np.array(p, dtype=np.float64)
    return got


_field_arrays: dict = {}


def adapter(function: Callable, codes: str) -> Callable[[tuple], tuple[bool, object]]:
    """A call of the module's `function` for arguments of `codes`: (True, its result), or
    (False, None) where the arguments are not those types (the caller then takes the JIT's
    path). Written out per entry, a test per argument, as it runs at every kernel call."""
    names = [f"a{i}" for i in range(len(codes))]
    lines = [f"def call(args):\n    if len(args) != {len(codes)}: return MISS\n    {', '.join(names)}, = args"]
    lines += ["    " + _CHECKS[code].format(a=name) for code, name in zip(codes, names)]
    lines.append(f"    return True, function({', '.join(names)})")
    scope = {
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
        "MemoryParams": _memory_params(),
        "fields": _fields,
    }
    exec("\n".join(lines), scope)
    return scope["call"]


def folder() -> Path:
    """Where this machine's module for these sources is kept: in Numba's cache folder for them
    (`jit.kernel_cache_dir()`, or NUMBA_CACHE_DIR where that is set), named by a digest of the
    kernel sources and this file (which says what each function takes) and by the CPU (a module
    built for one CPU may not run on another that shares the home folder)."""
    import hashlib

    from archsim.jit import KERNEL_CACHE, cache_root, kernel_sources_digest

    digest = kernel_sources_digest()
    base = Path(os.environ.get("NUMBA_CACHE_DIR") or cache_root() / KERNEL_CACHE / digest)
    sources = digest.encode() + Path(__file__).read_bytes()
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
        path = module_file(where)
        if path is None and build and buildable(where):
            path = _build_locked(where)
        module = _import(path) if path is not None else None
        _loaded[key] = module
        return module


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
        where.mkdir(parents=True, exist_ok=True)
        lock = open(where / "build.lock", "w")  # noqa: SIM115 (held for the build)
    except OSError:
        return None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = module_file(where)  # built while this process waited
        if path is None and not (where / FAILED).exists():
            why = _run_build(where)
            path = module_file(where)
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
                [sys.executable, "-m", "archsim.aot", tmp],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                env={**os.environ, "ARCHSIM_AOT": "0"},
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"{type(err).__name__}: {err}"
        built = module_file(Path(tmp))
        if done.returncode != 0 or built is None:
            lines = (done.stderr or done.stdout or "").strip().splitlines()
            errors = [line for line in lines if re.match(r"\w*(Error|Exception)\b", line)]
            return (errors or lines or [f"exit {done.returncode}"])[-1]  # the exception's line, not a hint after it
        os.replace(built, where / built.name)  # whole or not at all
    return None


def build(out: Path) -> Path:
    """Compile every entry kernel into the module `MODULE` in folder `out` (run as
    `python -m archsim.aot OUT`); its path."""
    import warnings

    from archsim import jit

    jit.load()
    import numba
    from numba import types
    from numba.core.codegen import AOTCPUCodegen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba.pycc's pending deprecation: the module is what counts
        from numba.pycc import CC

    cc = CC(MODULE)
    cc.output_dir = str(out)
    # for this machine as Numba's JIT compiles: its CPU and the features it reports (by default
    # the ahead-of-time compiler takes the features a CPU model has, which a virtual machine may
    # not offer)
    cc.target_cpu = "host"
    AOTCPUCodegen._customize_tm_features = lambda self: self._get_host_cpu_features()  # type: ignore[method-assign]
    memory = numba.typeof(_memory_params()(*[0.0] * len(_memory_params()._fields)))
    kernel_types = {"I": types.int64[::1], "F": types.float64[::1], "i": types.int64, "f": types.float64}
    kernel_types |= {"b": types.boolean, "P": memory}
    for qualified, codes in ENTRIES.items():
        module, name = qualified.rsplit(".", 1)
        kernel = getattr(importlib.import_module(module), name)
        arg_types = tuple(kernel_types[c] for c in codes)
        kernel.compile(arg_types)
        returns = kernel.overloads[arg_types].signature.return_type
        export_types = tuple(types.float64[::1] if c == "P" else kernel_types[c] for c in codes)
        cc.export(export_name(qualified), returns(*export_types))(_export_function(kernel, codes))
    cc.compile()
    path = module_file(out)
    assert path is not None, f"numba.pycc wrote no {MODULE} into {out}"
    return path


def _export_function(kernel, codes: str):
    """A function of the entry's arguments that calls `kernel`, the MemoryParams rebuilt from its
    fields (a record the module's callers cannot pass)."""
    n = len(_memory_params()._fields)
    params = [f"a{i}" for i in range(len(codes))]
    args = [f"_P({', '.join(f'a{i}[{j}]' for j in range(n))})" if c == "P" else f"a{i}" for i, c in enumerate(codes)]
    source = f"def entry({', '.join(params)}):\n    return _kernel({', '.join(args)})\n"
    scope = {"_kernel": kernel, "_P": _memory_params()}
    exec(source, scope)  # a function of fixed arity for the compiler to type
    return scope["entry"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m archsim.aot OUT_FOLDER", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    build(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
