"""The names a sweep's expressions can read besides its own parameters and derived values.

*Design facts* are known before simulating, from the built chip and workload (the memory
footprint, SRAM per chip, peak FLOP/s, ...): constraints and objectives read them. *Run metrics*
are what a run reports: every number in `archsim.report.export.run_dict`, by dotted path
(`decode_tokens_per_s`, `ttft_s`, `memory.kv_cache_bytes`, `prefill.hbm_bytes`, `decode.time_s`,
`power_w`, `tokens_per_j`, `energy.by_unit.hbm_j`); objectives read them, and so do constraints
checked once the point has run (`power_w <= 700`). The die's area and the power limit are facts
where the chip file has an `area` or `power` section, energies are metrics where it has a power
section. Units are canonical: seconds, bytes, bytes/s, Hz, FLOP/s, joules, watts, mm2.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from functools import lru_cache

import numpy as np

from archsim.graph.model import Phase, Workload
from archsim.hardware import DType, System
from archsim.runner.generation import RunResult, StepResult
from archsim.runner.memory import Footprint, footprint, largest_batch

FACT_DOCS: dict[str, str] = {
    "fits_hbm": "the scenario's weights, KV cache and activations fit in HBM (true/false)",
    "footprint_bytes": "weights + KV cache + activations per chip at the longest context",
    "weights_bytes": "weights per chip",
    "kv_cache_bytes": "KV cache per chip at the longest context",
    "activations_bytes": "peak live activations of one step",
    "hbm_capacity_bytes": "HBM capacity per chip",
    "largest_batch": "the largest batch that fits in HBM",
    "hbm_peak_bytes_per_s": "peak HBM bandwidth per chip",
    "macs_per_cycle": "bf16 MACs per cycle per chip",
    "peak_bf16_flops_per_s": "dense bf16 FLOP/s per chip",
    "sram_bytes": "SRAM per core",
    "sram_total_bytes": "SRAM per chip (all cores)",
    "l2_bytes": "L2 capacity per chip",
    "area_mm2": "die area in mm2 (needs an area section)",
    "fits_reticle": "the die fits the 858 mm2 reticle (true/false; needs an area section)",
    "dies": "dies the design needs: 1 within the reticle, else reticle-sized chiplets (needs an area section)",
    "power_limit_w": "power limit per chip (needs a power section)",
}
FACT_NAMES = frozenset(FACT_DOCS)
AREA_NAMES = frozenset({"area_mm2", "fits_reticle", "dies"})
POWER_NAMES = frozenset(
    {
        "power_limit_w",
        "energy_j",
        "power_w",
        "peak_power_w",
        "tokens_per_j",
        "decode_j_per_token",
        "decode_tokens_per_j",
    }
)


def missing_section(name: str) -> str | None:
    """The chip-file section a fact or metric needs ('area', 'power'), None if it needs none."""
    if name in AREA_NAMES or name.startswith("area."):
        return "area"
    if name in POWER_NAMES or name.startswith("energy.") or name == "decode_steps.energy_j":
        return "power"
    return None


def design_facts(system: System, w: Workload, wanted: frozenset[str] | None = None) -> dict[str, float | int | bool]:
    """What the chip and workload are, before any simulation (the area and power facts only
    where the chip file has those sections); `largest_batch`, a search over batches, only where
    `wanted` (the names a sweep's expressions read; None: every fact) holds it."""
    from archsim.hardware.chip import system_area

    chip, core = system.chip, system.chip.core
    fp = footprint(w, system)
    facts = {
        "fits_hbm": fp.fits,
        "footprint_bytes": fp.total_bytes,
        "weights_bytes": fp.weights_bytes,
        "kv_cache_bytes": fp.kv_cache_bytes,
        "activations_bytes": fp.activations_bytes,
        "hbm_capacity_bytes": fp.capacity_bytes,
        "hbm_peak_bytes_per_s": chip.hbm.peak_bandwidth_bytes_per_s,
        "macs_per_cycle": chip.cores * core.macs_per_cycle(DType.BF16),
        "peak_bf16_flops_per_s": chip.peak_flops(DType.BF16),
        "sram_bytes": core.sram.capacity_bytes,
        "sram_total_bytes": chip.cores * core.sram.capacity_bytes,
        "l2_bytes": chip.l2.capacity_bytes,
    }
    if wanted is None or "largest_batch" in wanted:
        facts["largest_batch"] = largest_batch(w, system)
    area = system_area(system)
    if area is not None:
        facts.update({"area_mm2": area.die_mm2, "fits_reticle": area.fits_reticle, "dies": area.dies})
    if chip.power is not None:
        facts["power_limit_w"] = chip.power.limit_w
    assert facts.keys() <= FACT_DOCS.keys()
    return facts


def flatten_numbers(data: dict, prefix: str = "") -> dict[str, float | int | bool]:
    """The numbers (and true/false) of nested dicts by dotted path; text, lists and nulls left out."""
    out: dict[str, float | int | bool] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_numbers(value, name + "."))
        elif isinstance(value, (bool, int, float, np.integer, np.floating)):
            out[name] = value.item() if isinstance(value, np.generic) else value
    return out


