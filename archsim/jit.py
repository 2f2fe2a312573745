"""Optional JIT: Numba's `njit(cache=True)` when numba is importable, plain Python otherwise.

`NUMBA_DISABLE_JIT=1` makes numba's own decorator return the Python function, so the same
kernels run interpreted with identical results (tests check this).

Numba is loaded when a kernel is first called, not when archsim is imported: until then each
decorated function is a `Kernel` that holds the Python function. The first call of any kernel
makes every kernel's dispatcher at once and puts the dispatchers in place of the `Kernel`s in
every loaded module's globals (so a kernel that calls another finds a dispatcher when Numba
compiles it); a kernel defined later gets its dispatcher at once. A run whose ops all come from
the op cache never loads Numba (0.2 s of a small command), and neither does one whose kernels
are all small: until Numba is loaded, a kernel called from Python on arrays of at most
INTERPRETED_ELEMENTS elements in all, counted over every such call, runs as Python, as do the
kernels it calls (loading Numba and its cached machine code costs 0.4-0.5 s, the interpreted
kernels of `archsim op gemm` on a 64^3 GEMM a few milliseconds); the first larger call loads it.
The results are the same either way, to the bit (the kernels run as Python under
NUMBA_DISABLE_JIT, and tests compare the two).

Where the module of kernels compiled ahead of time (archsim/aot.py) has a kernel, the first large
call gives it that module's function instead of loading Numba (0.6-0.7 s), and so does every
later call whose arguments are the types it was compiled for; any other call loads Numba then.
The module is built, in place of Numba's compilation, by the first process after the kernel
sources change.

Compiled kernels are cached on disk in `kernel_cache_dir()`, a folder named by a digest of every
source file they are built from: Numba itself checks only the file that defines a kernel.

In a process of archsim's own (the command line, `for_command_line()`), numba's array library
is loaded with `scipy.linalg` out of sight: numba imports it (0.3-0.4 s, a third of a small
command's time) only to offer BLAS to compiled `np.dot` and `np.linalg`, which no kernel of
archsim calls. Where `scipy.linalg` is already loaded (a user's Python session) nothing is hidden.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from archsim.kernel_sources import cache_root, kernel_cache_dir

# The argument types of a kernel called from Python, as its annotations name them: archsim/aot.py
# compiles it ahead of time for the types they name (by these names: `ARGUMENT_TYPES` there) and
# passes it only calls of exactly those types. Arrays are C-contiguous; a NamedTuple of floats
# (MemoryParams) is passed to the compiled module as an array of its fields.
if TYPE_CHECKING:
    from numpy.typing import NDArray

    I64Array = NDArray[np.int64]  # 1-D
    F64Array = NDArray[np.float64]  # 1-D
    F64Array2D = NDArray[np.float64]  # 2-D
else:
    I64Array = F64Array = F64Array2D = np.ndarray

_command_line = [False]
INTERPRETED_ELEMENTS = 16384  # array elements kernels may take as Python before Numba is loaded, in all
_interpreted = [0]  # elements taken so far
_inside = threading.local()  # `depth`: interpreted kernels this thread is inside


def for_command_line() -> None:
    """This process is archsim's command line: load numba without scipy's BLAS (see above)."""
    _command_line[0] = True


class _HideScipy(importlib.abc.MetaPathFinder):
    """An import finder that reports scipy.linalg as not installed."""

    def find_spec(self, fullname, path, target=None):
        if fullname == "scipy.linalg" or fullname.startswith("scipy.linalg."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _load_numba_without_blas() -> None:
    if "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules:
        return
    finder = _HideScipy()
    sys.meta_path.insert(0, finder)
    try:
        import numba.np.arraymath  # noqa: F401  (decides once whether BLAS is there)
    finally:
        sys.meta_path.remove(finder)


class Kernel:
    """A kernel before Numba is loaded: called from Python, it runs as Python while the calls
    stay small (`_interprets`), else it has every kernel's dispatcher made (`_dispatch_all`) and
    runs its own."""

    def __init__(self, func, options: dict | None = None):
        self.py_func = func
        self.options = options or {}
        self.dispatcher = None
        self.compiled: Callable[[tuple], tuple[bool, object]] | None = None  # from archsim/aot.py
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        if self.dispatcher is None:
            if self.compiled is not None and not kwargs:
                took, out = self.compiled(args)
                if took:
                    return out
            if _interprets(args):
                _inside.depth = getattr(_inside, "depth", 0) + 1
                try:
                    return self.py_func(*args, **kwargs)
                finally:
                    _inside.depth -= 1
            if not _ahead[0]:
                _use_ahead_of_time()
                return self(*args, **kwargs)
            _dispatch_all()
        return self.dispatcher(*args, **kwargs)

    @property
    def qualified_name(self) -> str:
        return f"{self.py_func.__module__}.{self.py_func.__qualname__}"

    def __repr__(self) -> str:
        return f"Kernel({self.py_func.__qualname__})"


def _interprets(args: tuple) -> bool:
    """Whether a kernel called before Numba is loaded runs as Python: inside an interpreted
    kernel, or while the elements of the arrays it is given keep the count within the budget."""
    if getattr(_inside, "depth", 0):
        return True
    elements = sum(a.size for a in args if isinstance(a, np.ndarray))
    if _interpreted[0] + elements > INTERPRETED_ELEMENTS:
        return False
    _interpreted[0] += elements
    return True


_waiting: list[Kernel] = []  # kernels defined before Numba was loaded
_loaded = [False]
_ahead = [False]  # whether the kernels compiled ahead of time were looked for (`_use_ahead_of_time`)
_building = [False]  # while they are being compiled
_ahead_module: list = [None]  # the module compiled ahead of time, once looked for and found
_loading = threading.Lock()  # two threads calling their first kernels make the dispatchers once
_on_load: list = []  # what to call once Numba is loaded (`when_loaded`)


def _use_ahead_of_time() -> None:
    """Give every waiting kernel with a function in the module compiled ahead of time
    (archsim/aot.py, built now if it never was) that function, once per process: a call it takes
    runs there, without Numba; one it does not take loads Numba. A kernel defined later (its
    module imported later) gets its function when it is defined (`njit`)."""
    from archsim import aot

    with _loading:
        if _ahead[0]:
            return
        _ahead[0] = True
        if _loaded[0]:
            return
        module = aot.load(build=False)
        if module is None and aot.buildable():
            _building[0] = True
            try:
                for announce in list(_on_load):  # a progress line names the compilation
                    announce()
                module = aot.load(build=True)
            finally:
                _building[0] = False
        _ahead_module[0] = module
        waiting = list(_waiting)
    for kernel in waiting:  # outside the lock, as in `njit`: an adapter may import a module of kernels
        _give_compiled(kernel, module)


def _give_compiled(kernel: Kernel, module) -> None:
    """Give `kernel` its function in the module compiled ahead of time, if it has one."""
    from archsim import aot

    if module is None or kernel.qualified_name not in _entries:
        return
    function = getattr(module, aot.export_name(kernel.qualified_name), None)
    if function is not None:
        kernel.compiled = aot.adapter(function, *aot.signature(kernel.py_func))


def loaded() -> bool:
    """Whether Numba is loaded (a large kernel call was made, or `load()`)."""
    return _loaded[0]


def building() -> bool:
    """Whether the kernels are being compiled ahead of time (archsim/aot.py) now."""
    return _building[0]


def ahead_of_time() -> None:
    """Run the kernels compiled ahead of time (archsim/aot.py) from now on, whatever the size of
    the calls to come (a call they do not take still loads Numba): for a caller whose kernel
    costs far more per element as Python than the budget of INTERPRETED_ELEMENTS assumes."""
    _use_ahead_of_time()


def load() -> None:
    """Load Numba and make every kernel's dispatcher now, whatever the calls to come: for a
    process that will time its kernels."""
    _dispatch_all()


def when_loaded(fn) -> None:
    """Call `fn()` once Numba is loaded and the dispatchers made, before any kernel compiles
    (now, if it is loaded), and before the kernels are compiled ahead of time (archsim/aot.py;
    `building()` is then True); `forget(fn)` takes it back."""
    if _loaded[0]:
        fn()
    else:
        _on_load.append(fn)


def forget(fn) -> None:
    if fn in _on_load:
        _on_load.remove(fn)


def _use_kernel_cache_dir() -> None:
    """Point Numba's cache at `kernel_cache_dir()` unless NUMBA_CACHE_DIR says otherwise, or
    the folder cannot be made (then Numba caches where it would); CacheFolderError where another
    user may have written there."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    from archsim.cache_folders import folder_problem, refusal, unsafe

    try:
        path = kernel_cache_dir()
        private_folders(path)
    except OSError:
        return
    for folder in (cache_root(), path.parent, path):  # Numba loads machine code from there
        why = folder_problem(folder)
        if why is not None and unsafe(why):
            raise refusal(folder, why, "XDG_CACHE_HOME", "set NUMBA_CACHE_DIR to a folder of your own")
    os.environ["NUMBA_CACHE_DIR"] = str(path)
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba imported before archsim loaded it: set what it read at import
        config.CACHE_DIR = str(path)  # type: ignore[attr-defined]


