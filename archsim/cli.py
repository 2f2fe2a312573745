"""`archsim` command line: parse, call the API, render. Exit 0 ok, 1 failed run, 2 bad input,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM; 129 for SIGHUP). Each subcommand lives in
`archsim.commands`; heavy imports happen inside them so `archsim --help` is instant. Everything
printed here passes through `printable`, so no input can put a control character on the
terminal.

Standard output that cannot be written (closed, a full disk, a reader that left: `| head`)
never stops a command: what it prints is dropped from then on, the files it was asked for are
written all the same, and it ends with one line saying so and exit 1."""

from __future__ import annotations

import _thread
import argparse
import contextlib
import importlib
import importlib.util
import io
import os
import signal
import sys
import threading
import warnings

# One BLAS thread, set before numpy is first imported (by `stopping`): numpy's OpenBLAS otherwise
# starts a thread per core at import, and their spinning costs a short command some 0.1 s of CPU
# (0.92 -> 0.78 s for Llama-3-70B TP 8 on 2 cores) and every sweep worker as much again. archsim
# calls no BLAS routine that a thread would speed up. A value the user set is kept.
for _blas in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_blas, "1")

from archsim import stopping  # noqa: E402
from archsim.commands import COMMANDS, UsageError  # noqa: E402
from archsim.errors import (  # noqa: E402
    ConfigError,
    DoesNotFitError,
    OutputError,
    RefusedError,
    caused_by_interrupt,
    printable,
)


