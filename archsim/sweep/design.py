"""One design point as the normal loaders see it: base hardware and workload files with values
set at dotted paths, validated by the same schemas as `archsim run`, built into a System and a
Workload, and keyed by the hash of the resolved configuration (as `archsim run --json` keys it).

Overrides go into the YAML data before validation, so a swept value is checked exactly as it
would be in a file: `'456 KiB'` parsed, `0` refused, an SRAM too small for a tile reported.

A spec may name shipped chips and workloads, files under its own folder, and files under the
folders given to `archsim sweep --allow-path`; never any other file (a spec is often someone
else's, and its error column would carry what the file says).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archsim.config.resolved import ResolvedConfig
from archsim.errors import ConfigError
from archsim.graph.model import Workload
from archsim.hardware import System

if TYPE_CHECKING:  # the loaders and schemas are imported where designs are built: a worker, which
    from archsim.config.yamlfile import YamlDoc  # only evaluates them, never imports them (0.2 s)

KeyPath = tuple[str, ...]
Override = tuple[KeyPath, Any]  # (path below `hardware` or `workload`, value as a config file would hold it)


@dataclass(frozen=True)
class Design:
    """A resolved point: what to simulate, and the hash of its resolved configuration."""

    system: System
    workload: Workload
    config_hash: str


def config_value(value: Any, unit: str | None) -> Any:
    """The value as a config file holds it: `1.5` with unit GHz -> '1.5 GHz'; 4.0 -> 4."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if unit is None:
        return value
    return f"{value!r} {unit}" if isinstance(value, float) else f"{value} {unit}"


@lru_cache(maxsize=64)
def base_doc(path: str, root: str) -> YamlDoc:
    """A base file laid over the files it extends, read once per process."""
    from archsim.config.loader import read_config

    return read_config(path, root)


def build_hardware(path: str, overrides: tuple[Override, ...]) -> tuple[System, dict]:
    """The System and its resolved configuration; ConfigError naming the bad keys. A total such
    as hbm.bandwidth is set as the physical values that give it (archsim/config/derived.py)."""
    from archsim.config.derived import expanded
    from archsim.config.loader import build, system_from_doc

    doc = base_doc(path, "hardware")
    return system_from_doc(doc.edited(expanded("hardware", doc, overrides, "sweep", build)))


def build_workload(path: str, overrides: tuple[Override, ...]) -> tuple[Workload, dict]:
    from archsim.config.loader import validate_doc, workload_from_cfg
    from archsim.config.workload_schema import WorkloadCfg

    cfg = validate_doc(base_doc(path, "workload").edited(overrides), WorkloadCfg)
    return workload_from_cfg(cfg, path), cfg.model_dump(mode="json")


class DesignCache:
    """Builds designs, reusing the hardware and the workload when only the other one changed;
    the most recent MAX_ENTRIES of each are kept (a million-point sweep holds a few MB)."""

    MAX_ENTRIES = 1024

    def __init__(self) -> None:
        self._hardware: OrderedDict[tuple, tuple[System, dict] | ConfigError] = OrderedDict()
        self._workload: OrderedDict[tuple, tuple[Workload, dict] | ConfigError] = OrderedDict()

    def design(
        self,
        hw_path: str,
        hw_over: tuple[Override, ...],
        wl_path: str,
        wl_over: tuple[Override, ...],
        options: dict | None = None,
    ) -> Design:
        """The design, or ConfigError whose problems name keys as `hardware.x.y` / `workload.x.y`;
        its hash covers the run `options` it is evaluated with."""
        system, hw_cfg = _cached(self._hardware, (hw_path, hw_over), build_hardware, "hardware")
        workload, wl_cfg = _cached(self._workload, (wl_path, wl_over), build_workload, "workload")
        return Design(system, workload, ResolvedConfig(hw_cfg, wl_cfg, options or {}).hash)


def _cached(cache: OrderedDict, key: tuple, build, root: str):
    try:
        hit = cache[key]
        cache.move_to_end(key)
    except KeyError:
        try:
            hit = build(*key)
        except ConfigError as err:
            hit = ConfigError(
                [type(p)(p.file, p.line, f"{root}.{p.key}" if p.key else root, p.message) for p in err.problems]
            )
        cache[key] = hit
        if len(cache) > DesignCache.MAX_ENTRIES:
            cache.popitem(last=False)
    if isinstance(hit, ConfigError):
        raise hit
    return hit


def resolve_file(value: str, kind: str, spec_dir: Path, allowed: tuple[str, ...] = ()) -> str:
    """A file named in a spec: a shipped name (`h200`), or a path relative to the spec's folder
    that lies under it, under the shipped folder of `kind`, or under one of the `allowed`
    folders, as does every file it extends; ConfigError for anything else."""
    from archsim.config.loader import outside_base, resolve_path, shipped_dir

    if "/" not in value and not value.endswith((".yaml", ".yml")):
        return resolve_path(value, kind)
    target = (spec_dir / value).resolve()
    roots = [spec_dir.resolve(), shipped_dir(kind).resolve(), *(Path(a).resolve() for a in allowed)]
    if not any(target == root or root in target.parents for root in roots):
        raise ConfigError.single(
            value,
            "",
            f"is outside the spec's folder ({spec_dir}): a spec names shipped {kind} files, files under its "
            "own folder, or files under a folder given with --allow-path",
        )
    if not target.is_file():
        raise ConfigError.single(value, "", "no such file" if not target.exists() else "is not a regular file")
    outside = outside_base(str(target), "hardware" if kind == "hw_configs" else "workload", tuple(roots))
    if outside is not None:
        raise ConfigError.single(
            value,
            "",
            f"extends {outside}, outside the spec's folder ({spec_dir}), the shipped {kind} files and the "
            "folders given with --allow-path",
        )
    return str(target)