def private_folders(path: Path) -> None:
    """`path` (a folder under archsim's cache root) made, with every folder from the root down to
    it made 0700: Numba keeps machine code there, which no one else may write."""
    root = cache_root()
    root.parent.mkdir(parents=True, exist_ok=True)
    for folder in (root, *(p for p in reversed(path.parents) if p.is_relative_to(root) and p != root), path):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)


def _numba_njit(options: dict | None = None):
    """numba.njit as archsim compiles with (disk cache, no GIL, and `options`), or None without
    numba."""
    _use_kernel_cache_dir()
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps --help working without it
        return None
    if _command_line[0]:
        _load_numba_without_blas()
    return numba.njit(cache=True, nogil=True, **(options or {}))


def _dispatch_all() -> None:
    """Load Numba, make every waiting kernel's dispatcher, and put each in place of its Kernel in
    the globals of every loaded module."""
    with _loading:
        if _loaded[0]:
            return
        compile_with = _numba_njit()
        for kernel in _waiting:
            make = _numba_njit(kernel.options) if kernel.options and compile_with else compile_with
            kernel.dispatcher = make(kernel.py_func) if make else kernel.py_func
        _waiting.clear()
        _loaded[0] = True
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for name, value in list(names.items()):
                if type(value) is Kernel:
                    names[name] = value.dispatcher
        while _on_load:
            _on_load.pop(0)()


