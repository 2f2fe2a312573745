"""Optional JIT: Numba's `njit(cache=True)` when numba is importable, plain Python otherwise.

`NUMBA_DISABLE_JIT=1` makes numba's own decorator return the Python function, so the same
kernels run interpreted with identical results (tests check this).
"""

from __future__ import annotations

import os


def njit(func):
    """Compile `func` with numba (cached on disk) if available; else return it unchanged."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return func
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps --help working without it
        return func
    return numba.njit(cache=True, nogil=True)(func)
