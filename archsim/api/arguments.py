"""The checks of the Python API's arguments: the same bounds and the same messages as the
command line's flags (archsim/commands/__init__.py, serve_flags.py), each refusal a
`ConfigError` located at the call and the keyword (`archsim.run: tp: must be greater than zero
(got 0)`), so that no argument, of any type or value, reaches the simulator unchecked and no
internal exception reaches the caller.

A count is a whole number (a bool is not one) from its low bound to `limits.MAX_COUNT` unless
told; a rate or a fraction a finite number in its range; a duration a number of seconds or a
string with its unit as the flags take it (`"200ms"`, `"0.2 s"`); a path a string or a
`os.PathLike`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from numbers import Integral, Real
from typing import Any

from archsim import limits
from archsim.errors import ConfigError, Problem, quote


def refusal(where: str, key: str, why: str) -> ConfigError:
    """The ConfigError of one argument: `where: key: why`."""
    return ConfigError([Problem(where, None, key, why)])


def whole(where: str, key: str, value: object, low: int = 1, high: int = limits.MAX_COUNT) -> int:
    """A whole number from `low` to `high`, as `positive_int`/`bounded_int` take a flag."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise refusal(where, key, f"must be a whole number (got {quote(value)})")
    n = int(value)
    if n < low:
        raise refusal(
            where, key, f"must be greater than zero (got {n})" if low == 1 else f"must be at least {low:,} (got {n})"
        )
    if n > high:
        raise refusal(where, key, f"must be at most {high:,} (got {n})")
    return n


def number(where: str, key: str, value: object, low: float, high: float, low_open: bool = False) -> float:
    """A finite number from `low` to `high` (above `low` if `low_open`), as `bounded_float`."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise refusal(where, key, f"must be a number (got {quote(value)})")
    v = float(value)
    if not math.isfinite(v):
        raise refusal(where, key, f"must be at most {high:g} (got {quote(value)})")
    if v < low or (low_open and v == low):
        raise refusal(where, key, f"must be {'greater than' if low_open else 'at least'} {low:g} (got {quote(value)})")
    if v > high:
        raise refusal(where, key, f"must be at most {high:g} (got {quote(value)})")
    return v


def duration_s(where: str, key: str, value: object) -> float:
    """Seconds: a number, or a string with its unit as `--slo-ttft` takes it (`"200ms"`); above
    zero and at most `limits.MAX_SLO_S` (a day)."""
    if isinstance(value, str):
        from archsim.units import Dim, parse_quantity

        try:
            float(value)
        except ValueError:
            pass
        else:
            raise refusal(where, key, f"a duration needs its unit, e.g. 200ms or 0.2s (got {quote(value)})")
        try:
            seconds = parse_quantity(value.replace(" ", ""), Dim.SECONDS)
        except ValueError as err:
            raise refusal(where, key, str(err)) from None
        if not seconds > 0:
            raise refusal(where, key, f"must be greater than zero (got {quote(value)})")
        if seconds > limits.MAX_SLO_S:
            raise refusal(where, key, f"must be at most {limits.MAX_SLO_S:,.0f} s, a day (got {quote(value)})")
        return seconds
    return number(where, key, value, 0.0, limits.MAX_SLO_S, low_open=True)


def path(where: str, key: str, value: object) -> str:
    """A file or folder path: a non-empty string or an `os.PathLike`, without NUL characters."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise refusal(where, key, f"must be a path, a string or an os.PathLike (got {type(value).__name__})")
    if not value.strip():
        raise refusal(where, key, "must not be empty")
    if "\0" in value:
        raise refusal(where, key, f"cannot name a file: it holds a NUL character (got {quote(value)})")
    return value


def name_or_path(where: str, key: str, value: object) -> str | Mapping:
    """A shipped name, a path, or a mapping holding what such a file would."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, (str, os.PathLike)):
        return path(where, key, value)
    raise refusal(where, key, f"must be a shipped name, a path or a mapping (got {type(value).__name__})")


def mapping(where: str, key: str, value: object) -> Mapping[str, Any]:
    """A mapping of dotted paths to values (None: none)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise refusal(where, key, f"must be a mapping of dotted paths to values (got {type(value).__name__})")
    return value


def flag(where: str, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise refusal(where, key, f"must be True or False (got {quote(value)})")
    return value


def callback(where: str, key: str, value: object) -> Callable | None:
    if value is not None and not callable(value):
        raise refusal(where, key, f"must be a function or None (got {type(value).__name__})")
    return value


def choice(where: str, key: str, value: object, known: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in known:
        raise refusal(where, key, f"must be one of {', '.join(known)} (got {quote(value)})")
    return value


def paths(where: str, key: str, value: object) -> tuple[object, ...]:
    """A list or tuple of paths (a lone string is refused: its letters are not paths)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise refusal(where, key, f"must be a list of paths (got {quote(value)})")
    return tuple(value)


def names(where: str, key: str, value: object) -> tuple[str, ...]:
    """A list or tuple of strings (a lone string is refused: its letters are not names)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise refusal(where, key, f"must be a list of names (got {quote(value)})")
    return tuple(value)
