"""Errors that reach the user: every config or input problem, located by file and line.

A `ConfigError` carries every problem found in one pass, so a user fixes a file once, not
once per run. The CLI prints each as `file:line: key.path: message` and exits with code 2.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where it is and what is wrong."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


def quote(value: object, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr on one line, shortened to `limit` characters."""
    if hasattr(value, "isoformat") and not isinstance(value, str):  # YAML dates and timestamps
        value = value.isoformat()
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigError(Exception):
    """Bad input: one or more located problems. Exit code 2 at the CLI."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, file: str, key: str, message: str, line: int | None = None) -> ConfigError:
        return cls([Problem(file, line, key, message)])


class DoesNotFitError(Exception):
    """The workload's weights, KV cache and activations exceed the memory of the system."""
