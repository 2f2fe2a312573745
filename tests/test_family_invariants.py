"""The physics every shipped chip must show, whatever its family (docs/MODEL.md, "Chip families").

On each single-chip preset of hw_configs/: a bf16 GEMM of 8192^3 reaches >= 55% of the chip's
peak. On a chip whose main memory is HBM (not an SRAM-only chip, and not a SCALE-Sim parity
chip, whose memory is unlimited on purpose): a GEMV of 1 x 8192 x 8192 moves >= 60% of HBM
bandwidth, the GEMMs of a batch-1 decode step are memory-bound (or, where a GEMV streams for less
time than its kernel's fixed costs take, bound by those: the output projection's 33.5 MB on a
B200's 8 TB/s, 4.2 us against 4.3 us of kernel, prologue and gap), never compute-bound, at least
80% of their time memory-bound; and Llama-3-8B's decode step at
batch 8 grows from a KV length of 2,048 to 8,192 by 0.9-1.6x the KV bytes added over bandwidth.

The KV bytes added: 8 sequences x 6,144 tokens x 32 layers x (K and V) x 8 KV heads x 128 x 2 B
= 6.44 GB; over the H200's 4.8 TB/s, 1.34 ms.
"""

from pathlib import Path

import pytest

from archsim.choose import simulate_op
from archsim.config.loader import load_system
from archsim.graph.builder import Step
from archsim.graph.model import Phase
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware import ChipFamily, DType
from archsim.runner.generation import simulate_step

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (ROOT / "hw_configs").glob("*.yaml") if "\nextends:" not in p.read_text())
GEMM = Op(OpKind.GEMM, DType.BF16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
GEMV = Op(OpKind.GEMM, DType.BF16, m=1, k=8192, n=8192, scaling=Scaling.FIXED)
SRAM_ONLY = {"lpu", "wafer"}  # main memory on the die (`memory:`, no `hbm:`)


def _system(name: str):
    return load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0]


def _hbm_presets() -> list[str]:
    return [n for n in PRESETS if n not in SRAM_ONLY and _system(n).chip.family is not ChipFamily.SYSTOLIC]


def kv_bytes(w, batch: int, tokens: int) -> float:
    """K and V of `tokens` positions of `batch` sequences over all layers, in the cache format."""
    m = w.model
    return batch * tokens * m.layers * 2 * m.kv_heads * m.head_dim * w.dtypes.kv_cache.bytes


def test_the_presets_are_every_single_chip_file_and_the_hbm_chips_those_with_hbm():
    assert {"h200", "b200", "mi300x", "tpu_v6e", "trainium2", "lpu", "wafer"} <= set(PRESETS)
    assert not any("x8" in n or "_x" in n or "nvl" in n for n in PRESETS)
    for name in SRAM_ONLY:
        assert "\nmemory:" in (ROOT / "hw_configs" / f"{name}.yaml").read_text()
    for name in _hbm_presets():
        assert "\nhbm:" in (ROOT / "hw_configs" / f"{name}.yaml").read_text()


def test_kv_bytes_by_hand(llama8b):
    """8 x 6,144 x 32 x 2 x 8 x 128 x 2 B = 6,442,450,944 B."""
    assert kv_bytes(llama8b, 8, 6144) == 6_442_450_944


@pytest.mark.parametrize("name", PRESETS)
def test_a_large_gemm_reaches_55_percent_of_peak(name):
    chip = _system(name).chip
    t = simulate_op(GEMM, chip)
    assert GEMM.flops() / t.time_s >= 0.55 * chip.peak_flops(DType.BF16)


@pytest.mark.parametrize("name", _hbm_presets())
def test_a_gemv_moves_60_percent_of_hbm_bandwidth_and_is_memory_bound(name):
    chip = _system(name).chip
    t = simulate_op(GEMV, chip)
    assert GEMV.min_bytes() / t.time_s >= 0.60 * chip.hbm.peak_bandwidth_bytes_per_s
    assert t.bound.value == "memory"


@pytest.mark.parametrize("name", _hbm_presets())
def test_batch1_decode_gemms_are_memory_bound(name, llama8b):
    step = simulate_step(llama8b, _system(name), Step(Phase.DECODE, 1, 1, 2048))
    gemms = [r for r in step.ops if r.op.kind is OpKind.GEMM]
    bounds = {r.op.name: r.timing.bound.value for r in gemms}
    assert gemms and set(bounds.values()) <= {"memory", "overhead"}, bounds
    for r in gemms:
        if r.timing.bound.value == "overhead":
            assert r.timing.fixed_utilisation >= r.timing.hbm_utilisation, (r.op.name, r.timing)
    memory_s = sum(r.time_s for r in gemms if r.timing.bound.value == "memory")
    assert memory_s >= 0.8 * sum(r.time_s for r in gemms)


@pytest.mark.parametrize("name", _hbm_presets())
def test_the_decode_step_grows_with_context_as_its_kv_bytes_over_bandwidth(name, llama8b):
    system = _system(name)
    short = simulate_step(llama8b, system, Step(Phase.DECODE, 8, 1, 2048)).time_s
    long = simulate_step(llama8b, system, Step(Phase.DECODE, 8, 1, 8192)).time_s
    added = kv_bytes(llama8b, 8, 8192 - 2048) / system.chip.hbm.peak_bandwidth_bytes_per_s
    assert 0.9 <= (long - short) / added <= 1.6


# die area where its size is sourced: (least, most) mm2 and where the file says so
AREAS = {
    "b200": (858, 1716, "two dies, neither over the reticle's 858 mm2"),  # two reticle-limited dies [WP]
    "gb200": (858, 1716, "two dies, neither over the reticle's 858 mm2"),
    "mi300x": (2200, 2600, "2,200-2,600 mm2"),  # 8 XCDs near 115 mm2 and 4 IODs near 370 mm2 [EST]
    "mi325x": (2200, 2600, "2,200-2,600 mm2"),
    # no die size published: the file's [EST] ranges carried through area.py's sum, e.g. TPU v6e
    # (96.7 mm2 of arrays, lanes and SRAM + core logic 60-160 + 2 x 8-16 + 4 x 1-4 + 5-30) / (1 -
    # 0.05-0.2 uncore) = 181.7 / 0.95 = 191 to 334.7 / 0.8 = 418
    "tpu_v6e": (190, 420, "190-420 mm2"),
    "tpu_v7": (405, 940, "405-940 mm2"),  # (197.1 + 2 x 50-160 + 8 x 8-16 + 6 x 1-4 + 20-80) / (1 - u)
    "trainium2": (275, 650, "275-650 mm2"),  # (157.7 + 8 x 6-25 + 4 x 8-16 + 4 x 1-4 + 20-80) / (1 - u)
}


@pytest.mark.parametrize("name", [n for n in PRESETS if not n.startswith("scalesim")])
def test_every_chip_states_its_area(name):
    """Every shipped chip but the SCALE-Sim parity arrays has an area section and an area."""
    from archsim.hardware.chip import system_area

    text = (ROOT / "hw_configs" / f"{name}.yaml").read_text()
    assert "\narea:" in text
    assert system_area(_system(name)).die_mm2 > 0


@pytest.mark.parametrize("name", sorted(AREAS))
def test_areas_within_their_sourced_range(name):
    from archsim.hardware.chip import system_area

    least, most, said = AREAS[name]
    a = system_area(_system(name))
    assert least <= a.die_mm2 <= most
    assert said in (ROOT / "hw_configs" / f"{name}.yaml").read_text()
