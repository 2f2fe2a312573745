"""Validated configurations kept on disk, so that a command-line process does not validate again
a hardware or workload document an earlier one validated: it then imports neither pydantic nor
the schemas (0.15-0.2 s of a small command's start-up). Only archsim's own command line
(`for_command_line`) reads and writes it: a Python session imports the schemas once for all its
loads, and one that sets values in a loop (`with_params`) would leave a file per value.

An entry is keyed by a digest (SHA-256) of archsim's version (`opcache.code_version`: its version
number and the text of every source file, so a changed schema or builder never reads what the
old one built), the kind of document, the file it was read from (recorded in what is built), the
files it extends, its data as read and merged over theirs (config/extends.py: so editing a base
changes the key of every file that extends it), and the values set on it by dotted path, each
path with its value (`key`). Only a document that validated is kept, with the paths set on it, so
a hit stands for a document and paths that passed every check before; a document that fails is
validated, and its problems reported, every time.

An entry is data, never code: JSON of the frozen record built (`System` or `Workload`, each
record an object of its fields, an enum by its value, a tuple a list) and of the resolved
configuration, beside its key, kind and source. It is read back through the records' own
constructors, led by their fields' annotations (`decode`): nothing in the file names a class or
a module. What is read is checked as the op cache's entries are (archsim/opcache.py): a regular
file of at most MAX_ENTRY_BYTES in folders that are the user's own, of this FORMAT, recorded under
the key, kind and source it is read for, holding a record of the kind's type whose chip or model
is the one its configuration names, every field of its annotated type and every number finite.
Anything else is a miss, and the document is validated again.

Layout: DIR/<version>/validated/<key>.json beside the op cache (archsim/opcache.py: the same
DIR, folder checks, `--no-cache`, ARCHSIM_NO_CACHE); each entry is written (0600) to a temporary
file and renamed into place, so a reader sees a whole entry or none. One that cannot be written
is not kept: the memo never fails a load.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import enum
import hashlib
import json
import math
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any

FOLDER = "validated"
FORMAT = 1  # of an entry: another is a miss
MAX_ENTRY_BYTES = 1 << 20  # the largest shipped system is some 10 kB as an entry; a file past this is a miss
_active = [False]  # this process is archsim's command line
_asked: dict[str, tuple[str, str]] = {}  # key -> (kind, source) it was computed for in this process


def for_command_line() -> None:
    """This process is archsim's command line: keep and read back what validation builds."""
    _active[0] = True


def key(kind: str, source: str, data: Any, params: Any, bases: tuple[str, ...] = ()) -> str | None:
    """The key of document `data` of `kind`, read from `source` and merged over the files
    `bases`, with `params` set on it; None where the memo is not used (outside the command line,
    or with the cache off)."""
    from archsim import opcache  # (not at import: the command line imports this before it knows its command)

    if not (_active[0] and opcache.enabled()):
        return None
    text = repr((opcache.code_version(), kind, source, bases, data, params))
    entry = hashlib.sha256(text.encode()).hexdigest()[:32]
    _asked[entry] = (kind, source)
    return entry


def _folders() -> tuple[Path, Path, Path]:
    from archsim import opcache

    root = opcache.cache_dir()
    version = root / opcache.code_version()
    return root, version, version / FOLDER


def _path(entry: str) -> Path:
    return _folders()[2] / f"{entry}.json"


def get(entry: str | None) -> tuple[Any, dict] | None:
    """What was kept under `entry` (a `key` of this process): (the record, its resolved
    configuration), or None (a miss: missing, unreadable, or not what the key stands for)."""
    if entry is None or entry not in _asked:
        return None
    from archsim import opcache

    if not opcache.trusted_folders(*_folders()):
        return None
    data = opcache.read_regular(_path(entry), MAX_ENTRY_BYTES)
    if data is None:
        return None
    kind, source = _asked[entry]
    try:
        doc = json.loads(data, parse_constant=opcache.reject_constant)
    except (ValueError, RecursionError):
        return None
    return from_document(doc, entry, kind, source)


