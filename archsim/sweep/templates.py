"""Shipped sweep templates: the best of N generated chips per mm2, per joule, or under a power cap,
with no spec file to write.

A template makes a sweep spec as data around a base chip and loads it as a file is loaded
(`spec.spec_from_doc`), so every point is validated, keyed and recorded as any sweep's. Its designs
are N points of a scrambled Halton sequence over ranges around the base chip's own values:

    cores per chip        0.5x to 1.5x           (a smaller or a larger die; per die on a chiplet chip)
    matrix units per core half, as many, twice
    SRAM per core         0.5x to 2x (log)       (not on a chip whose memory is on-die SRAM)
    L2                    0.5x to 2x (log)       (likewise)
    HBM stacks            the base's -2 to +2, at least 1; capacity per stack as the base's;
                          under a power cap, no more than the chip can stream within it
    clock                 0.6x to 1x             (the silicon's voltage curve tops out at the base's)

A lower clock runs at a lower voltage on the base's voltage curve (archsim/hardware/power.py), so
it trades speed for energy. Every design must fit the workload in HBM and, where the base die does,
the reticle (archsim/hardware/area.py). A power cap is a constraint: each design's power limit is
the cap (its clock held under it as the base's is under its own), and a design whose peak power
exceeds the cap even so is ruled out. Designs are ranked by the template's objective, larger
better; the Pareto front is over the two quantities the objective trades (speed and area, speed
and energy, speed and power).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from archsim.config.loader import resolve_path
from archsim.config.yamlfile import YamlDoc
from archsim.errors import ConfigError
from archsim.sweep.design import build_hardware
from archsim.sweep.spec import SweepSpec, spec_from_doc

CORES_SCALE = (0.5, 1.5)  # cores per chip, of the base's
UNITS_FACTORS = (0.5, 1.0, 2.0)  # matrix units per core, of the base's
MEMORY_SCALE = (0.5, 2.0)  # SRAM per core and L2, of the base's, log-spaced
STACKS_STEP = 2  # HBM stacks either side of the base's
CLOCK_SCALE = (0.6, 1.0)  # of the base's clock: the top of its voltage curve is not exceeded
CLOCK_FLOOR_MARGIN = 1.05  # the clock stays this far above the voltage curve's lowest (a clock must lie above it)
KV_STRIDE = 4096  # attention simulated at the first and last KV length of the scenario
PROMPT_TOKENS = 512  # a short scenario keeps each point cheap (~0.2 s), as the shipped specs do
OUTPUT_TOKENS = 16
DEFAULT_POINTS = 100
DEFAULT_WORKLOAD = "llama3_8b"
CAP_REFUSED = "with these values, hardware.power.limit: "  # spec._check_base's words for the base under the cap
SECTION_WHY = {
    "area": "each design's die area comes from it (archsim/hardware/area.py)",
    "power": "each design's energy and power come from it (archsim/hardware/power.py)",
}


class TemplateError(ValueError):
    """A template asked for what it cannot do: one line naming the option and what is wrong."""


MAX_POWER_CAP_W = 1e6  # a cap on one chip: far above any (a wafer-scale system draws ~25 kW)


def power_cap_w(given: float | str) -> float:
    """A power cap in watts from watts or a quantity with its unit (`500W`, `0.5 kW`, `500`);
    TemplateError (its words) for one that is none or is not above 0 W and at most 1 MW."""
    from archsim.units import Dim, parse_quantity

    text = str(given).strip()
    try:
        watts = float(text) if text.replace(".", "", 1).isdigit() else parse_quantity(text, Dim.WATTS)
    except ValueError as err:
        raise TemplateError(str(err)) from None
    if not 0 < watts <= MAX_POWER_CAP_W:
        raise TemplateError(f"must be above 0 W and at most 1 MW (got {text[:40]})")
    return watts


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    rank: str  # the objective designs are ranked by, larger better
    rank_label: str  # what it is, in words
    rank_expr: str
    needs: tuple[str, ...]  # sections of the chip file it reads
    front: tuple[tuple[str, bool], ...]  # (objective, maximised): the Pareto front's axes
    cap_required: bool = False


TEMPLATES = {
    t.name: t
    for t in (
        Template(
            "best_per_area",
            "most decode tokens/s per mm2 of die",
            "tokens_per_s_per_mm2",
            "decode tokens/s per mm2",
            "decode_tokens_per_s / area_mm2",
            ("area",),
            (("decode_tokens_per_s", True), ("die_mm2", False)),
        ),
        Template(
            "best_per_joule",
            "most decode tokens per joule",
            "decode_tokens_per_j",
            "decode tokens per joule",
            "decode_tokens_per_j",
            ("power",),
            (("decode_tokens_per_s", True), ("decode_tokens_per_j", True)),
        ),
        Template(
            "best_under_cap",
            "most decode tokens/s under a power cap",
            "decode_tokens_per_s",
            "decode tokens/s",
            "decode_tokens_per_s",
            ("power",),
            (("decode_tokens_per_s", True), ("watts", False)),
            cap_required=True,
        ),
    )
}


@dataclass(frozen=True)
class TemplateOptions:
    """What a template sweeps around: the base chip and workload, how many designs, the scenario."""

    hardware: str
    workload: str = DEFAULT_WORKLOAD
    points: int = DEFAULT_POINTS
    seed: int = 0
    power_cap_w: float | None = None
    batch: int | None = None  # None: the workload's own
    prompt: int = PROMPT_TOKENS
    generate: int = OUTPUT_TOKENS


def template_spec(name: str, options: TemplateOptions) -> SweepSpec:
    """The spec of template `name` around `options.hardware`; TemplateError for what the template
    cannot do with it, ConfigError (file:line) for a file that does not load."""
    t = TEMPLATES[name]
    if t.cap_required and options.power_cap_w is None:
        raise TemplateError(f"{name} needs --power-cap WATTS (e.g. --power-cap 500W)")
    hw_path = resolve_path(options.hardware, "hw_configs")
    wl_path = resolve_path(options.workload, "workloads")
    system, cfg = build_hardware(hw_path, ())
    if system.chips > 1:
        raise TemplateError(
            f"--hw {options.hardware}: a system of {system.chips} chips; a template designs one chip: "
            "give the chip's own file (h200, not h200x8)"
        )
    needs = t.needs + (("power",) if options.power_cap_w is not None and "power" not in t.needs else ())
    for section in needs:
        if section not in cfg or cfg[section] is None:
            why = f"{name} needs it" if section in t.needs else "--power-cap needs it"
            raise TemplateError(
                f"--hw {options.hardware}: the chip file has no `{section}` section ({why}: {SECTION_WHY[section]}); "
                "add one, or start from a chip that has one (h200, mi300x, tpu_v6e, ...)"
            )
    data = {
        "name": name,
        "description": f"{t.description}: {options.points} designs around {system.chip.name}",
        "hardware": _named(options.hardware, hw_path),
        "workload": _named(options.workload, wl_path),
        "set": _fixed(options),
        "parameters": _parameters(cfg, system, options.power_cap_w),
        "derived": _derived(cfg),
        "constraints": _constraints(system, options),
        "objectives": _objectives(t, cfg),
        "strategy": {"kind": "halton", "points": options.points, "seed": options.seed},
        "kv_stride": KV_STRIDE,
    }
    allowed = tuple(str(Path(p).resolve().parent) for p in (hw_path, wl_path))
    try:
        return spec_from_doc(YamlDoc(f"{name} (template)", data, {(): None}), Path.cwd(), allowed)
    except ConfigError as err:  # the base chip under the cap: said of the flag that set it
        capped = [p for p in err.problems if p.message.startswith(CAP_REFUSED)]
        if not capped:
            raise
        why = capped[0].message.removeprefix(CAP_REFUSED)
        raise TemplateError(f"--power-cap: {why}") from None


def _named(given: str, path: str) -> str:
    """A shipped name as given; a file as its absolute path (the spec's folder is not the user's)."""
    return given if path != given else str(Path(path).resolve())


def _fixed(options: TemplateOptions) -> dict:
    fixed: dict = {
        "workload.scenario.prompt_tokens": options.prompt,
        "workload.scenario.output_tokens": options.generate,
    }
    if options.batch is not None:
        fixed["workload.scenario.batch"] = options.batch
    if options.power_cap_w is not None:
        fixed["hardware.power.limit"] = f"{options.power_cap_w!r} W"
    return fixed


def on_die_memory(cfg: dict) -> bool:
    """Whether the chip's main memory is on-die SRAM (`memory:`), its L2 and scratchpads views of it."""
    return cfg.get("memory") is not None


