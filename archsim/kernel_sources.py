"""Which source files archsim's compiled kernels are built from, a digest of them, and where the
compiled kernels are kept (Numba's cache: archsim/jit.py; the module compiled ahead of time:
archsim/aot.py). Imports nothing of archsim, so that both can ask it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

KERNEL_CACHE = "numba"  # under $XDG_CACHE_HOME/archsim (or ~/.cache/archsim): one folder per kernel digest


def kernel_sources_digest(root: Path | None = None) -> str:
    """A digest of every source file a compiled kernel is built from: the modules of the package
    at `root` (default: this one, read once a process) that define kernels and the archsim
    modules they import names from (whose constants and records compilation freezes into the
    machine code)."""
    return _sources_digest(root) if root is not None else _own_sources_digest()


@functools.lru_cache(maxsize=1)
def _own_sources_digest() -> str:
    return _sources_digest(Path(__file__).resolve().parent, package_sources())


@functools.lru_cache(maxsize=1)
def package_sources() -> dict[Path, bytes]:
    """The bytes of every source file of this package, by path, read once a process: this
    digest and the op cache's version (archsim/opcache.py) are both of them."""
    return {p: p.read_bytes() for p in Path(__file__).resolve().parent.rglob("*.py")}


def _sources_digest(root: Path, files: dict[Path, bytes] | None = None) -> str:
    if files is None:
        files = {p: p.read_bytes() for p in root.rglob("*.py")}
    # as read_text gives them: UTF-8, every line ending a newline
    texts = {p: b.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n") for p, b in files.items()}
    kernels = {p: text for p, text in texts.items() if "@njit" in text}
    sources = set(kernels)
    for text in kernels.values():
        for module in re.findall(r"^from (archsim(?:\.\w+)+) import", text, re.M):
            base = root.parent.joinpath(*module.split("."))
            sources.update(p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file())
    h = hashlib.sha256()
    for path in sorted(sources):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(files[path] if path in files else path.read_bytes())
    return h.hexdigest()[:16]


def kernel_cache_dir() -> Path:
    """Where Numba keeps archsim's compiled kernels: a folder of their own sources' digest.

    Numba checks a cached kernel against the time stamp of the file that defines it only, not of
    the files whose kernels and constants it calls: a changed `sharing.py` would leave the event
    loop of `kernels.py` running the old fair share, and the op cache (keyed by the new sources)
    storing its results. A folder per digest of every such file makes any change compile anew."""
    return cache_root() / KERNEL_CACHE / kernel_sources_digest()


def cache_root() -> Path:
    """$XDG_CACHE_HOME/archsim, else ~/.cache/archsim."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "archsim"
