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
path with its value. Only a document that validated is kept, with the paths set on it, so a hit
stands for a document and paths that passed every check before; a document that fails is
validated, and its problems reported, every time. The value is the frozen record built (`System` or `Workload`) and the resolved
configuration, pickled: records of archsim's own classes, read back equal to what was built.
The folder is the user's own, as Numba's cache of compiled kernels (pickled too) is.

Layout: DIR/<version>/validated/<key>.pickle beside the op cache (archsim/opcache.py: the same
DIR, `--no-cache`, ARCHSIM_NO_CACHE); each entry is written to a temporary file and renamed into
place, so a reader sees a whole entry or none. An entry that cannot be read (missing, cut short,
from another Python) is a miss; one that cannot be written is not kept: the memo never fails a
load.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

FOLDER = "validated"
_active = [False]  # this process is archsim's command line


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
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _path(entry: str) -> Path:
    from archsim import opcache

    return opcache.cache_dir() / opcache.code_version() / FOLDER / f"{entry}.pickle"


def get(entry: str | None) -> Any | None:
    """What was kept under `entry` (a `key`), or None."""
    if entry is None:
        return None
    try:
        with _path(entry).open("rb") as f:
            return pickle.load(f)
    except Exception:  # missing, cut short, or unreadable (pickle raises many types): validate instead
        return None


def put(entry: str | None, value: Any) -> None:
    """Keep `value` under `entry` (a `key`; whole or not at all)."""
    if entry is None:
        return
    import tempfile

    path = _path(entry)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{entry}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        tmp = None
    except (OSError, pickle.PicklingError, TypeError, AttributeError):  # a read-only disk, or not picklable
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