def stacks_range(cfg: dict, system, power_cap_w: float | None) -> tuple[int, int]:
    """HBM stacks around the base's; under a power cap, only as many as the chip can stream at its
    lowest clock within the cap (the floor below which no power limit can be kept,
    archsim/hardware/power.py), TemplateError if not even the fewest can."""
    from archsim.hardware.power import streaming_floor_w

    stacks = int(cfg["hbm"]["stacks"])
    low, high = max(1, stacks - STACKS_STEP), stacks + STACKS_STEP
    power = system.chip.power
    if power_cap_w is None or power is None:
        return low, high
    per_stack = system.chip.hbm.peak_bandwidth_bytes_per_s / stacks
    while high >= low and streaming_floor_w(power, per_stack * high) > power_cap_w:
        high -= 1
    if high < low:
        floor = streaming_floor_w(power, per_stack * low)
        raise TemplateError(
            f"--power-cap {power_cap_w:g} W: below the {floor:.3g} W a design with {low} HBM stacks draws at its "
            "lowest clock streaming its HBM, which no clock lowers"
        )
    return low, high


def _parameters(cfg: dict, system, power_cap_w: float | None) -> dict:
    cores, units = int(cfg["cores"]["count"]), int(cfg["cores"]["matrix_units"]["count"])
    clock = float(cfg["clock"])
    params: dict = {}
    dies = chiplets(cfg)
    if cores > 1 and dies > 1:  # as many on each die: the derived value `cores` sets the count
        per_die = cores // dies
        low, high = max(1, round(per_die * CORES_SCALE[0])), max(2, round(per_die * CORES_SCALE[1]))
        params["cores_per_die"] = {"range": [low, high], "integer": True}
    elif cores > 1:
        low, high = max(1, round(cores * CORES_SCALE[0])), max(2, round(cores * CORES_SCALE[1]))
        params["cores"] = {"path": "hardware.cores.count", "range": [low, high], "integer": True}
    params["matrix_units"] = {
        "path": "hardware.cores.matrix_units.count",
        "values": sorted({max(1, round(units * f)) for f in UNITS_FACTORS}),
    }
    if not on_die_memory(cfg):
        for name, path, value in (
            ("sram_kib", "hardware.cores.sram.capacity", cfg["cores"]["sram"]["capacity"]),
            ("l2_kib", "hardware.l2.capacity", cfg["l2"]["capacity"]),
        ):
            kib = float(value) / 1024
            params[name] = {
                "path": path,
                "range": [kib * MEMORY_SCALE[0], kib * MEMORY_SCALE[1]],
                "scale": "log",
                "integer": True,
                "unit": "KiB",
            }
        low, high = stacks_range(cfg, system, power_cap_w)
        hbm = {"values": [low]} if low == high else {"range": [low, high], "integer": True}
        params["hbm_stacks"] = {"path": "hardware.hbm.stacks", **hbm}
    low_ghz = clock * CLOCK_SCALE[0] / 1e9
    power = cfg.get("power")
    if power is not None:  # above the lowest clock of its voltage curve
        low_ghz = max(low_ghz, CLOCK_FLOOR_MARGIN * float(power["min_clock"]) / 1e9)
    params["clock_ghz"] = {"path": "hardware.clock", "range": [low_ghz, clock * CLOCK_SCALE[1] / 1e9], "unit": "GHz"}
    return params