# run_dict's headline numbers, each a RunResult property of that name: what most objectives read
HEADLINE_NAMES = (
    "ttft_s",
    "tpot_s",
    "throughput_tokens_per_s",
    "decode_tokens_per_s",
    "total_time_s",
    "generated_tokens",
)


def run_metrics(
    result: RunResult, system: System | None = None, energy=None, wanted: AbstractSet[str] | None = None
) -> dict[str, float | int | bool]:
    """Every number a run reports (`run_dict` without the configuration), by dotted path; its
    energy (a RunEnergy) and the die's area where given and the chip file has them. Where every
    name `wanted` (None: all) is a headline number, the headline numbers alone, the same values
    read without the document (whose time by cause adds up every op's: 0.7 ms, 2% of a sweep
    point)."""
    if wanted is not None and wanted <= set(HEADLINE_NAMES):
        return flatten_numbers({name: getattr(result, name) for name in HEADLINE_NAMES})
    from archsim.config.resolved import ResolvedConfig
    from archsim.hardware.chip import system_area
    from archsim.report.energy import area_dict
    from archsim.report.export import run_dict

    area = None
    if system is not None and system.chip.area is not None:
        chips = energy.chips if energy is not None else 1
        area = area_dict(system_area(system), result, chips, system.chip.area.node.value)
    data = run_dict(result, ResolvedConfig({}), None, energy, area, ops=False)  # lists: no numbers
    return flatten_numbers({k: v for k, v in data.items() if k not in ("config", "config_hash")})


def empty_run() -> RunResult:
    """A run of a prefill and a decode step with no ops: what `run_metrics` names, not numbers."""
    from archsim.graph.builder import Step

    return RunResult(
        prefill=StepResult(Step(Phase.PREFILL, 1, 1, 0), ()),
        decode=StepResult(Step(Phase.DECODE, 1, 1, 1), ()),
        decode_kv_lens=np.zeros(1, dtype=np.int64),
        decode_step_s=np.ones(1),
        footprint=Footprint(0.0, 0.0, 0.0, 1.0),
        batch=1,
        prompt_tokens=1,
        output_tokens=2,
    )


@lru_cache(maxsize=1)
def metric_names() -> frozenset[str]:
    """The dotted names `run_metrics` gives for a run with a prefill and a decode step, an energy
    and an area, known without simulating: from a run of empty steps."""
    from archsim.config.resolved import ResolvedConfig
    from archsim.hardware.area import Area
    from archsim.hardware.power import EnergySplit
    from archsim.report.energy import area_dict
    from archsim.report.export import run_dict
    from archsim.runner.energy import RunEnergy, StepEnergy

    empty = empty_run()
    step = StepEnergy(EnergySplit(), 1.0, 0.0)
    energy = RunEnergy(step, step, np.ones(1), EnergySplit(), 0.0, 1.0, 1, 1.0, 2, 1, 1.0)
    data = run_dict(empty, ResolvedConfig({}), None, energy, area_dict(Area(matrix_mm2=1.0), empty))
    return frozenset(flatten_numbers({k: v for k, v in data.items() if k not in ("config", "config_hash")}))
