"""Files that extend others: `extends: NAME_OR_PATH` at the top of a chip, system or workload file
takes every key of that base file, and the keys below it override the base's, mapping by mapping
(`yamlfile.merged`: a mapping merges key by key, a scalar or a list replaces the base's, and
`key: null` removes the base's key, so that the schema's default applies or a required key is
missing).

The base is a shipped name (`h200`, as `--hw` finds it) or a path relative to the extending
file's folder, or absolute; a document given as data (the Python API) finds paths from the
working directory. A base may extend another in turn. The merged document keeps the file and line
of each key, so a bad value is reported where it is written: an inherited one in its base, an
override in the extending file. An `extends` that is not a name, a base that is missing, one that
extends the file back (or itself), and a base of the other kind (a workload under a chip) are
each one problem located at the `extends` line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from archsim.config.yamlfile import YamlDoc, merged, read_yaml
from archsim.errors import ConfigError, quote

KEY = "extends"
MAX_DEPTH = 32  # files above one: a real chain is two or three deep
# Top-level keys that only one kind of file holds, each required by its schema (a test checks): a
# base holding one of the other kind's is a file of the wrong kind.
ONLY_IN = {"hardware": ("clock", "cores"), "workload": ("model", "scenario")}


def with_bases(
    doc: YamlDoc, root: str, shipped: Callable[[str], str], chain: tuple[tuple[str, str], ...] = ()
) -> YamlDoc:
    """`doc` laid over the files it extends, its `extends` key gone; `doc` itself if it extends
    none. `root`: "hardware" or "workload"; `shipped(name)`: the path of the shipped file of
    that name (ConfigError if none); `chain`: (identity, path) of the files extending `doc`."""
    if not isinstance(doc.data, dict) or KEY not in doc.data:
        return doc
    data = dict(doc.data)
    name = data.pop(KEY)
    if not isinstance(name, str) or not name.strip():
        raise _at(doc, f"expected a shipped {root} name or a file's path (got {quote(name)})")
    if len(chain) >= MAX_DEPTH:
        raise _at(doc, f"more than {MAX_DEPTH} files extend one another")
    path = _base_path(doc, name, shipped)
    here, there = _identity(doc.path), _identity(path)
    if there == here:
        raise _at(doc, f"a file cannot extend itself (got {quote(name)})")
    seen = [ident for ident, _ in chain]
    if there in seen:
        loop = [shown for _, shown in chain[seen.index(there) :]] + [doc.path, path]
        raise _at(doc, f"circular: {' extends '.join(loop)}")
    base = read_yaml(path)
    other = next(kind for kind in ONLY_IN if kind != root)
    held = next((key for key in ONLY_IN[other] if isinstance(base.data, dict) and key in base.data), None)
    if held is not None:
        raise _at(doc, f"{path} is a {other} file (it has `{held}`), not a {root} file")
    base = with_bases(base, root, shipped, (*chain, (here, doc.path)))
    return merged(base, replace(doc, data=data))


def outside_base(path: str, shipped: Callable[[str], str], roots: tuple[Path, ...]) -> str | None:
    """The first file `path` extends, or its bases in turn, that lies outside every folder of
    `roots` (resolved), found without reading it; None if there is none. Any other problem of the
    chain is left to loading it."""
    for _ in range(MAX_DEPTH + 1):
        try:
            doc = read_yaml(path)
            name = doc.data.get(KEY) if isinstance(doc.data, dict) else None
            if not isinstance(name, str) or not name.strip():
                return None
            path = _base_path(doc, name, shipped)
        except ConfigError:
            return None
        target = Path(path).resolve()
        if not any(target == root or root in target.parents for root in roots):
            return path
    return None


def _base_path(doc: YamlDoc, name: str, shipped: Callable[[str], str]) -> str:
    """The file `name` names from `doc`: a path from `doc`'s folder, else a shipped name."""
    path = Path(doc.path).parent / name  # (an absolute `name` stays itself)
    try:
        if Path(name).is_absolute() or "/" in name or Path(name).suffix in (".yaml", ".yml") or path.exists():
            found = path.exists()
        else:
            return shipped(name)
    except ConfigError as err:
        raise _at(doc, f"{quote(name)}: {err.problems[0].message}") from None
    except OSError as exc:  # a name too long for the file system
        raise _at(doc, f"{quote(name)} cannot name a file ({exc.strerror or exc})") from None
    if not found:
        raise _at(doc, f"no such file: {path}")
    return str(path)


def _identity(path: str) -> str:
    """The file itself, however it is named (`./a.yaml`, `../x/a.yaml`, a link)."""
    return os.path.realpath(path)


def _at(doc: YamlDoc, message: str) -> ConfigError:
    return ConfigError([doc.problem((KEY,), message)])
