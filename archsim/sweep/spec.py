"""Load a sweep spec into a frozen `SweepSpec`; every problem located by file:line.

Beyond the schema (`archsim.sweep.schema`), the loader checks what only the whole spec can
tell: that every dotted path names a value of the hardware or workload schema, that every name
an expression reads is defined before it, that names do not collide, that a parameter without a
path is read by something (it then enters each point's key), that the base files load and stay
valid with the `set` values, that files named lie under the spec's folder (or an allowed one),
and that a grid is not astronomically large (counted arithmetically, before any value is made).
"""

from __future__ import annotations

import keyword
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim.config.loader import load_system, load_workload, validate_doc
from archsim.config.paths import path_problem
from archsim.config.yamlfile import YamlDoc, read_yaml
from archsim.errors import ConfigError, Problem
from archsim.sweep.design import DesignCache, KeyPath, config_value, resolve_file
from archsim.sweep.directions import Direction, Objective, declared, objective_direction
from archsim.sweep.expr import FUNCTIONS, UNIT_CONSTANTS, Expr, ExprError, parse_expr
from archsim.sweep.metrics import FACT_NAMES, metric_names
from archsim.sweep.sampling import Domain, Scale, Value, grid_size, iter_grid, iter_sampled
from archsim.sweep.schema import MAX_POINTS, Strategy, SweepCfg

RESERVED = frozenset({"config_hash", "status", "error"})  # columns every result row has


@dataclass(frozen=True)
class Parameter:
    name: str
    path: KeyPath | None  # ('hardware', 'clock'); ('hardware',) picks the file; None: derived input only
    domain: Domain
    unit: str | None
    column_type: str  # 'int', 'float', 'str' or 'bool'


@dataclass(frozen=True)
class Derived:
    name: str
    expr: Expr
    path: KeyPath | None
    unit: str | None
    integer: bool

    @property
    def column_type(self) -> str:
        return "int" if self.integer else "float"


@dataclass(frozen=True)
class SweepSpec:
    source: str
    name: str
    description: str
    hardware: str  # base files, resolved to paths
    workload: str
    fixed: tuple[tuple[KeyPath, Any], ...]  # `set`: (full dotted path, value as in a config file)
    parameters: tuple[Parameter, ...]
    derived: tuple[Derived, ...]
    constraints: tuple[Expr, ...]
    objectives: tuple[Objective, ...]
    strategy: Strategy
    points: int | None
    seed: int
    kv_stride: int
    chunk_size: int | None
    allowed: tuple[str, ...] = ()  # folders besides the spec's own that its files may lie in

    def columns(self) -> list[tuple[str, str, str]]:
        """(name, type, role) of every result column after config_hash, status and error."""
        return (
            [(p.name, p.column_type, "parameter") for p in self.parameters]
            + [(d.name, d.column_type, "derived") for d in self.derived]
            + [(o.name, "float", "objective") for o in self.objectives]
        )

    def iter_samples(self) -> Iterator[dict[str, Value]]:
        """The parameter values of every point, in sweep order, one at a time."""
        domains = {p.name: p.domain for p in self.parameters}
        if self.strategy == "grid":
            return iter_grid(domains)
        if self.points is None:
            raise ValueError(f"{self.strategy} sampling needs a number of points")
        return iter_sampled(domains, self.points, self.seed, self.strategy)

    def sample(self) -> list[dict[str, Value]]:
        return list(self.iter_samples())

    def sample_count(self) -> int:
        """How many samples the strategy draws (before points that resolve alike are merged)."""
        if self.strategy == "grid":
            return grid_size({p.name: p.domain for p in self.parameters})
        return self.points or 0

    @property
    def keyed_inputs(self) -> tuple[str, ...]:
        """Parameters without a path: their values enter each point's key besides its config."""
        return tuple(p.name for p in self.parameters if p.path is None)

    def settings(self) -> dict:
        """What decides a point's row besides its configuration: a results folder holds one setting,
        of one archsim (its version and sources' digest: rows of another model are not mixed in)."""
        from archsim.opcache import code_version

        return {
            "archsim": code_version(),
            "kv_stride": self.kv_stride,
            "columns": [list(c) for c in self.columns()],
            "derived": {d.name: d.expr.text for d in self.derived},
            "constraints": [c.text for c in self.constraints],
            "objectives": {o.name: o.expr.text for o in self.objectives},
        }

    def goals(self) -> dict[str, dict]:
        """Which way each objective ranks and its unit (summary.json; `archsim pareto` is told its own)."""
        return {o.name: {"goal": o.direction.value, "unit": o.unit} for o in self.objectives}


