"""Read a YAML file into plain data while keeping the line of every key.

YAML's last-wins duplicate keys are refused; a file that is missing, a directory, empty, binary
or not YAML becomes a located `ConfigError`, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from archsim.errors import ConfigError, Problem

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
    """('cores', 'sram', 'capacity') -> 'cores.sram.capacity'; list indices as [i]."""
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _convert(node: yaml.Node, key: KeyPath, lines: dict, problems: list, path: str) -> Any:
    lines[key] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode):
                problems.append(Problem(path, knode.start_mark.line + 1, dotted(key), "keys must be plain names"))
                continue
            name = knode.value
            if name in out:
                first = lines.get(key + (name,))
                problems.append(
                    Problem(path, knode.start_mark.line + 1, dotted(key + (name,)),
                            f"duplicate key (first given on line {first})")
                )
                continue
            out[name] = _convert(vnode, key + (name,), lines, problems, path)
            lines[key + (name,)] = knode.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(v, key + (i,), lines, problems, path) for i, v in enumerate(node.value)]
    return yaml.SafeLoader.construct_object(_SCALAR_LOADER, node, deep=True)


_SCALAR_LOADER = yaml.SafeLoader("")


def read_yaml(path: str | Path) -> YamlDoc:
    """Parse `path`; raise ConfigError naming the file for every way it can be unreadable."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise ConfigError.single(name, "", "no such file")
    if p.is_dir():
        raise ConfigError.single(name, "", "is a directory, not a YAML file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError.single(name, "", f"cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError.single(name, "", f"is not UTF-8 text (binary data at byte {exc.start})") from None
    if "\x00" in text:
        raise ConfigError.single(name, "", "is not a text file (contains NUL bytes)")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError([Problem(name, line, "", f"not valid YAML: {what}")]) from None
    if node is None:
        raise ConfigError.single(name, "", "is empty", line=1)
    lines: dict[KeyPath, int] = {}
    problems: list[Problem] = []
    try:
        data = _convert(node, (), lines, problems, name)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError([Problem(name, mark.line + 1 if mark else None, "", f"not valid YAML: {exc}")]) from None
    if problems:
        raise ConfigError(problems)
    if not isinstance(data, dict):
        raise ConfigError.single(name, "", f"must be a mapping of keys to values (got {type(data).__name__})", 1)
    return YamlDoc(name, data, lines)
