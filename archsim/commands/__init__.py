"""Subcommands of `archsim`, one module each: `add_parser(sub)` declares its flags, `run(args)`
does the work and returns the exit code. Heavy imports stay inside `run` so `--help` is instant."""

from __future__ import annotations

import argparse

COMMANDS = ("run", "op", "validate", "list", "compare", "serve", "sweep", "pareto", "scale")


MAX_FLAG_INT = 2**31 - 1  # as config counts (archsim.config.fields.MAX_COUNT)


def positive_int(flag: str):
    """argparse type for `flag`: a whole number above zero. argparse reports a refusal as
    `argument FLAG: why (got VALUE)`, so the message here does not repeat the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than zero (got {value})")
        if value > MAX_FLAG_INT:
            raise argparse.ArgumentTypeError(f"must be at most {MAX_FLAG_INT} (got {value})")
        return value

    parse.__name__ = flag  # argparse names the type in some messages
    return parse


class UsageError(Exception):
    """A bad command-line value found after parsing: reported as `archsim: error: ...`, exit 2."""


def require_plots() -> None:
    """Refuse `--plots` up front (before any simulation) when matplotlib is missing."""
    from archsim.report.plots import PlotsUnavailable, require_matplotlib

    try:
        require_matplotlib()
    except PlotsUnavailable as err:
        raise UsageError(f"--plots: {err}") from None
