"""Subcommands of `archsim`, one module each: `add_parser(sub)` declares its flags, `run(args)`
does the work and returns the exit code. Heavy imports stay inside `run` so `--help` is instant."""

from __future__ import annotations

import argparse
import contextlib
import gc

from archsim.limits import MAX_COUNT

COMMANDS = ("run", "explain", "op", "validate", "list", "compare", "serve", "sweep", "pareto", "scale")

_own_process = [False]  # archsim's command line in a process of its own (cli.console_main)


def for_command_line() -> None:
    """This process is archsim's command line (`started` may freeze what starting made)."""
    _own_process[0] = True


def started() -> None:
    """A command has its modules imported and its inputs loaded: in a process of its own, what
    was made so far (modules, validated configurations) lives as long as the process, and is
    moved out of the cyclic garbage collector's way (gc.freeze), whose full passes would walk it
    all again while the simulation allocates. No value changes; in a process that calls `main`
    (a test, a notebook) nothing is frozen."""
    if _own_process[0]:
        gc.freeze()


def positive_int(flag: str, high: int = MAX_COUNT):
    """argparse type for `flag`: a whole number above zero, at most `high`. argparse reports a
    refusal as `argument FLAG: why (got VALUE)`, so the message here does not repeat the flag."""
    return bounded_int(flag, 1, high)


def bounded_int(flag: str, low: int, high: int):
    """argparse type for `flag`: a whole number (decimal digits) from `low` to `high`."""

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-")
        if not digits.isdigit() or not digits.isascii() or len(digits) > 30:
            raise argparse.ArgumentTypeError(f"must be a whole number (got {text[:40]!r})") from None
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(
                f"must be greater than zero (got {value})" if low == 1 else f"must be at least {low:,} (got {value})"
            )
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:,} (got {value})")
        return value

    parse.__name__ = flag  # argparse names the type in some messages
    return parse


def bounded_float(flag: str, low: float, high: float, low_open: bool = False):
    """argparse type for `flag`: a finite number from `low` to `high` (above `low` if
    `low_open`); decimal notation only (no `inf`, `nan`, `0x1p3`, `1_0`)."""
    import math
    import re

    decimal = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

    def parse(text: str) -> float:
        if not decimal.match(text.strip()):
            raise argparse.ArgumentTypeError(f"must be a number (got {text[:40]!r})")
        value = float(text)
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be at most {high:g} (got {text[:40]})")
        if value < low or (low_open and value == low):
            word = "greater than" if low_open else "at least"
            raise argparse.ArgumentTypeError(f"must be {word} {low:g} (got {text[:40]})")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:g} (got {text[:40]})")
        return value

    parse.__name__ = flag
    return parse


def shown(text: object) -> str:
    """A name, id or path as rich prints it: control characters escaped and markup shown as
    the text it is (a chip named `[/]` or `\\x1b[2J` is printed as those characters)."""
    from rich.markup import escape

    from archsim.errors import printable

    return escape(printable(str(text)))


def check_outputs(args, flags: tuple[str, ...], folders: tuple[str, ...] = (), inputs: tuple[str | None, ...] = ()):
    """Refuse bad output paths (`args.<flag>`) before any simulation: folders, devices, FIFOs,
    unwritable places, two outputs at one path, or an output that is one of the `inputs` (paths
    or shipped names)."""
    from archsim.config.loader import resolve_path
    from archsim.errors import ConfigError
    from archsim.report.export import check_outputs as check

    paths = []
    for given in inputs:
        if not given:
            continue
        paths.append(given)
        for kind in ("hw_configs", "workloads"):
            with contextlib.suppress(ConfigError):
                paths.append(resolve_path(given, kind))
    named = [(f"--{f.replace('_', '-')}", getattr(args, f, None)) for f in flags]
    check(named, tuple(paths), folders=tuple(f"--{f.replace('_', '-')}" for f in folders))


class UsageError(Exception):
    """A bad command-line value found after parsing: reported as `archsim: error: ...`, exit 2."""


def require_plots(flag: str = "--plots", hint: str = "") -> None:
    """Refuse `flag` up front (before any simulation) when matplotlib is missing. (Names with
    `$` are drawn as written: report.plots escapes every text of a figure as it is drawn.)"""
    from archsim.report.plots import PlotsUnavailable, require_matplotlib

    try:
        require_matplotlib()
    except PlotsUnavailable as err:
        raise UsageError(f"{flag}: {err}{hint}") from None
