"""A flag that asks the compiled kernels running now to return early, so that Ctrl-C or SIGTERM
stops a command within a second even inside a kernel of minutes.

A signal reaches Python's handler only between bytecodes of the main thread, never while a
compiled kernel (an event loop, an L2 walk) runs there. The kernels that can run long take
`FLAG` as an argument and read it (`asked`) every POLL_EVERY iterations of their loop (or once
per wave or event, where one costs more than that); where it is set they return at once, with
results that are not to be used. Compiled, `asked` is a relaxed atomic load, which the compiler
may neither hoist out of the loop nor merge with the last one: a plain read of an array that the
loop never writes would be read once, before the loop (the event loop did so).

The command line's watchdog thread (archsim/cli.py), woken by the signal itself, sets the flag;
the caller of such a kernel calls `check()` after it, which lets the signal's handler run (it
raises KeyboardInterrupt and clears the flag), or raises KeyboardInterrupt itself. The kernels
run without the GIL (Numba's `nogil`, and the module compiled ahead of time,
archsim/aot_build.py), so the watchdog can run while they do. Nothing else sets the flag: a
process that never has it set gets every kernel's full result, to the bit.
"""

from __future__ import annotations

import numpy as np

from archsim import jit

FLAG = np.zeros(1, np.int64)  # nonzero: the kernels running now return early
POLL_EVERY = 4096  # iterations between two reads of FLAG in a kernel's innermost long loop (a power of two)


def asked(stop: np.ndarray) -> bool:
    """Whether `stop` (FLAG, passed to a kernel) asks it to return: in a kernel, read anew at
    every call (`_compiled_asked`)."""
    return stop[0] != 0


def _compiled_asked() -> None:
    """Give `asked` its compiled form, an atomic load of `stop[0]` with relaxed ("monotonic")
    ordering: a plain load on x86 and ARM, but never hoisted nor merged. Once Numba is loaded,
    before any kernel compiles (`jit.when_loaded`); not in a process that only has the kernels
    compiled ahead of time (`jit.building()`: they are built in another process)."""
    if jit.building():
        return
    from numba import types
    from numba.extending import intrinsic, overload

    @intrinsic
    def load_relaxed(typingctx, stop):
        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            return builder.load_atomic(data, "monotonic", 8)

        return types.int64(stop), codegen

    @overload(asked)
    def asked_compiled(stop):
        return lambda stop: load_relaxed(stop) != 0


jit.when_loaded(_compiled_asked)


def request() -> None:
    """Ask the kernels running now (and any started before `clear`) to return early."""
    FLAG[0] = 1


def clear() -> None:
    FLAG[0] = 0


def requested() -> bool:
    return bool(FLAG[0])


def check() -> None:
    """After a kernel that reads FLAG: where it was set (the kernel may have returned early),
    KeyboardInterrupt. The signal handler that is due runs first, at the call of this function
    (it raises KeyboardInterrupt and clears the flag, archsim/cli.py); where none ran, the flag is
    cleared and KeyboardInterrupt raised here."""
    if FLAG[0]:
        _stopped()


def _stopped() -> None:
    # a Python call: a signal handler that is due runs at its first instruction
    clear()
    raise KeyboardInterrupt
