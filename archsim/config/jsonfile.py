"""Read a JSON input file (a Hugging Face config.json, a validate case file) strictly and boundedly.

The file must be a regular file of at most MAX_JSON_BYTES (checked before it is read) holding
UTF-8 JSON as RFC 8259 defines it: no `NaN` or `Infinity`, no key given twice (Python's reader
would keep the last), no number longer than MAX_NUMBER_DIGITS digits and nesting at most
MAX_JSON_DEPTH deep. Every way a file fails becomes a `ConfigError` naming it, with a line where
there is one; a file that is not JSON is never quoted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from archsim.errors import ConfigError
from archsim.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH

MAX_NUMBER_DIGITS = 100  # a config value; 5,000 digits would also pass Python's own limit check


class _Refused(ValueError):
    """A JSON document RFC 8259 or a bound refuses; `key` locates it when known."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"key {key!r:.60} is given twice (JSON readers would keep only the last)", key)
        out[key] = value
    return out


def _constant(name: str):
    raise _Refused(f"{name} is not a JSON number (write a finite number, or leave the field out)")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _Refused(f"a number of {len(text.lstrip('-')):,} digits is not a config value")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS + 10:
        raise _Refused(f"a number of {len(text):,} characters is not a config value")
    return float(text)


def _depth(text: str) -> int:
    """Deepest nesting of [ and { outside strings."""
    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def strict_loads(text: str):
    """One JSON value, with the rules of `read_json` (ValueError naming what is wrong)."""
    if _depth(text) > MAX_JSON_DEPTH:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} deep")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant, parse_int=_int, parse_float=_float)
    except json.JSONDecodeError as err:
        raise ValueError(err.msg) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def line_of(text: str, key: str) -> int | None:
    """Line of the first `"key":` in the text (JSON keeps no positions after parsing)."""
    match = re.search(rf'"{re.escape(key)}"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def read_json(path: str | Path, what: str = "JSON file") -> tuple[Any, str]:
    """The parsed document and its text; ConfigError naming `path` if it cannot be one."""
    p, name = Path(path), str(path)
    if not p.exists():
        raise ConfigError.single(name, "", "no such file")
    if p.is_dir():
        raise ConfigError.single(name, "", f"is a directory, not a {what}")
    if not p.is_file():
        raise ConfigError.single(name, "", "is not a regular file (a device, pipe or socket)")
    size = p.stat().st_size
    if size > MAX_JSON_BYTES:
        raise ConfigError.single(name, "", f"is {size:,} bytes, larger than {MAX_JSON_BYTES >> 20} MiB: not a {what}")
    try:
        raw = p.read_bytes()[: MAX_JSON_BYTES + 1]
    except OSError as err:
        raise ConfigError.single(name, "", f"cannot be read ({err.strerror or err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError.single(name, "", f"is not UTF-8 text (binary data at byte {err.start})") from None
    if _depth(text) > MAX_JSON_DEPTH:
        raise ConfigError.single(name, "", f"not a {what}: nested more than {MAX_JSON_DEPTH} deep", line=1)
    try:
        data = json.loads(
            text.removeprefix("\ufeff"),
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_int=_int,
            parse_float=_float,
        )
    except json.JSONDecodeError as err:
        raise ConfigError.single(name, "", f"not valid JSON: {err.msg} (column {err.colno})", err.lineno) from None
    except _Refused as err:
        line = line_of(text, err.key) if err.key else None
        raise ConfigError.single(name, "", f"not valid JSON: {err}", line) from None
    except (ValueError, RecursionError) as err:
        raise ConfigError.single(name, "", f"not valid JSON: {type(err).__name__}") from None
    return data, text