def put(entry: str | None, value: tuple[Any, dict]) -> None:
    """Keep `value` (the record and its resolved configuration) under `entry` (a `key` of this
    process; whole or not at all)."""
    if entry is None or entry not in _asked:
        return
    import tempfile

    from archsim import opcache

    kind, source = _asked[entry]
    try:
        text = json.dumps(document(entry, kind, source, value), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):  # a value no entry can hold: not kept
        return
    path = _path(entry)
    if opcache.make_folders(path.parent) is None:
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{entry}.", suffix=".tmp")  # 0600
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError:  # a read-only or full disk
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# --- the entry as JSON, and back --------------------------------------------------------------------


def _record_type(kind: str) -> type:
    if kind == "hardware":
        from archsim.hardware import System

        return System
    from archsim.graph.model import Workload

    return Workload


def document(entry: str, kind: str, source: str, value: tuple[Any, dict]) -> dict:
    """The JSON document of an entry."""
    record, config = value
    if not isinstance(record, _record_type(kind)) or not isinstance(config, dict):
        raise TypeError("not a record of its kind")
    record_doc = encode(record, _record_type(kind))
    return {"format": FORMAT, "key": entry, "kind": kind, "source": source, "record": record_doc, "config": config}


def from_document(doc: object, entry: str, kind: str, source: str) -> tuple[Any, dict] | None:
    """(record, configuration) of an entry's document, or None where it is not one of this format
    recorded for `entry`, `kind` and `source`, or its record is not what its configuration names."""
    if not (isinstance(doc, dict) and type(doc.get("format")) is int and doc["format"] == FORMAT):
        return None
    if (doc.get("key"), doc.get("kind"), doc.get("source")) != (entry, kind, source):
        return None
    config = doc.get("config")
    if not isinstance(config, dict):
        return None
    try:
        record = decode(doc.get("record"), _record_type(kind))
    except (TypeError, ValueError, KeyError, RecursionError):
        return None
    if getattr(record, "source", source) != source or not _names_match(record, config, kind):
        return None
    return record, config


def _names_match(record: Any, config: dict, kind: str) -> bool:
    """Whether the record is the chip (hardware: its name, chip count and cores) or the workload
    (its model's name, layers, hidden size and heads, its scenario) its configuration names."""
    if kind == "hardware":
        cores = config.get("cores")
        return (
            config.get("name") == record.chip.name
            and config.get("chips", 1) == record.chips
            and isinstance(cores, dict)
            and cores.get("count") == record.chip.cores
        )
    model, scenario = config.get("model"), config.get("scenario")
    if not (isinstance(model, dict) and isinstance(scenario, dict)):
        return False
    m, s = record.model, record.scenario
    return (
        config.get("name") == m.name
        and (model.get("layers"), model.get("hidden"), model.get("heads")) == (m.layers, m.hidden, m.heads)
        and (scenario.get("batch"), scenario.get("prompt_tokens"), scenario.get("output_tokens"))
        == (s.batch, s.prompt_tokens, s.output_tokens)
    )


SUBCLASS = "@"  # the key naming a record of a subclass of its field's type (module:name, archsim's own)

# A field's type as `decode` reads it: a class; (UNION, types); (TUPLE, type): a tuple of any
# length; (FIXED, types): a tuple of one value per type
UNION, TUPLE, FIXED = "union", "tuple", "fixed"


def encode(value: Any, spec: Any = None) -> Any:
    """A frozen record as JSON: an object of its fields, an enum by its value, a tuple as a list;
    numbers, text, booleans and None as they are (TypeError for anything else). A record of a
    subclass of its field's type (`spec`: a `Fabric` where an `Interconnect` is due) names its
    class under SUBCLASS."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        out = {name: encode(getattr(value, name), t) for name, t in _fields(cls).items()}
        if spec is not None and spec is not cls and not (isinstance(spec, tuple) and cls in spec[1]):
            out[SUBCLASS] = f"{cls.__module__}:{cls.__qualname__}"
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        item = spec[1] if isinstance(spec, tuple) and spec[0] == TUPLE else None
        return [encode(v, item) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{type(value).__name__} is not kept in an entry")


def decode(data: Any, spec: Any) -> Any:
    """The value of field type `spec` (`_fields`) that `encode` wrote as `data`, built by the
    records' constructors; TypeError or ValueError where `data` is not one."""
    if isinstance(spec, tuple):
        kind, of = spec
        if kind == UNION:
            for option in of:
                with contextlib.suppress(TypeError, ValueError):
                    return decode(data, option)
        elif isinstance(data, list) and kind == TUPLE:
            return tuple(decode(v, of) for v in data)
        elif isinstance(data, list) and kind == FIXED and len(data) == len(of):
            return tuple(decode(v, t) for v, t in zip(data, of, strict=True))
        raise TypeError(f"not a {kind}")
    if isinstance(spec, type) and (dataclasses.is_dataclass(spec) or _is_protocol(spec)):
        return _decode_record(data, spec)
    if issubclass(spec, enum.Enum):
        return spec(data)
    if spec is float:  # an integer where the record held one: kept as it was, so its repr is
        if type(data) in (int, float) and math.isfinite(data):
            return data
    elif spec is type(None):
        if data is None:
            return None
    elif type(data) is spec and spec in (int, str, bool):
        return data
    raise TypeError(f"not a {spec.__name__}")