def njit(func, options: dict | None = None):
    """`func` as a Numba kernel (compiled on its first call, cached on disk, with Numba's
    `options`) where numba is installed and enabled; else `func` unchanged."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return func
    kernel = None
    with _loading:  # not while another thread is making the dispatchers
        if not _loaded[0]:
            kernel = Kernel(func, options)
            _waiting.append(kernel)
            module = _ahead_module[0]
    if kernel is not None:
        _give_compiled(kernel, module)  # outside the lock (`_use_ahead_of_time`)
        return kernel
    compile_with = _numba_njit(options)
    return compile_with(func) if compile_with else func


_entries: set[str] = set()  # the entry kernels' qualified names (`njit_entry`)


def njit_entry(func):
    """`njit` of a kernel called from Python: compiled ahead of time too (archsim/aot.py), for
    the argument types its annotations name (I64Array, F64Array, F64Array2D, int, float, bool,
    or a NamedTuple of floats)."""
    _entries.add(f"{func.__module__}.{func.__qualname__}")
    return njit(func)


def entry_names() -> frozenset[str]:
    """The qualified names of the entry kernels defined so far (`njit_entry`)."""
    return frozenset(_entries)


def njit_inline(func):
    """`njit` whose calls from another kernel are inlined into it (Numba's `inline="always"`):
    a small helper that the event loop calls at every event then costs no call, nor the
    reference counting of the arrays it is passed."""
    return njit(func, {"inline": "always"})


def njit_ieee(func):
    """`njit` whose division by zero gives inf or NaN as IEEE 754 says (numpy's error model)
    instead of raising: no check before each division, so that a loop of them can run as vector
    instructions. The results of every division by a nonzero number are the same."""
    return njit(func, {"error_model": "numpy"})