def load_spec(path: str | Path, allowed: tuple[str, ...] = ()) -> SweepSpec:
    """Read, validate and check a sweep spec; ConfigError with every problem found. Files it
    names must lie under its folder, the shipped folders, or one of the `allowed` folders."""
    doc = read_yaml(path)
    return spec_from_doc(doc, Path(doc.path).parent, allowed)


def spec_from_doc(doc: YamlDoc, spec_dir: Path, allowed: tuple[str, ...] = ()) -> SweepSpec:
    """The spec of a document read from a file or made as data (a template, archsim/sweep/templates.py);
    files it names are relative to `spec_dir`."""
    cfg = validate_doc(doc, SweepCfg)
    problems: list[Problem] = []
    allowed = tuple(str(a) for a in allowed)
    hardware = _base_file(doc, cfg.hardware, "hardware", spec_dir, allowed, problems)
    workload = _base_file(doc, cfg.workload, "workload", spec_dir, allowed, problems)
    fixed = _fixed(doc, cfg, problems)
    params = _parameters(doc, cfg, spec_dir, allowed, problems)
    taken = {p.name for p in params}
    derived = _derived(doc, cfg, taken, problems)
    facts = taken | FACT_NAMES
    constraints = tuple(  # on the design, or on what a run reports (checked once it has run)
        e
        for i, text in enumerate(cfg.constraints)
        if (e := _expr(doc, ("constraints", i), text, facts | metric_names(), problems)) is not None
    )
    objectives = _objectives(doc, cfg, facts | metric_names(), taken, problems)
    _check_paths_unique(doc, cfg, problems)
    read = {n for e in [*(d.expr for d in derived), *constraints, *(o.expr for o in objectives)] for n in e.names}
    for p in params:
        if p.path is None and p.name not in read:
            problems.append(
                doc.problem(
                    ("parameters", p.name),
                    "has no path and no derived value, constraint or objective reads it: every value would be "
                    "the same design; give it a path or remove it",
                )
            )
    if cfg.strategy.kind == "grid":
        size = grid_size({p.name: p.domain for p in params})
        if size > MAX_POINTS:
            problems.append(
                doc.problem(
                    ("parameters",),
                    f"the grid has {size:,} points, more than {MAX_POINTS:,}: "
                    "sweep fewer values or sample (strategy: halton)",
                )
            )
    if problems:
        raise ConfigError(problems)
    _check_base(doc, hardware, workload, fixed)
    return SweepSpec(
        source=doc.path,
        name=cfg.name,
        description=cfg.description,
        hardware=hardware,
        workload=workload,
        fixed=fixed,
        parameters=params,
        derived=derived,
        constraints=constraints,
        objectives=objectives,
        strategy=cfg.strategy.kind,
        points=cfg.strategy.points,
        seed=cfg.strategy.seed,
        kv_stride=cfg.kv_stride,
        chunk_size=cfg.chunk_size,
        allowed=allowed,
    )


def _base_file(
    doc: YamlDoc, value: str, kind: str, spec_dir: Path, allowed: tuple[str, ...], problems: list[Problem]
) -> str:
    """The base file's path; it must load on its own (its own problems keep their own file:line)."""
    try:
        path = resolve_file(value, "hw_configs" if kind == "hardware" else "workloads", spec_dir, allowed)
    except ConfigError as err:
        problems.append(doc.problem((kind,), err.problems[0].message))
        return value
    (load_system if kind == "hardware" else load_workload)(path)
    return path


def _split(text: str) -> KeyPath:
    return tuple(text.split("."))


