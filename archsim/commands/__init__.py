"""Subcommands of `archsim`, one module each: `add_parser(sub)` declares its flags, `run(args)`
does the work and returns the exit code. Heavy imports stay inside `run` so `--help` is instant."""

from __future__ import annotations

import argparse

COMMANDS = ("run", "op", "validate", "list", "compare", "serve", "sweep", "pareto")


def positive_int(flag: str):
    """argparse type: a whole number above zero, refused as `FLAG: why (got VALUE)`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: must be a whole number (got {text!r})") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{flag}: must be greater than zero (got {value})")
        return value
    return parse


class UsageError(Exception):
    """A bad command-line value found after parsing: reported as `archsim: error: ...`, exit 2."""
