"""The names a sweep's expressions can read besides its own parameters and derived values.

*Design facts* are known before simulating, from the built chip and workload (the memory
footprint, SRAM per chip, peak FLOP/s, ...): constraints and objectives read them. *Run metrics*
are what a run reports: every number in `archsim.report.export.run_dict`, by dotted path
(`decode_tokens_per_s`, `ttft_s`, `memory.kv_cache_bytes`, `prefill.hbm_bytes`, `decode.time_s`);
objectives read them. Units are canonical: seconds, bytes, bytes/s, Hz, FLOP/s.
"""

from __future__ import annotations

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
}
FACT_NAMES = frozenset(FACT_DOCS)


def design_facts(system: System, w: Workload) -> dict[str, float | int | bool]:
    """What the chip and workload are, before any simulation."""
    chip, core = system.chip, system.chip.core
    fp = footprint(w, system)
    facts = {
        "fits_hbm": fp.fits,
        "footprint_bytes": fp.total_bytes,
        "weights_bytes": fp.weights_bytes,
        "kv_cache_bytes": fp.kv_cache_bytes,
        "activations_bytes": fp.activations_bytes,
        "hbm_capacity_bytes": fp.capacity_bytes,
        "largest_batch": largest_batch(w, system),
        "hbm_peak_bytes_per_s": chip.hbm.peak_bandwidth_bytes_per_s,
        "macs_per_cycle": chip.cores * core.macs_per_cycle(DType.BF16),
        "peak_bf16_flops_per_s": chip.peak_flops(DType.BF16),
        "sram_bytes": core.sram.capacity_bytes,
        "sram_total_bytes": chip.cores * core.sram.capacity_bytes,
        "l2_bytes": chip.l2.capacity_bytes,
    }
    assert facts.keys() == FACT_DOCS.keys()
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


def run_metrics(result: RunResult) -> dict[str, float | int | bool]:
    """Every number a run reports (`run_dict` without the configuration), by dotted path."""
    from archsim.config.resolved import ResolvedConfig
    from archsim.report.export import run_dict

    data = run_dict(result, ResolvedConfig({}))
    return flatten_numbers({k: v for k, v in data.items() if k not in ("config", "config_hash")})


@lru_cache(maxsize=1)
def metric_names() -> frozenset[str]:
    """The dotted names `run_metrics` gives for a run with a prefill and a decode step, known
    without simulating: from a run of empty steps."""
    from archsim.graph.builder import Step

    empty = RunResult(
        prefill=StepResult(Step(Phase.PREFILL, 1, 1, 0), ()),
        decode=StepResult(Step(Phase.DECODE, 1, 1, 1), ()),
        decode_kv_lens=np.zeros(1, dtype=np.int64),
        decode_step_s=np.ones(1),
        footprint=Footprint(0.0, 0.0, 0.0, 1.0),
        batch=1,
        prompt_tokens=1,
        output_tokens=2,
    )
    return frozenset(run_metrics(empty))