def _fixed(doc: YamlDoc, cfg: SweepCfg, problems: list[Problem]) -> tuple[tuple[KeyPath, Any], ...]:
    out = []
    for text, value in cfg.set.items():
        path = _split(text)
        why = "give a key path below it" if len(path) == 1 else path_problem(path)
        if why:
            problems.append(doc.problem(("set", text), why))
        else:
            out.append((path, config_value(value, None)))
    return tuple(out)


def _name_problem(name: str, taken: set[str], metric_ok: bool = False) -> str | None:
    """Why `name` cannot name a column; an objective may take the name of the run metric it records."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return f"{name!r} is not a usable name: letters, digits and _, not starting with a digit"
    if name in RESERVED or name in FACT_NAMES or name in UNIT_CONSTANTS or name in FUNCTIONS:
        return f"{name!r} is a built-in name (a column, design fact, unit or function); choose another"
    if name in metric_names() and not metric_ok:
        return f"{name!r} is the name of a run metric; choose another"
    if name in taken:
        return f"{name!r} is already defined"
    return None


def _parameters(
    doc: YamlDoc, cfg: SweepCfg, spec_dir: Path, allowed: tuple[str, ...], problems: list[Problem]
) -> tuple[Parameter, ...]:
    out: list[Parameter] = []
    for name, p in cfg.parameters.items():
        where = ("parameters", name)
        if why := _name_problem(name, {q.name for q in out}):
            problems.append(doc.problem(where, why))
        path = _split(p.path) if p.path is not None else None
        if path is not None and (why := path_problem(path)):
            problems.append(doc.problem(where + ("path",), why))
        if path is not None and len(path) == 1:
            files = [v for v in p.values or () if isinstance(v, str)]
            if p.values is None or len(files) < len(p.values):
                problems.append(
                    doc.problem(where + ("values",), f"{path[0]} alone picks a file: values are file names or paths")
                )
            else:
                for i, v in enumerate(files):
                    try:
                        resolve_file(v, "hw_configs" if path[0] == "hardware" else "workloads", spec_dir, allowed)
                    except ConfigError as err:
                        problems.append(doc.problem(where + ("values", i), err.problems[0].message))
        if p.range is not None and cfg.strategy.kind == "grid" and p.steps is None:
            problems.append(doc.problem(where + ("range",), "a grid needs steps: N for a range"))
        if p.values is not None:
            domain = Domain(choices=tuple(p.values))
            column = _values_type(p.values)
        else:
            assert p.range is not None, "the schema gives a parameter values or a range"
            domain = Domain(
                low=float(p.range[0]), high=float(p.range[1]), steps=p.steps, scale=Scale(p.scale), integer=p.integer
            )
            column = "int" if p.integer else "float"
        out.append(Parameter(name, path, domain, p.unit, column))
    return tuple(out)


def _values_type(values: list) -> str:
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, str) for v in values):
        return "str"
    return "int" if all(isinstance(v, int) for v in values) else "float"


def _expr(
    doc: YamlDoc, where: tuple, text: object, known: set[str] | frozenset[str], problems: list[Problem]
) -> Expr | None:
    try:
        return parse_expr(text, known)
    except ExprError as err:
        problems.append(doc.problem(where, str(err)))
        return None


def _derived(doc: YamlDoc, cfg: SweepCfg, taken: set[str], problems: list[Problem]) -> tuple[Derived, ...]:
    out = []
    for name, d in cfg.derived.items():
        where = ("derived", name)
        if why := _name_problem(name, taken):
            problems.append(doc.problem(where, why))
        path = _split(d.path) if d.path is not None else None
        if path is not None and (why := "give a key path below it" if len(path) == 1 else path_problem(path)):
            problems.append(doc.problem(where + ("path",), why))
        expr = _expr(doc, where + ("expr",), d.expr, set(taken), problems)
        taken.add(name)
        if expr is not None:
            out.append(Derived(name, expr, path, d.unit, d.integer))
    return tuple(out)


def _objectives(
    doc: YamlDoc, cfg: SweepCfg, known: set[str], taken: set[str], problems: list[Problem]
) -> tuple[Objective, ...]:
    out = []
    known = set(known)
    ranked: dict[str, Direction] = {}  # the objectives before, which later ones may read
    for name, given in cfg.objectives.items():
        where = ("objectives", name)
        named = _name_problem(name, taken, metric_ok=True)
        if named:
            problems.append(doc.problem(where, named))
        long = isinstance(doc.data["objectives"].get(name), dict)  # {expr: ..., goal: ...}, not the shorthand
        expr = _expr(doc, where + (("expr",) if long else ()), given.expr, known, problems)
        known.add(name)
        taken.add(name)
        if expr is None or named:
            continue
        goal = Direction(given.goal) if given.goal else None
        direction = _direction(doc, where, expr, goal, ranked, problems)
        if direction is None:
            continue
        unit = _objective_unit(doc, where, expr, given.unit, problems)
        ranked[name] = direction
        out.append(Objective(name, expr, direction, unit))
    return tuple(out)


def _direction(
    doc: YamlDoc,
    where: tuple,
    expr: Expr,
    goal: Direction | None,
    ranked: dict[str, Direction],
    problems: list[Problem],
) -> Direction | None:
    """Which way an objective ranks: as its names tell (archsim/sweep/directions.py), else its
    `goal`; None, with the problem, where neither tells or the goal contradicts its names."""
    try:
        direction, names = objective_direction(expr.text, ranked)
    except ValueError as why:
        if goal is None:
            problems.append(
                doc.problem(
                    where,
                    f"which way it ranks does not follow from its names ({why}): write it as "
                    f"{where[-1]}: {{expr: {expr.text}, goal: maximize}} (or minimize)",
                )
            )
        return goal
    if goal is not None and goal is not direction:
        said = ", ".join(f"{n} is to {_way(n, ranked)}" for n in dict.fromkeys(names))
        problems.append(
            doc.problem(
                where + ("goal",), f"{goal.value} contradicts {expr.text}: {said}, so it is to {direction.value}"
            )
        )
        return None
    return direction


def _way(name: str, ranked: dict[str, Direction]) -> str:
    d = declared(name)
    direction = ranked.get(name) or (d.direction if d is not None else None)
    return direction.value if direction is not None else "neither way"


def _objective_unit(doc: YamlDoc, where: tuple, expr: Expr, unit: str | None, problems: list[Problem]) -> str | None:
    """The objective's unit: as given, else that of the one metric or fact it is; a bare name's
    declared unit may not be contradicted."""
    d = declared(expr.text) if expr.text in expr.names else None
    if d is not None and unit is not None and unit != d.unit:
        problems.append(doc.problem(where + ("unit",), f"{expr.text} is in {d.unit}, not {unit}"))
    return unit if unit is not None else d.unit if d is not None else None


def _check_paths_unique(doc: YamlDoc, cfg: SweepCfg, problems: list[Problem]) -> None:
    seen: dict[str, tuple] = {}
    entries = (
        [(k, ("set", k)) for k in cfg.set]
        + [(p.path, ("parameters", n, "path")) for n, p in cfg.parameters.items() if p.path]
        + [(d.path, ("derived", n, "path")) for n, d in cfg.derived.items() if d.path]
    )
    for path, where in entries:
        if path in seen:
            first = doc.line_of(seen[path])
            problems.append(doc.problem(where, f"{path} is already set (line {first})"))
        else:
            seen[path] = where


def _check_base(doc: YamlDoc, hardware: str, workload: str, fixed: tuple[tuple[KeyPath, Any], ...]) -> None:
    """The base design with the `set` values must be valid; its problems point at the spec."""
    hw = tuple((p[1:], v) for p, v in fixed if p[0] == "hardware")
    wl = tuple((p[1:], v) for p, v in fixed if p[0] == "workload")
    try:
        DesignCache().design(hardware, hw, workload, wl)
    except ConfigError as err:
        problems = []
        for p in err.problems:
            key = next((".".join(path) for path, _ in fixed if p.key.startswith(".".join(path))), None)
            where = ("set", key) if key else ("set",)
            problems.append(doc.problem(where, f"with these values, {p.key}: {p.message}"))
        raise ConfigError(problems) from None
