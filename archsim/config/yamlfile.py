"""Read a YAML file into plain data while keeping the line of every key.

YAML's last-wins duplicate keys are refused; a file that is missing, a directory, empty, binary,
not YAML, too large or self-referencing (aliases) becomes a located `ConfigError`, never a
traceback. Every problem inside a file carries a line.

Scalars follow YAML 1.2 (the core schema, decimal numbers only): `1e3` is the float 1000.0,
`0132` is 132; `0x84`, `0o17`, `1:30`, `3_2`, `yes`, `on` and dates are text, not numbers,
booleans or timestamps as YAML 1.1 would read them. Sizes are bounded before any work:
the file (MAX_FILE_BYTES), its nodes, counted while the document is composed and again as
aliases expand (MAX_NODES), each value and key (MAX_SCALAR_CHARS, MAX_KEY_CHARS) and all
values with aliases expanded (MAX_EXPANDED_CHARS). A file that is not a mapping is not a
config file, and the error never quotes its content.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from archsim.errors import ConfigError, Problem

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlDoc:
    """The data of a YAML file and the 1-based line of each key path in it.

    A document merged from the files it extends (`merged`) is named by the extending file, and
    `files` names the file of each key path whose line lies in a base; `bases` lists those bases,
    the nearest first."""

    path: str
    data: Any
    lines: Mapping[KeyPath, int | None] = field(default_factory=dict)  # None: no line (a document given as data)
    files: Mapping[KeyPath, str] = field(default_factory=dict)  # key path -> its file, where not `path`
    bases: tuple[str, ...] = ()

    def where(self, key: KeyPath) -> tuple[str, int | None]:
        """(file, line) of `key`, or of its nearest parent that has a line."""
        key = tuple(key)
        while key:
            if key in self.lines:
                return self.files.get(key, self.path), self.lines[key]
            key = key[:-1]
        return self.path, self.lines.get((), 1)

    def line_of(self, key: KeyPath) -> int | None:
        """Line of `key`, or of its nearest parent that has one."""
        return self.where(key)[1]

    def problem(self, key: KeyPath, message: str) -> Problem:
        return Problem(*self.where(key), dotted(key), message)

    def edited(self, values: Sequence[tuple[KeyPath, Any]]) -> YamlDoc:
        """A copy with each value set at its key path (missing sections made), lines kept."""
        data = copy.deepcopy(self.data)
        for path, value in values:
            node = data
            for key in path[:-1]:
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            node[path[-1]] = value
        return replace(self, data=data)


def merged(base: YamlDoc, over: YamlDoc) -> YamlDoc:
    """`over`'s data laid over `base`'s, named by `over`: a mapping merges key by key, any other
    value (a scalar, a list) replaces the base's, and a key whose value is null is removed with
    all the base holds under it. Each key path keeps the file and line it came from; a mapping
    both hold is located at `over`'s key."""
    replaced: set[KeyPath] = set()  # key paths where `over` replaced or removed the base's value
    data = _laid_over(copy.deepcopy(base.data), over.data, (), replaced)
    lines: dict[KeyPath, int | None] = {}
    files: dict[KeyPath, str] = {}
    for key, line in base.lines.items():
        if not any(key[:i] in replaced for i in range(1, len(key) + 1)):
            lines[key], files[key] = line, base.files.get(key, base.path)
    for key, line in over.lines.items():
        lines[key], files[key] = line, over.files.get(key, over.path)
    files = {key: f for key, f in files.items() if f != over.path}
    return YamlDoc(over.path, data, lines, files, (base.path, *base.bases))


def _laid_over(base: dict, over: dict, key: KeyPath, replaced: set[KeyPath]) -> dict:
    """`base` (a copy of its own) with `over` laid over it in place."""
    for name, value in over.items():
        at = key + (name,)
        if isinstance(value, dict) and isinstance(base.get(name), dict):
            _laid_over(base[name], value, at, replaced)
            continue
        replaced.add(at)
        if value is None:
            base.pop(name, None)
        else:
            base[name] = copy.deepcopy(value)
    return base


def dotted(key: KeyPath) -> str:
    """('cores', 'sram', 'capacity') -> 'cores.sram.capacity'; list indices as [i]; odd names quoted."""
    out = ""
    for part in key:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = str(part)
        if not name or not name.isprintable() or any(c.isspace() or c in ".[]'\"" for c in name):
            name = repr(name)
        out += f".{name}" if out else name
    return out


