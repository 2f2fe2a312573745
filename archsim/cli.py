"""`archsim` command line: parse, call the API, render. Exit 0 ok, 1 failed run, 2 bad input,
130 interrupted. Each subcommand lives in `archsim.commands`; heavy imports happen inside them
so `archsim --help` is instant."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from archsim.commands import COMMANDS, UsageError
from archsim.errors import ConfigError, DoesNotFitError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own messages, exit 2
        self.print_usage(sys.stderr)
        print(f"archsim: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="archsim", description="Cycle-approximate accelerator simulator for LLM inference.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        if importlib.util.find_spec(f"archsim.commands.{name}") is not None:
            importlib.import_module(f"archsim.commands.{name}").add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
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
        if isinstance(err, OSError) and err.filename is not None:  # an output path that cannot be written
            print(f"archsim: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
            return 2
        if os.environ.get("ARCHSIM_DEBUG"):  # a bug: one line for the user, the traceback on request
            raise
        print(f"archsim: internal error: {type(err).__name__}: {err} "
              "(a bug in archsim; set ARCHSIM_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
