"""Read a YAML file into plain data while keeping the line of every key.

YAML's last-wins duplicate keys are refused; a file that is missing, a directory, empty, binary,
not YAML, too large or self-referencing (aliases) becomes a located `ConfigError`, never a
traceback. Every problem inside a file carries a line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from archsim.errors import ConfigError, Problem, quote

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlDoc:
    """The data of a YAML file and the 1-based line of each key path in it."""

    path: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, key: KeyPath) -> int | None:
        """Line of `key`, or of its nearest parent that has one."""
        key = tuple(key)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get((), 1)

    def problem(self, key: KeyPath, message: str) -> Problem:
        return Problem(self.path, self.line_of(key), dotted(key), message)


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


MAX_FILE_BYTES = 16 << 20  # a config file is a few kB; anything this large is the wrong file
MAX_NODES = 100_000  # YAML nodes one file may expand to (aliases can multiply a small file)


class _TooLarge(Exception):
    """The document expands to more than MAX_NODES nodes."""


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
    count = [0] if count is None else count
    count[0] += 1
    if count[0] > MAX_NODES:
        raise _TooLarge
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
    try:
        return yaml.SafeLoader.construct_object(_SCALAR_LOADER, node, deep=True)
    except yaml.YAMLError as exc:
        problems.append(Problem(path, line, dotted(key), f"not valid YAML: {_what(exc)}"))
    except (ValueError, TypeError, AttributeError, OverflowError):
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
        if name in out:
            first = lines.get(key + (name,))
            problems.append(Problem(path, kline, dotted(key + (name,)), f"duplicate key (first given on line {first})"))
            continue
        lines[key + (name,)] = kline
        out[name] = _convert(vnode, key + (name,), lines, problems, path, active, count)
    return out


_SCALAR_LOADER = yaml.SafeLoader("")
_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def _what(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint on one line ('expected a single document in the stream, but found ...')."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return f"{context}, {problem}" if context and problem.startswith("but ") else problem


def _line_at(text: str | bytes, offset: int) -> int:
    """1-based line of the character (or byte) at `offset`."""
    newline = b"\n" if isinstance(text, bytes) else "\n"
    return text[:offset].count(newline) + 1


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
        node = yaml.compose(text, Loader=yaml.SafeLoader)
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
    except (_TooLarge, RecursionError):
        raise ConfigError.single(
            name,
            "",
            f"too large: expands to more than {MAX_NODES:,} YAML nodes (nested too deeply or aliased too often)",
            line=1,
        ) from None
    if problems:
        raise ConfigError(problems)
    if not isinstance(data, dict):
        raise ConfigError.single(name, "", f"must be a mapping of keys to values (got {quote(data)})", 1)
    return YamlDoc(name, data, lines)
