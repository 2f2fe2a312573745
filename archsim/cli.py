"""`archsim` command line: parse, call the API, render. Exit 0 ok, 1 failed run, 2 bad input,
130 interrupted. Each subcommand lives in `archsim.commands`; heavy imports happen inside them
so `archsim --help` is instant."""

from __future__ import annotations

import _thread
import argparse
import importlib
import importlib.util
import os
import signal
import sys

from archsim.commands import COMMANDS, UsageError
from archsim.errors import ConfigError, DoesNotFitError


class _Parser(argparse.ArgumentParser):
    """argparse without abbreviated flags (`--trace` must not quietly mean `--trace-out`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse's own messages, exit 2
        self.print_usage(sys.stderr)
        print(f"archsim: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from archsim import __version__

    p = _Parser(prog="archsim", description="Cycle-approximate accelerator simulator for LLM inference.")
    p.add_argument("--version", action="version", version=f"archsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        if importlib.util.find_spec(f"archsim.commands.{name}") is not None:
            importlib.import_module(f"archsim.commands.{name}").add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    ctrl_c = _CtrlC().install()
    try:
        args = build_parser().parse_args(argv)
        return importlib.import_module(f"archsim.commands.{args.command}").run(args)
    except ConfigError as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        return 2
    except (DoesNotFitError, UsageError) as err:
        print(f"archsim: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("archsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `archsim list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as err:
        if ctrl_c.pressed or _caused_by_interrupt(err):  # Ctrl-C inside Numba surfaces as other errors
            print("archsim: interrupted", file=sys.stderr)
            return 130
        if isinstance(err, OSError) and err.filename is not None:  # an output path that cannot be written
            print(f"archsim: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
            return 2
        if os.environ.get("ARCHSIM_DEBUG"):  # a bug: one line for the user, the traceback on request
            raise
        print(
            f"archsim: internal error: {type(err).__name__}: {err} "
            "(a bug in archsim; set ARCHSIM_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    finally:
        ctrl_c.restore()


class _CtrlC:
    """Ctrl-C while `archsim` runs: KeyboardInterrupt, which the runner turns into a summary of
    what was simulated; a second Ctrl-C exits at once.

    Numba's compiler (first run, cold cache) runs finalizers and ctypes callbacks that swallow
    a KeyboardInterrupt ('Exception ignored in ...'); such a lost interrupt is delivered again
    to the main thread, where it can stop the run.
    """

    MAX_REDELIVERIES = 100

    def __init__(self) -> None:
        self.pressed = False
        self.redelivering = 0
        self.redelivered = 0
        self.previous_handler = None
        self.previous_hook = sys.unraisablehook

    def install(self) -> _CtrlC:
        try:
            self.previous_handler = signal.signal(signal.SIGINT, self.on_signal)
        except ValueError:  # not the main thread: leave signals alone
            return self
        sys.unraisablehook = self.on_unraisable
        return self

    def restore(self) -> None:
        if self.previous_handler is not None:
            signal.signal(signal.SIGINT, self.previous_handler)
            sys.unraisablehook = self.previous_hook

    def on_signal(self, signum, frame):
        if self.redelivering:
            self.redelivering -= 1
        elif self.pressed:
            os.write(2, b"archsim: interrupted\n")
            os._exit(130)
        self.pressed = True
        raise KeyboardInterrupt

    def on_unraisable(self, hook_args) -> None:
        if isinstance(hook_args.exc_value, KeyboardInterrupt) and self.redelivered < self.MAX_REDELIVERIES:
            self.redelivered += 1
            self.redelivering += 1
            _thread.interrupt_main(signal.SIGINT)  # handled at the main thread's next instruction
            return
        self.previous_hook(hook_args)


def _caused_by_interrupt(err: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the causes of `err` (a C extension that was running
    when Ctrl-C came reports it as 'returned a result with an exception set')."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False
