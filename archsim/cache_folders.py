"""Whether a folder may hold what archsim reads back as its own (the op cache, the config memo,
the kernels compiled ahead of time): only one that is the user's own and writable by no one else,
as ssh checks its own. What a folder another user can change holds may have been planted, so it
is refused (`CacheFolderError`) with the fix in the message. Imports nothing of archsim but
archsim/errors.py, so that archsim/aot.py can ask it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from archsim.errors import ConfigError, printable


class CacheFolderError(ConfigError):
    """A cache folder owned by another user or writable by others: what it holds may have been
    planted there, so archsim refuses to read it (exit 2 at the command line), saying the fix."""


def folder_problem(folder: Path) -> str | None:
    """Why `folder` may not hold a cache (owned by another user, writable by group or others,
    not a folder), or None (also when it is not there: it will be made 0700)."""
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    return owner_problem(st)


def file_problem(path: Path) -> str | None:
    """Why the file at `path` may not be loaded as code (another's, writable by others), or None."""
    try:
        st = os.stat(path)
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    return owner_problem(st)


def owner_problem(st: os.stat_result) -> str | None:
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def unsafe(why: str) -> bool:
    """Whether a problem of `folder_problem` is one of trust (another user may have written
    there), not of use (not a folder, unreadable)."""
    return why.startswith(("is owned by", "is writable by"))


def refusal(path: Path, why: str, setting: str = "ARCHSIM_CACHE_DIR", off: str = "--no-cache") -> CacheFolderError:
    """The refusal of `path` because of `why`, with the fix."""
    fix = (
        f"chmod {'700' if path.is_dir() else 'go-w'} {path}"
        if "writable" in why
        else f"set {setting} to a folder of your own"
    )
    return CacheFolderError(
        printable(
            f"cache folder {path} {why}: archsim reads nothing from a folder others can change (fix: {fix}; or {off})"
        )
    )