MAX_FILE_BYTES = 1 << 20  # a config file is a few kB; anything this large is the wrong file
MAX_NODES = 100_000  # YAML nodes one file may hold, aliases expanded
MAX_SCALAR_CHARS = 64 << 10  # one value (a description is a paragraph)
MAX_KEY_CHARS = 256  # one key (keys are names or dotted paths)
MAX_EXPANDED_CHARS = 1 << 20  # all values together once aliases are expanded

NULL, BOOL, INT, FLOAT, STR = (f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "str"))
_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_DECIMAL_INT = re.compile(r"^[-+]?[0-9]+$")
_DECIMAL_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT = {".inf": float("inf"), ".nan": float("nan")}


class Resolver12(BaseResolver):
    """Implicit tags of YAML 1.2's core schema with decimal numbers only (no 0x, 0o, no
    sexagesimal `1:30`, no `_` in numbers, no yes/no/on/off booleans, no timestamps)."""


for _tag, _pattern, _first in (
    (NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    (INT, _DECIMAL_INT.pattern, list("-+0123456789")),
    (
        FLOAT,
        rf"{_DECIMAL_FLOAT.pattern}|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$",
        list("-+.0123456789"),
    ),
):
    Resolver12.add_implicit_resolver(_tag, re.compile(_pattern), _first)


class _TooLarge(Exception):
    """The document holds more than a reader limit allows; the message says which."""


class _Loader(Reader, Scanner, Parser, Composer, Resolver12):
    """PyYAML's reader, scanner, parser and composer with the YAML 1.2 resolver, counting nodes
    as they are composed so that a huge document stops at MAX_NODES, not after it is built."""

    def __init__(self, text: str):
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        Resolver12.__init__(self)
        self.nodes = 0

    def compose_node(self, parent, index):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooLarge(f"more than {MAX_NODES:,} YAML nodes")
        return super().compose_node(parent, index)


def _scalar(node: yaml.ScalarNode) -> Any:
    """The value of a scalar by its (YAML 1.2) tag; ValueError if it is not a value of that tag,
    LookupError for a tag a config never holds."""
    tag, text = node.tag, node.value
    if tag == STR:
        return text
    if tag == NULL:
        if text not in ("", "~", "null", "Null", "NULL"):
            raise ValueError(text)
        return None
    if tag == BOOL:
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    if tag == INT:
        if not _DECIMAL_INT.match(text.strip()):
            raise ValueError(text)
        return int(text)
    if tag == FLOAT:
        special = _SPECIAL_FLOAT.get(text.lstrip("+-").lower())
        if special is not None:
            return -special if text.startswith("-") else special
        if not _DECIMAL_FLOAT.match(text.strip()):
            raise ValueError(text)
        return float(text)
    raise LookupError(tag)


def _convert(
    node: yaml.Node,
    key: KeyPath,
    lines: dict,
    problems: list,
    path: str,
    active: set[int] | None = None,
    count: list[int] | None = None,
) -> Any:
    active = set() if active is None else active
    count = [0, 0] if count is None else count  # nodes, characters of values
    count[0] += 1
    if count[0] > MAX_NODES:
        raise _TooLarge(f"expands to more than {MAX_NODES:,} YAML nodes (nested too deeply or aliased too often)")
    line = node.start_mark.line + 1
    lines.setdefault(key, line)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if node.tag not in _COLLECTION_TAGS:
            problems.append(Problem(path, line, dotted(key), f"not valid YAML: unknown tag {node.tag!r}"))
            return None
        if id(node) in active:
            problems.append(Problem(path, line, dotted(key), "an alias refers to the node that contains it"))
            return None
        active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return _convert_mapping(node, key, lines, problems, path, active, count)
            return [_convert(v, key + (i,), lines, problems, path, active, count) for i, v in enumerate(node.value)]
        finally:
            active.discard(id(node))
    count[1] += len(node.value)
    if count[1] > MAX_EXPANDED_CHARS:
        raise _TooLarge(f"its values, aliases expanded, are longer than {MAX_EXPANDED_CHARS:,} characters")
    if len(node.value) > MAX_SCALAR_CHARS:
        problems.append(
            Problem(
                path, line, dotted(key), f"a value longer than {MAX_SCALAR_CHARS:,} characters is not a config value"
            )
        )
        return None
    try:
        return _scalar(node)
    except LookupError:
        problems.append(Problem(path, line, dotted(key), f"not valid YAML: unknown tag {node.tag!r}"))
    except ValueError:
        problems.append(
            Problem(
                path, line, dotted(key), f"cannot be read as {node.tag.rsplit(':', 1)[-1]} (got {node.value!r:.60})"
            )
        )
    return None


def _convert_mapping(
    node: yaml.MappingNode, key: KeyPath, lines: dict, problems: list, path: str, active: set[int], count: list[int]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for knode, vnode in node.value:
        kline = knode.start_mark.line + 1
        if not isinstance(knode, yaml.ScalarNode):
            problems.append(Problem(path, kline, dotted(key), "keys must be plain names"))
            continue
        name = knode.value
        if len(name) > MAX_KEY_CHARS:
            problems.append(
                Problem(path, kline, dotted(key), f"a key longer than {MAX_KEY_CHARS} characters (got {name!r:.40})")
            )
            continue
        if name in out:
            first = lines.get(key + (name,))
            problems.append(Problem(path, kline, dotted(key + (name,)), f"duplicate key (first given on line {first})"))
            continue
        lines[key + (name,)] = kline
        out[name] = _convert(vnode, key + (name,), lines, problems, path, active, count)
    return out


def _what(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint on one line ('expected a single document in the stream, but found ...')."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return f"{context}, {problem}" if context and problem.startswith("but ") else problem


def _line_at(text: str | bytes, offset: int) -> int:
    """1-based line of the character (or byte) at `offset`."""
    if isinstance(text, bytes):
        return text[:offset].count(b"\n") + 1
    return text[:offset].count("\n") + 1


def read_yaml(path: str | Path) -> YamlDoc:
    """Parse `path`; raise ConfigError naming the file for every way it can be unreadable."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise ConfigError.single(name, "", "no such file")
    if p.is_dir():
        raise ConfigError.single(name, "", "is a directory, not a YAML file")
    if not p.is_file():
        raise ConfigError.single(name, "", "is not a regular file (a device, pipe or socket)")
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError.single(name, "", f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError.single(name, "", f"is larger than {MAX_FILE_BYTES >> 20} MiB: not a config file", line=1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError.single(
            name, "", f"is not UTF-8 text (binary data at byte {exc.start})", line=_line_at(raw, exc.start)
        ) from None
    if "\x00" in text:
        raise ConfigError.single(
            name, "", "is not a text file (contains NUL bytes)", line=_line_at(text, text.index("\x00"))
        )
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except _TooLarge as exc:
        raise ConfigError.single(name, "", f"too large: {exc}", line=1) from None
    except yaml.reader.ReaderError as exc:
        code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise ConfigError.single(
            name,
            "",
            f"not valid YAML: control character #x{code:04x} is not allowed",
            line=_line_at(text, exc.position),
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise ConfigError.single(name, "", f"not valid YAML: {_what(exc)}", line=line) from None
    except RecursionError:
        raise ConfigError.single(name, "", "not valid YAML: nested too deeply", line=1) from None
    if node is None:
        raise ConfigError.single(name, "", "is empty", line=1)
    lines: dict[KeyPath, int] = {}
    problems: list[Problem] = []
    try:
        data = _convert(node, (), lines, problems, name)
    except _TooLarge as exc:
        raise ConfigError.single(name, "", f"too large: {exc}", line=1) from None
    except RecursionError:
        raise ConfigError.single(name, "", "not valid YAML: nested too deeply", line=1) from None
    if not isinstance(node, yaml.MappingNode):  # not a config file: say what it holds, never what it says
        raise ConfigError.single(
            name, "", f"must be a mapping of keys to values (`key: value` lines); {_holds(node)}", 1
        )
    if problems:
        raise ConfigError(problems)
    return YamlDoc(name, data, lines)


def read_value(text: str) -> Any:
    """A value given on the command line, read as a YAML 1.2 file would hold it (`8` a number,
    `8 Gbps` and `0x10` text, `[2, 4]` a list); the text itself if it is not YAML."""
    if len(text) > MAX_SCALAR_CHARS:
        return text
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
        if node is None:
            return None
        problems: list[Problem] = []
        data = _convert(node, (), {}, problems, "<value>")
    except (yaml.YAMLError, _TooLarge, RecursionError):
        return text
    return text if problems else data


def _holds(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "this file holds a list"
    return "this file holds a single value (text or a number), not keys"
