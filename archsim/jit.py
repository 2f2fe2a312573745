"""Optional JIT: Numba's `njit(cache=True)` when numba is importable, plain Python otherwise.

`NUMBA_DISABLE_JIT=1` makes numba's own decorator return the Python function, so the same
kernels run interpreted with identical results (tests check this).

In a process of archsim's own (the command line, `for_command_line()`), numba's array library
is loaded with `scipy.linalg` out of sight: numba imports it (0.3-0.4 s, a third of a small
command's time) only to offer BLAS to compiled `np.dot` and `np.linalg`, which no kernel of
archsim calls. Where `scipy.linalg` is already loaded (a user's Python session) nothing is hidden.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

_command_line = [False]


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


def njit(func):
    """Compile `func` with numba (cached on disk) if available; else return it unchanged."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return func
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps --help working without it
        return func
    if _command_line[0]:
        _load_numba_without_blas()
    return numba.njit(cache=True, nogil=True)(func)
