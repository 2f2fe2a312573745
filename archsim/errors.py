"""Errors that reach the user: every config or input problem, located by file and line.

A `ConfigError` carries every problem found in one pass, so a user fixes a file once, not
once per run. The CLI prints each as `file:line: key.path: message` and exits with code 2.
Every refusal of archsim, wherever it is found (an argument of the Python API, a run that does
not fit, an output path, a results folder), is a `ConfigError`: one `except archsim.ConfigError`
catches them all. Those found past the loader carry one message, with no file or line.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# Format characters a terminal or an editor acts on: bidirectional embeddings, overrides and
# isolates (the "Trojan Source" characters) and the direction marks.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where it is and what is wrong."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        if not where:  # a refusal found past the loader: its message says what it is about
            return f"{self.key}: {self.message}" if self.key else self.message
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


def printable(text: str, newlines: bool = False) -> str:
    """`text` with every control character (C0, DEL, C1) and bidirectional control escaped as
    Python writes it (`\\x1b`, `\\u202e`), so that a name or a message can never move the cursor,
    retitle a window or reorder a line. Newlines are kept if `newlines`; a tab is kept."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == "\t" or (ch == "\n" and newlines):
            out.append(ch)
        elif ch in _BIDI or unicodedata.category(ch) == "Cc":
            out.append(repr(ch)[1:-1] if ch != "\\" else ch)
        else:
            out.append(ch)
    return "".join(out)


def quote(value: object, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr on one line, shortened to `limit` characters."""
    if hasattr(value, "isoformat") and not isinstance(value, str):  # YAML dates and timestamps
        value = value.isoformat()
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigError(Exception):
    """Bad input: one or more located problems, or one message. Exit code 2 at the CLI."""

    def __init__(self, problems: list[Problem] | str):
        if isinstance(problems, str):  # a refusal past the loader (and a copy made by pickle)
            problems = [Problem("", None, "", problems)]
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, file: str, key: str, message: str, line: int | None = None) -> ConfigError:
        return cls([Problem(file, line, key, message)])


class DoesNotFitError(ConfigError):
    """The workload's weights, KV cache and activations exceed the memory of the system."""


class OutputError(ConfigError):
    """An output path that cannot be written as asked (a folder, a device, a full disk, an input
    of the run): one line naming the user's path, exit code 2 at the CLI."""


class RefusedError(ConfigError, ValueError):
    """An input archsim refuses before any work, saying why: exit code 2 at the CLI."""


class TooLargeError(RefusedError):
    """An input whose work would exceed a bound of `archsim.limits`: refused before the work,
    with the number and the limit."""


class UnsupportedError(RefusedError):
    """An op the chip cannot run as asked (a matrix format its units have no rate for): refused
    rather than costed as some other format."""


def caused_by_interrupt(err: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the causes of `err` (a C extension that was running
    when Ctrl-C came reports it as 'returned a result with an exception set')."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def reraise_interrupt(err: BaseException) -> None:
    """Raise KeyboardInterrupt if `err` is a Ctrl-C in disguise (`caused_by_interrupt`): for a
    handler that would otherwise take it for an error of its own."""
    if caused_by_interrupt(err):
        raise KeyboardInterrupt from None
