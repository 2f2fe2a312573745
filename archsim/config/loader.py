"""Load hardware and workload files into frozen objects; every problem located by file:line.

`load_system("h200")` and `load_system("hw_configs/h200.yaml")` both work: a bare name is
looked up among the shipped configs. Validation errors from the schemas are mapped back to the
line of the offending key, with a did-you-mean for misspelt keys.

pydantic and the schemas are imported by the functions that validate, not with this module:
a process whose files were validated before (archsim/config/memo.py) never imports them.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from archsim.config import extends
from archsim.config.yamlfile import KeyPath, YamlDoc, dotted, read_yaml
from archsim.errors import ConfigError, Problem, quote
from archsim.graph.model import Fusion, Scenario, Workload
from archsim.hardware import (
    L2,
    Chip,
    Core,
    Dataflow,
    DType,
    FoldMode,
    Hbm,
    Interconnect,
    Noc,
    Overheads,
    Sram,
    System,
    SystolicArray,
    Topology,
    VectorUnit,
    memory_models,
)
from archsim.hardware.area import AreaSpec, Node
from archsim.hardware.chip import ChipFamily, HostLink, min_tile_bytes
from archsim.hardware.chiplet import DieLink, Dies
from archsim.hardware.memory_models import MainMemory
from archsim.hardware.params import from_section
from archsim.hardware.power import Energies, Power, floor_power_w, streaming_floor_w

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from archsim.config.hw_schema import HardwareCfg
    from archsim.config.workload_schema import WorkloadCfg

ROOT = Path(__file__).resolve().parents[2]
Model = TypeVar("Model", bound="BaseModel")


INSTALLED_DATA = Path(__file__).resolve().parents[1] / "data"  # where a wheel puts them (setup.py)


def shipped_dir(kind: str) -> Path:
    """Folder of the shipped `hw_configs` or `workloads`: the top-level folder of a source
    checkout (where developers edit them), else the copy installed inside the package."""
    checkout = ROOT / kind
    if (ROOT / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    return INSTALLED_DATA / kind


def resolve_path(name_or_path: str, kind: str) -> str:
    """A path as given if it exists, else a shipped config of that name (`h200` -> .../h200.yaml)."""
    p = Path(name_or_path)
    if p.exists() or p.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return name_or_path
    return shipped_path(name_or_path, kind)


def shipped_path(name: str, kind: str) -> str:
    """The shipped config of that name (`h200` -> .../hw_configs/h200.yaml); ConfigError if none."""
    candidate = shipped_dir(kind) / f"{name}.yaml"
    if candidate.exists():
        return str(candidate)
    known = sorted(q.stem for q in shipped_dir(kind).glob("*.yaml"))
    hint = difflib.get_close_matches(name, known, n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else f"; shipped: {', '.join(known)}"
    raise ConfigError.single(name, "", f"no such file or shipped {kind} name{extra}")


FOLDERS = {"hardware": "hw_configs", "workload": "workloads"}  # where each root's shipped files are


def read_config(name_or_path: str, root: str) -> YamlDoc:
    """A `root` ("hardware" or "workload") file, by shipped name or path, laid over the files it
    extends (config/extends.py)."""
    return extended(read_yaml(resolve_path(name_or_path, FOLDERS[root])), root)


def extended(doc: YamlDoc, root: str) -> YamlDoc:
    """`doc` (read, or given as data) laid over the files it extends; `doc` if it extends none."""
    return extends.with_bases(doc, root, partial(shipped_path, kind=FOLDERS[root]))


def outside_base(path: str, root: str, roots: tuple[Path, ...]) -> str | None:
    """The first base of `path`'s chain outside the folders `roots` (config/extends.py), or None."""
    return extends.outside_base(path, partial(shipped_path, kind=FOLDERS[root]), roots)


def _problems_from(err: ValidationError, doc: YamlDoc, schema: type[BaseModel]) -> list[Problem]:
    problems = []
    for e in err.errors():
        loc = tuple(part for part in e["loc"] if part != "[key]")  # a bad mapping key: point at it
        if e["type"] == "extra_forbidden":
            known = _fields_at(schema, loc[:-1])
            hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
            msg = "unknown key" + (f"; did you mean {hint[0]!r}?" if hint else f"; expected one of {', '.join(known)}")
        elif e["type"] == "missing":
            msg = "missing required key"
        else:
            msg = _message(e)
        problems.append(doc.problem(loc, msg))
    return problems