def chiplets(cfg: dict) -> int:
    """Compute dies of the chip (its `dies` section), whose cores must spread evenly over them."""
    dies = cfg.get("dies")
    return int(dies["count"]) if dies is not None else 1


def _derived(cfg: dict) -> dict:
    derived = {}
    if int(cfg["cores"]["count"]) > 1 and chiplets(cfg) > 1:
        expr = f"cores_per_die * {chiplets(cfg)}"
        derived["cores"] = {"path": "hardware.cores.count", "expr": expr, "integer": True}
    if on_die_memory(cfg):
        return derived
    capacity, stacks = round(float(cfg["hbm"]["capacity"])), int(cfg["hbm"]["stacks"])
    expr = f"hbm_stacks * {capacity} / {stacks}"  # the base's capacity exactly at the base's stacks
    derived["hbm_bytes"] = {"path": "hardware.hbm.capacity", "expr": expr, "integer": True, "unit": "B"}
    return derived


def _constraints(system, options: TemplateOptions) -> list[str]:
    from archsim.hardware.chip import system_area

    constraints = ["fits_hbm"]
    area = system_area(system)
    if area is not None and area.fits_reticle:  # a wafer-scale base is past it by design
        constraints.append("fits_reticle")
    if options.power_cap_w is not None:
        constraints.append(f"peak_power_w <= {options.power_cap_w!r}")
    return constraints


def _objectives(t: Template, cfg: dict) -> dict:
    objectives = {t.rank: t.rank_expr, "decode_tokens_per_s": "decode_tokens_per_s", "tpot_ms": "tpot_s * 1000"}
    if cfg.get("area") is not None:
        objectives["die_mm2"] = "area_mm2"
    if cfg.get("power") is not None:
        objectives["watts"] = "power_w"
        objectives["decode_tokens_per_j"] = "decode_tokens_per_j"
    return objectives


def ranked(rows: list[dict], t: Template) -> list[dict]:
    """The ok rows, best first by the template's objective (then by config_hash, for ties)."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(t.rank) is not None]
    return sorted(ok, key=lambda r: (-r[t.rank], r["config_hash"]))


def base_row(spec: SweepSpec) -> dict:
    """The base chip's own row under the template (its `set` values, a power cap included), to
    read the designs against: status, error and every objective."""
    from archsim.config.resolved import run_options
    from archsim.sweep.design import DesignCache
    from archsim.sweep.evaluate import Evaluation, evaluate_point
    from archsim.sweep.points import PointTask

    hw = tuple((p[1:], v) for p, v in spec.fixed if p[0] == "hardware")
    wl = tuple((p[1:], v) for p, v in spec.fixed if p[0] == "workload")
    design = DesignCache().design(spec.hardware, hw, spec.workload, wl, run_options(spec.kv_stride))
    return evaluate_point(PointTask(design.config_hash, (), design), Evaluation.of(spec))