class _Parser(argparse.ArgumentParser):
    """argparse without abbreviated flags (`--trace` must not quietly mean `--trace-out`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse's own messages, exit 2
        self.print_usage(sys.stderr)
        print(f"archsim: error: {printable(message)}", file=sys.stderr)
        raise SystemExit(2)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of `only` (the one a command line names: the other
    commands' modules are then not imported)."""
    from archsim import __version__

    p = _Parser(prog="archsim", description="Cycle-approximate accelerator simulator for LLM inference.")
    p.add_argument("--version", action="version", version=f"archsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS if only is None else (only,):
        if importlib.util.find_spec(f"archsim.commands.{name}") is not None:
            importlib.import_module(f"archsim.commands.{name}").add_parser(sub)
    return p


def _named_command(argv: list[str]) -> str | None:
    """The subcommand `argv` starts with, if it is one (else every parser is built, for help and
    for argparse's message naming the choices)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    streams = _Streams().install()
    try:
        code = _main(argv)
    except SystemExit as exc:  # argparse's --help and --version (0), its errors (2)
        streams.restore()
        if exc.code in (0, None) and streams.out.failure is not None:
            raise SystemExit(streams.ended(0)) from None
        raise
    finally:
        streams.restore()
    return streams.ended(code)


def _main(argv: list[str] | None) -> int:
    ctrl_c = _CtrlC().install()
    shown_warning = warnings.showwarning
    warnings.showwarning = _show_warning  # a library's warning may quote a name (matplotlib's glyphs)
    try:
        words = sys.argv[1:] if argv is None else argv
        args = build_parser(_named_command(words)).parse_args(words)
        code = importlib.import_module(f"archsim.commands.{args.command}").run(args)
        return ctrl_c.exit_code() if code == 130 else code
    except ConfigError as err:  # a refusal found past the loader has no file: archsim names it
        for problem in err.problems:
            _say(str(problem) if problem.file else f"archsim: error: {problem}")
        return 2
    except (DoesNotFitError, UsageError, OutputError, RefusedError) as err:
        _say(f"archsim: error: {err}")
        return 2
    except KeyboardInterrupt:
        _say(f"archsim: {ctrl_c.stopped_by()}")
        return ctrl_c.exit_code()
    except BrokenPipeError:  # `archsim list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as err:
        if ctrl_c.pressed or caused_by_interrupt(err):  # Ctrl-C inside Numba surfaces as other errors
            _say(f"archsim: {ctrl_c.stopped_by()}")
            return ctrl_c.exit_code()
        if isinstance(err, OSError) and err.filename is not None:  # an output path that cannot be written
            _say(f"archsim: error: {err.filename}: {err.strerror or err}")
            return 2
        if os.environ.get("ARCHSIM_DEBUG"):  # a bug: one line for the user, the traceback on request
            raise
        _say(
            f"archsim: internal error: {type(err).__name__}: {err} "
            "(a bug in archsim; set ARCHSIM_DEBUG=1 for the traceback)"
        )
        return 1
    finally:
        ctrl_c.restore()
        warnings.showwarning = shown_warning


def console_main() -> int:
    """The `archsim` console script and `python -m archsim`: `main` in a process of its own."""
    from archsim import commands, jit
    from archsim.config import memo

    _standard_fds_open()
    jit.for_command_line()
    memo.for_command_line()
    commands.for_command_line()
    _CtrlC.watchdog = True
    return exit_now(main())


def _standard_fds_open() -> None:
    """Standard input, output and error that were closed before archsim started are opened on
    /dev/null, so that no file archsim opens takes their place (a `--json` file as descriptor 1
    would receive what is printed); `sys.stdout` stays None, which `_Streams` reports."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


def exit_now(code: int) -> int:
    """End the process with `code` without the interpreter's teardown, where nothing needs it.

    Tearing down the modules of a run (numba, llvmlite and their compiled code, numpy's arrays,
    every cached plan) takes 0.1-0.5 s of CPU after the work is done: more than the simulation
    of a small command. The process ends here as the interpreter would end it, less that: the
    `atexit` handlers run (temporary folders, logging, multiprocessing's pools), then standard
    output and error are flushed, then `os._exit`. Every file archsim writes is closed when it is
    written. `code` is returned to the interpreter's own exit instead where it has more to do:
    where another thread that is not a daemon still runs (a user's hook, a Dask client), which
    that exit waits for, and where a profiler, tracer or coverage tool watches the process
    (`python -m cProfile -m archsim ...`), which reports after the command returns."""
    if _watched() or any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return code
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # (None: closed before the start)
                stream.flush()
        except (OSError, ValueError):  # a reader that left (`| head`), or a stream closed
            code = code or 1
    os._exit(code)


def _watched() -> bool:
    """Whether a profiler, tracer or coverage tool watches this process."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: tools that need no trace function
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def _say(line: str) -> None:
    """One message on stderr, control characters escaped (messages quote what users typed);
    nothing where stderr is closed or cannot be written."""
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError, ValueError):
        print(printable(line), file=sys.stderr, flush=True)


class _Guarded:
    """A standard stream as a command writes to it: the first write or flush that fails (the
    stream closed, before the start or since; a full disk; a reader that left) is kept as
    `failure`, and what is written from then on is dropped, so the command goes on to write its
    files. Everything else is the stream's own (`isatty`, `fileno`, `encoding`: rich asks)."""

    def __init__(self, stream, name: str):
        self.stream, self.name = stream, name
        self.failure: str | None = None

    def write(self, text: str) -> int:
        if self.failure is None:
            if self.stream is None:
                self.failure = f"{self.name} is closed"
            else:
                try:
                    return self.stream.write(text)
                except (OSError, ValueError) as err:
                    self._failed(err)
        return len(text)

    def flush(self) -> None:
        if self.failure is None and self.stream is not None:
            try:
                self.stream.flush()
            except (OSError, ValueError) as err:
                self._failed(err)

    def _failed(self, err: Exception) -> None:
        if isinstance(err, BrokenPipeError):
            self.failure = f"{self.name}: its reader left (broken pipe)"
        elif isinstance(err, OSError) and err.strerror:
            self.failure = f"{self.name}: {err.strerror}"
        else:
            self.failure = f"{self.name} is closed"
        with contextlib.suppress(OSError, ValueError, AttributeError):  # what is still buffered goes nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())

    def isatty(self) -> bool:
        return self.failure is None and self.stream is not None and self.stream.isatty()

    def fileno(self) -> int:
        if self.stream is None:
            raise io.UnsupportedOperation(f"{self.name} is closed")
        return self.stream.fileno()

    def __getattr__(self, name: str):
        if self.stream is None:
            raise AttributeError(name)
        return getattr(self.stream, name)


class _Streams:
    """stdout and stderr guarded while a command runs (`_Guarded`), and the end it comes to."""

    def install(self) -> _Streams:
        self.saved = sys.stdout, sys.stderr
        self.out = sys.stdout = _Guarded(sys.stdout, "stdout")
        self.err = sys.stderr = _Guarded(sys.stderr, "stderr")
        return self

    def restore(self) -> None:
        """Flush what the command wrote and put the streams back (once; a second call does nothing)."""
        if sys.stdout is self.out:
            self.out.flush()
            sys.stdout = self.saved[0]
        if sys.stderr is self.err:
            self.err.flush()
            sys.stderr = self.saved[1]

    def ended(self, code: int) -> int:
        """`code`, or 1 where stdout failed (one line on stderr says how) in a command that
        would have ended well."""
        if self.out.failure is None:
            return code
        _say(f"archsim: error: {self.out.failure}: output cut short (files asked for are written)")
        return code or 1


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    text = warnings.formatwarning(message, category, filename, lineno, line)
    (file or sys.stderr).write(printable(text, newlines=True))


def _forget_wakeup() -> None:
    """In a forked child (a sweep's worker): no wakeup pipe, so that a signal the child gets
    (a pool ending its workers) is not taken for one the watchdog of its parent must act on."""
    with contextlib.suppress(ValueError):  # forked from another thread than the main one: none there
        signal.set_wakeup_fd(-1)


class _CtrlC:
    """Ctrl-C while `archsim` runs: KeyboardInterrupt, which the runner turns into a summary of
    what was simulated; a second Ctrl-C exits at once. SIGTERM and SIGHUP stop a run the same
    way (temporary files are removed on the way out) and exit with 128 + the signal.

    Numba's compiler (first run, cold cache) runs finalizers and ctypes callbacks that swallow
    a KeyboardInterrupt ('Exception ignored in ...'); such a lost interrupt is delivered again
    to the main thread, where it can stop the run. It is delivered from another thread once the
    hook has returned: delivered from the hook itself, the handler would run inside the hook,
    whose exceptions are ignored, and the interrupt would be lost again.

    A signal that lands while a compiled kernel runs (an event loop, an L2 walk: minutes on a
    large program) reaches Python only when the kernel returns. In the command-line process
    (`watchdog`) a thread woken by the signal itself (Python's wakeup file descriptor; kernels
    run without the GIL) asks the kernels to return (archsim/stopping.py: the long ones read the
    flag every few thousand iterations), so that the handler runs within milliseconds and the
    command stops as it does between kernels, with its summary. Where the handler has still not
    run STOP_WITHIN_S later (a kernel that does not read the flag), the thread says so and ends
    the process with the same exit code.
    """

    MAX_REDELIVERIES = 100
    REDELIVERY_DELAY_S = 0.01
    STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    STOP_WITHIN_S = 0.8
    watchdog = False  # the console script's process: a thread ends a run stuck in a kernel
    forks_forget = False  # whether a forked child drops the wakeup pipe (`_forget_wakeup`)

    def __init__(self) -> None:
        self.pressed = False
        self.signum = signal.SIGINT
        self.redelivering = 0
        self.redelivered = 0
        self.previous_handlers: dict = {}
        self.previous_hook = sys.unraisablehook
        self.ended = False  # restored: an interrupt still owed to the run is not delivered
        self.redelivery = threading.Lock()
        self.wakeup: tuple[int, int] | None = None  # the signals' pipe (read, write) under `watchdog`
        self.previous_wakeup = -1
        self.handled = threading.Event()  # the Python handler ran: the run is stopping by itself
        self.stopping = threading.RLock()  # the watchdog's request to the kernels and the handler's clearing

    def install(self) -> _CtrlC:
        try:
            for signum in self.STOPPING:
                self.previous_handlers[signum] = signal.signal(signum, self.on_signal)
        except ValueError:  # not the main thread: leave signals alone
            return self
        sys.unraisablehook = self.on_unraisable
        if self.watchdog:
            self._start_watchdog()
        return self

    def _start_watchdog(self) -> None:
        """A daemon thread that reads the signals Python's C handler writes to a pipe
        (`signal.set_wakeup_fd`) and stops the process where the Python handler does not run."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            self.previous_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(read_fd)
            os.close(write_fd)
            return
        self.wakeup = (read_fd, write_fd)
        if not _CtrlC.forks_forget:  # a forked worker's signals are its own, not this process's
            os.register_at_fork(after_in_child=_forget_wakeup)
            _CtrlC.forks_forget = True
        threading.Thread(target=self._watch, args=(read_fd,), name="archsim-stop", daemon=True).start()

    def _watch(self, read_fd: int) -> None:
        while True:
            got = os.read(read_fd, 64)
            if not got or self.ended:  # `restore` wrote its byte
                os.close(read_fd)
                return
            signums = [b for b in got if b in self.STOPPING]
            if not signums:
                continue
            with self.stopping:  # not after the handler cleared the flag: it would stop the summary's kernels
                if not self.handled.is_set():
                    stopping.request()
            if self.handled.wait(self.STOP_WITHIN_S) or self.ended:
                continue
            self.signum = signal.Signals(signums[0])
            os.write(2, f"archsim: {self.stopped_by()} (inside a compiled kernel)\n".encode())
            os._exit(self.exit_code())

    def restore(self) -> None:
        with self.redelivery:  # an interrupt owed to the run is not delivered to its caller
            self.ended = True
        stopping.clear()
        if self.wakeup is not None:
            signal.set_wakeup_fd(self.previous_wakeup)
            os.write(self.wakeup[1], b"\0")  # wakes the thread, which sees `ended`
            os.close(self.wakeup[1])
            self.wakeup = None
        for signum, handler in self.previous_handlers.items():
            signal.signal(signum, handler)
        if self.previous_handlers:
            sys.unraisablehook = self.previous_hook
        self.previous_handlers = {}

    def exit_code(self) -> int:
        return 130 if self.signum == signal.SIGINT else 128 + self.signum

    def stopped_by(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else f"stopped by {signal.Signals(self.signum).name}"

    def on_signal(self, signum, frame):
        with self.stopping:
            self.handled.set()
            stopping.clear()  # the run stops from here; what it still computes runs in full
        if self.redelivering:
            self.redelivering -= 1
        elif self.pressed:
            os.write(2, f"archsim: {self.stopped_by()}\n".encode())
            os._exit(self.exit_code())
        else:
            self.signum = signum
        self.pressed = True
        raise KeyboardInterrupt

    def _redeliver(self) -> None:
        with self.redelivery:
            if not self.ended:
                _thread.interrupt_main(signal.SIGINT)  # handled at the main thread's next instruction

    def on_unraisable(self, hook_args) -> None:
        if isinstance(hook_args.exc_value, KeyboardInterrupt) and self.redelivered < self.MAX_REDELIVERIES:
            self.redelivered += 1
            self.redelivering += 1
            timer = threading.Timer(self.REDELIVERY_DELAY_S, self._redeliver)
            timer.daemon = True
            timer.start()
            return
        self.previous_hook(hook_args)