def _decode_record(data: Any, cls: type) -> Any:
    if isinstance(data, dict) and SUBCLASS in data:
        data = dict(data)
        cls = _subclass(data.pop(SUBCLASS), cls)
    if _is_protocol(cls):  # a field typed by what it provides (a main-memory model) names its record
        raise TypeError(f"not a {cls.__name__}")
    fields = _fields(cls)
    if not isinstance(data, dict) or set(data) != set(fields):
        raise TypeError(f"not a {cls.__name__}")
    return cls(**{name: decode(data[name], spec) for name, spec in fields.items()})


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _subclass(name: object, base: type) -> type:
    """The record class `name` (module:qualname) if it is a dataclass of archsim's own modules
    deriving from `base`; TypeError otherwise. Its module is imported only if it is archsim's."""
    import importlib.util

    if not isinstance(name, str) or name.count(":") != 1:
        raise TypeError("not a record's name")
    module, _, qualname = name.partition(":")
    if not (module.startswith("archsim.") and all(part.isidentifier() for part in module.split("."))):
        raise TypeError("not a record of archsim's")
    if importlib.util.find_spec(module) is None:
        raise TypeError("no such module")
    cls = getattr(importlib.import_module(module), qualname, None) if qualname.isidentifier() else None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{name} is not a {base.__name__}")
    # a protocol (runtime-checkable) is met by the members a class has; a class, by derivation
    has = {f.name for f in dataclasses.fields(cls)} | set(dir(cls))
    if not (_protocol_members(base) <= has if _is_protocol(base) else issubclass(cls, base)):
        raise TypeError(f"{name} is not a {base.__name__}")
    return cls


def _protocol_members(protocol: type) -> set[str]:
    """The names a protocol asks for (its own attributes, less what every protocol has)."""
    return {name for name in vars(protocol) if not name.startswith("_")}


_FIELDS: dict[type, dict[str, Any]] = {}


def _fields(cls: type) -> dict[str, Any]:
    """The types of a record's constructor fields, read once per process from their annotations
    (text under `from __future__ import annotations`: a name, `X | Y`, `tuple[X, ...]`), names
    looked up in the record's module. Read here, not by `typing.get_type_hints`, which takes
    several times as long (the memo is there to save a command's start-up)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        namespace = vars(sys.modules[cls.__module__])
        fields = _FIELDS[cls] = {f.name: _spec(f.type, namespace) for f in dataclasses.fields(cls) if f.init}
    return fields


def _spec(annotation: Any, namespace: dict) -> Any:
    if not isinstance(annotation, str):  # an annotation evaluated already
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is None:
            return annotation
        annotation = " | ".join(map(_text, args)) if origin in (typing.Union, types.UnionType) else _text(annotation)
    options = _split(annotation, "|")
    if len(options) > 1:
        return (UNION, tuple(_spec(o, namespace) for o in options))
    text = annotation.strip()
    if text == "None":
        return type(None)
    if text.startswith("tuple[") and text.endswith("]"):
        items = _split(text[6:-1], ",")
        if len(items) == 2 and items[1].strip() == "...":
            return (TUPLE, _spec(items[0], namespace))
        return (FIXED, tuple(_spec(a, namespace) for a in items))
    found = namespace.get(text, getattr(builtins, text, None))
    if not isinstance(found, type):
        raise TypeError(f"annotation {text!r} is not one an entry keeps")
    return found


def _text(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


def _split(text: str, sep: str) -> list[str]:
    """`text` cut at each `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]