_MAPPING = "expected a mapping of keys to values"
_EXPECTED = {  # pydantic error type -> what the user should have written
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected text",
    "dict_type": _MAPPING,
    "model_type": _MAPPING,
    "model_attributes_type": _MAPPING,
    "string_too_short": "must not be empty",
}


def _message(e: Any) -> str:
    """A pydantic error as `what is wrong (got VALUE)`, in the words of a config file."""
    kind, ctx = e["type"], e.get("ctx", {})
    if kind in _EXPECTED:
        msg = _EXPECTED[kind]
    elif kind == "greater_than":
        msg = f"must be greater than {ctx['gt']}"
    elif kind == "greater_than_equal":
        msg = f"must be at least {ctx['ge']}"
    elif kind == "less_than_equal":
        msg = f"must be at most {ctx['le']}"
    elif kind == "literal_error":
        msg = f"expected {ctx.get('expected')}"
    else:  # our own validators, whose messages quote the values they compare
        return e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if "input" in e:
        msg = f"{msg} (got {quote(e['input'])})"
    if kind == "literal_error":
        msg += _did_you_mean(e.get("input"), re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
    return msg


def _did_you_mean(value: object, options: list[str]) -> str:
    if not isinstance(value, str) or not options:
        return ""
    lower = {o.lower(): o for o in options}
    hint = lower.get(value.strip().lower()) or next(iter(difflib.get_close_matches(value, options, n=1)), None)
    return f"; did you mean {hint!r}?" if hint else ""


def _fields_at(schema: type[BaseModel], loc: tuple) -> list[str]:
    """Names of the keys allowed at `loc` in `schema`, for did-you-mean hints."""
    model: Any = schema
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        model = next((a for a in getattr(ann, "__args__", (ann,)) if hasattr(a, "model_fields")), ann)
    return sorted(getattr(model, "model_fields", {}))


def validate_doc(doc: YamlDoc, schema: type[Model]) -> Model:
    from pydantic import ValidationError

    try:
        return schema.model_validate(doc.data)
    except ValidationError as err:
        raise ConfigError(_problems_from(err, doc, schema)) from None


def _build_system(cfg: HardwareCfg, source: str) -> System:
    c = cfg.cores
    array = SystolicArray(
        rows=c.matrix_units.rows,
        cols=c.matrix_units.cols,
        dataflow=Dataflow(c.matrix_units.dataflow),
        fold_mode=FoldMode(c.matrix_units.fold_mode),
        k_per_cycle=tuple(sorted(c.matrix_units.k_per_cycle.items())),
        split_m_only=c.matrix_units.split == "m",
    )
    core = Core(
        matrix_units=c.matrix_units.count,
        array=array,
        vector=from_section(VectorUnit, c.vector_unit),
        sram=from_section(Sram, c.sram),
        max_inflight_bytes=round(c.dma.max_inflight),
        accumulator_bytes=round(c.accumulators.capacity),
        max_requests=c.dma.max_requests or 0,
        loads_per_warp=c.dma.loads_per_warp or 0,
    )
    chip = Chip(
        name=cfg.name,
        clock_hz=cfg.clock,
        cores=c.count,
        core=core,
        l2=from_section(L2, cfg.l2),
        hbm=_main_memory(cfg),
        noc=from_section(Noc, cfg.noc),
        overheads=from_section(Overheads, cfg.overheads),
        family=ChipFamily(cfg.family),
    )
    if cfg.power is not None:
        chip = replace(chip, power=_power(cfg.power, cfg.clock))
    if cfg.dies is not None:
        chip = replace(chip, dies=from_section(Dies, cfg.dies))
    if cfg.die_link is not None:
        chip = replace(chip, die_link=from_section(DieLink, cfg.die_link))
    if cfg.area is not None:
        chip = replace(chip, area=_area(cfg.area, cfg.memory.capacity if cfg.memory is not None else 0.0))
    link = None
    if cfg.interconnect is not None:
        i = cfg.interconnect
        link = Interconnect(
            links_per_chip=i.links_per_chip,
            link_bandwidth_bytes_per_s=i.link_bandwidth,
            link_latency_s=i.link_latency,
            topology=Topology(i.topology),
        )
        link = _fabric(link, i, cfg.chips)
    host_link = None if cfg.host_link is None else from_section(HostLink, cfg.host_link)
    return System(chip=chip, chips=cfg.chips, interconnect=link, host_link=host_link, source=source)


def _main_memory(cfg: HardwareCfg) -> MainMemory:
    """The chip's main memory: the record of its `hbm` section's model, or on-chip SRAM as an HBM
    of `banks` channels with no refresh and no bus turnaround (each channel a bank's share of the
    bandwidth)."""
    if cfg.memory is not None:
        s = cfg.memory
        return Hbm(
            stacks=1,
            channels_per_stack=s.banks,
            channel_width_bits=8,
            data_rate_bits_per_s=s.bandwidth / s.banks,  # 8 bits x rate / 8 = a bank's bytes/s
            capacity_bytes=round(s.capacity),
            latency_s=s.latency,
            interleave_bytes=round(s.interleave),
            refresh_s=0.0,
            refresh_interval_s=1.0,
            turnaround_s=0.0,
            rw_batch_bytes=round(s.interleave),
        )
    assert cfg.hbm is not None, "the schema requires hbm or memory"
    return from_section(memory_models.record(cfg.hbm.model), cfg.hbm)


def _power(p, clock_hz: float) -> Power:
    e = p.energy
    energies = from_section(Energies, e, mac_j=tuple(sorted(e.mac.items())))
    v = p.voltage
    top = {} if p.max_clock is not None else {"max_clock_hz": clock_hz}  # the curve's top: clock unless given
    return from_section(Power, p, voltage_min_v=v["min_clock"], voltage_max_v=v["max_clock"], energies=energies, **top)


def _area(a, memory_sram_bytes: float) -> AreaSpec:
    h = a.harvested
    return AreaSpec(
        node=Node(a.node),
        mac_mm2=tuple(sorted((a.mac or {}).items())),
        lane_mm2=a.lane,
        core_logic_mm2=a.core_logic,
        sram_mm2_per_byte=a.sram,
        l2_mm2_per_byte=a.l2,
        noc_mm2=a.noc,
        hbm_phy_mm2=a.hbm_phy,
        link_phy_mm2=a.link_phy,
        uncore_share=a.uncore,
        other_sram_bytes=a.other_sram or 0.0,
        harvested_cores=h.cores if h else 0,
        harvested_l2_bytes=(h.l2 or 0.0) if h else 0.0,
        harvested_hbm_stacks=h.hbm_stacks if h else 0,
        harvested_links=h.links if h else 0,
        memory_sram_bytes=memory_sram_bytes,
    )


def _fabric(link: Interconnect, i, chips: int):
    """The interconnect with how collectives run on it (defaults where the file is silent)."""
    from archsim.hardware.collectives import Algorithm, Fabric, Protocol, as_fabric

    f, inr = as_fabric(link, chips), i.in_network_reduction
    protocols = tuple(
        Protocol(name=name, overhead_s=p.overhead, step_s=p.step, efficiency=p.efficiency)
        for name, p in (i.protocols or {}).items()
    )
    return Fabric(
        links_per_chip=link.links_per_chip,
        link_bandwidth_bytes_per_s=link.link_bandwidth_bytes_per_s,
        link_latency_s=link.link_latency_s,
        topology=link.topology,
        protocols=protocols or f.protocols,
        algorithms=tuple(Algorithm(a) for a in i.algorithms or ()),
        in_network_efficiency=inr.efficiency if inr else 0.0,
        in_network_latency_s=inr.latency if inr else 0.0,
        chunk_bytes=round(i.chunk) if i.chunk else 0,
        torus_dims=tuple(i.torus) if i.torus else f.torus_dims,
        torus_wraps=tuple(i.wraps) if i.wraps else (),
        launch_jitter_s=i.launch_jitter or 0.0,
    )


def _check_system(system: System, doc: YamlDoc) -> None:
    """Cross-field checks that need the built objects."""
    core = system.chip.core
    need = min_tile_bytes(DType.BF16)
    if core.sram.capacity_bytes < need:
        raise ConfigError(
            [
                doc.problem(
                    ("cores", "sram", "capacity"),
                    f"too small for the smallest legal tile ({need} bytes needed, got {core.sram.capacity_bytes})",
                )
            ]
        )
    p = system.chip.power
    if p is not None and not p.min_clock_hz < system.chip.clock_hz <= p.max_clock_hz:
        raise ConfigError([doc.problem(("clock",), _off_the_curve(system.chip.clock_hz, p))])
    if p is not None and p.limit_w < streaming_floor_w(p, system.chip.hbm.peak_bandwidth_bytes_per_s):
        raise ConfigError(
            [doc.problem(("power", "limit"), _below_the_floor(p, system.chip.hbm.peak_bandwidth_bytes_per_s))]
        )
    dies = system.chip.dies
    if dies is not None and system.chip.cores % dies.count:
        why = f"{system.chip.cores} cores do not spread evenly over {dies.count} dies"
        raise ConfigError([doc.problem(("dies", "count"), why)])
    link = system.chip.die_link
    if link is not None and dies is not None:
        why = "a chip's dies share a memory-side cache (`dies`) or each have their own memory (`die_link`), not both"
        raise ConfigError([doc.problem(("die_link",), why)])
    if core.array.k_rate(DType.BF16) == 0:
        raise ConfigError([doc.problem(("cores", "matrix_units", "k_per_cycle"), "bf16 rate is required")])
    if system.chip.l2.capacity_bytes > system.chip.hbm.capacity_bytes:
        raise ConfigError([doc.problem(("l2", "capacity"), _past_memory(system, doc))])
    if system.interconnect is not None:
        _check_fabric(system, doc)


def _off_the_curve(clock_hz: float, p: Power) -> str:
    """Why a clock is not a point of the power section's voltage curve (above min_clock, at most
    max_clock)."""
    if clock_hz > p.max_clock_hz:
        where = f"above the top of the voltage curve (power.max_clock {p.max_clock_hz / 1e9:g} GHz)"
    else:
        where = f"not above the lowest clock (power.min_clock {p.min_clock_hz / 1e9:g} GHz)"
    return f"{clock_hz / 1e9:g} GHz is {where}: the clock must lie on the silicon's voltage curve"


def _below_the_floor(p: Power, bandwidth_bytes_per_s: float) -> str:
    """Why a power limit no clock can keep: at its lowest clock the chip draws more, idle and
    streaming its main memory at its peak (memory traffic whose power no core clock lowers)."""
    idle_w = floor_power_w(p, p.min_clock_hz)
    memory_w = streaming_floor_w(p, bandwidth_bytes_per_s) - idle_w
    return (
        f"{p.limit_w:g} W is below what the chip draws at its lowest clock ({p.min_clock_hz / 1e6:g} MHz)"
        f" idle ({idle_w:.3g} W) and streaming its main memory at {bandwidth_bytes_per_s / 1e12:.3g} TB/s"
        f" ({memory_w:.3g} W): {idle_w + memory_w:.3g} W, which no clock lowers"
    )


def _past_memory(system: System, doc: YamlDoc) -> str:
    """Why an L2 larger than the main memory it caches cannot be: it would hold more than there is."""
    memory = "memory" if doc.data.get("memory") is not None else "hbm"
    return (
        f"{system.chip.l2.capacity_bytes:,} bytes is more than the main memory it caches "
        f"({system.chip.hbm.capacity_bytes:,} bytes, {memory}.capacity)"
    )


def _check_fabric(system: System, doc: YamlDoc) -> None:
    """The collective settings agree with the topology and the chip count."""
    from archsim.hardware.collectives import Algorithm, as_fabric

    assert system.interconnect is not None
    f, where, problems = as_fabric(system.interconnect, system.chips), ("interconnect",), []
    switch, mesh = f.topology is Topology.SWITCH, f.topology is Topology.MESH
    ndims = {Topology.TORUS2D: 2, Topology.TORUS3D: 3, Topology.RING: 1, Topology.MESH: 1}.get(f.topology, 0)
    if f.torus_dims and (len(f.torus_dims) != ndims or math.prod(f.torus_dims) != system.chips):
        problems.append(
            doc.problem(
                where + ("torus",),
                f"must be {ndims} dimension(s) whose product is "
                f"chips ({system.chips}) for a {f.topology.value} (got {list(f.torus_dims)})",
            )
        )
    if f.torus_wraps and len(f.torus_wraps) != len(f.torus_dims):
        why = f"must give one entry per torus dimension ({len(f.torus_dims)}; got {len(f.torus_wraps)})"
        problems.append(doc.problem(where + ("wraps",), why))
    if switch and doc.data.get("interconnect", {}).get("torus") is not None:
        problems.append(doc.problem(where + ("torus",), "a switch has no torus shape; remove it"))
    if not switch and f.in_network_efficiency > 0:
        problems.append(
            doc.problem(where + ("in_network_reduction",), f"only a switch reduces (got topology {f.topology.value!r})")
        )
    if Algorithm.TREE in f.algorithms and not switch:
        problems.append(
            doc.problem(where + ("algorithms",), f"a tree needs a switch (got topology {f.topology.value!r})")
        )
    custom = {Algorithm.ONE_SHOT, Algorithm.TWO_SHOT} & set(f.algorithms)
    if custom and not mesh and (not switch or all(p.name != "custom" for p in f.protocols)):
        problems.append(
            doc.problem(
                where + ("algorithms",),
                f"{', '.join(sorted(a.value for a in custom))} run through a switch with a `custom` protocol",
            )
        )
    if Algorithm.IN_NETWORK in f.algorithms and f.in_network_efficiency == 0:
        problems.append(doc.problem(where + ("algorithms",), "in_network needs an in_network_reduction section"))
    if f.algorithms and not switch and not mesh and Algorithm.RING not in f.algorithms:
        problems.append(
            doc.problem(
                where + ("algorithms",), f"a {f.topology.value} runs rings only (got {[a.value for a in f.algorithms]})"
            )
        )
    if problems:
        raise ConfigError(problems)


def load_system(name_or_path: str) -> tuple[System, dict]:
    """Load a hardware file: the System and its resolved (canonical-unit) configuration."""
    value, config, _ = build("hardware", read_config(name_or_path, "hardware"))
    return value, config


def system_from_doc(doc: YamlDoc) -> tuple[System, dict]:
    """Validate and build a hardware document already read (and possibly edited, as sweeps do)."""
    from archsim.config.hw_schema import HardwareCfg

    cfg = validate_doc(doc, HardwareCfg)
    system = _build_system(cfg, doc.path)
    _check_system(system, doc)
    return system, cfg.model_dump(mode="json")


def workload_from_cfg(cfg: WorkloadCfg, source: str) -> Workload:
    from archsim.config.workload_schema import dtypes_of, model_spec

    return Workload(
        model=model_spec(cfg.model, cfg.name),
        dtypes=dtypes_of(cfg.dtypes),
        scenario=Scenario(cfg.scenario.batch, cfg.scenario.prompt_tokens, cfg.scenario.output_tokens),
        fusion=Fusion(cfg.fusion),
        source=source,
    )


def workload_from_doc(doc: YamlDoc) -> tuple[Workload, dict]:
    """Validate and build a workload document already read."""
    from archsim.config.workload_schema import WorkloadCfg  # built only where a workload is read

    cfg = validate_doc(doc, WorkloadCfg)
    return workload_from_cfg(cfg, doc.path), cfg.model_dump(mode="json")


def load_workload(name_or_path: str) -> tuple[Workload, dict]:
    """Load a workload file: the Workload and its resolved configuration."""
    value, config, _ = build("workload", read_config(name_or_path, "workload"))
    return value, config


def build(
    root: str, doc: YamlDoc, params: Sequence[tuple[KeyPath, Any]] = (), where: str = "--set"
) -> tuple[Any, dict, YamlDoc]:
    """(the System or Workload, its resolved configuration, the edited document) of `doc`, a
    `root` ("hardware" or "workload") document, with each value of `params` set at its key path
    (as `--set` and the API's `with_params` give them). ConfigError names every problem: a bad
    path or a value given in `params` located at `where`, any other at its file:line.

    A document and paths that validated before are read back from the memo (config/memo.py)."""
    from archsim.config import memo

    if params:  # totals such as hbm.bandwidth, as the physical values that give them
        from archsim.config.derived import expanded

        params = expanded(root, doc, params, where, build)
    edited = doc.edited(params) if params else doc
    entry = memo.key(root, doc.path, doc.data, params, doc.bases)
    kept = memo.get(entry)
    if kept is not None:
        value, config = kept
        return value, config, edited
    if params:  # (the paths' check imports both schemas)
        from archsim.config.paths import path_problem

        problems = [
            Problem(where, None, dotted(path), why)
            for path, _ in params
            if (why := path_problem((root, *map(str, path)))) is not None
        ]
        if problems:
            raise ConfigError(problems)
    given = {dotted(path) for path, _ in params}
    try:
        value, config = (system_from_doc if root == "hardware" else workload_from_doc)(edited)
    except ConfigError as err:
        raise ConfigError(
            [Problem(where, None, p.key, p.message) if _overridden(p.key, given) else p for p in err.problems]
        ) from None
    memo.put(entry, (value, config))
    return value, config, edited


def _overridden(key: str, paths: set[str]) -> bool:
    return any(key == p or key.startswith(p + ".") or p.startswith(key + ".") for p in paths)
