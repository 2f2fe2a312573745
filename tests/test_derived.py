"""Totals set by path that the model turns into physical parameters (archsim/config/derived.py),
and `--set` paths with or without their `hardware.`/`workload.` root."""

import pytest

import archsim
from archsim.cli import main
from archsim.config.paths import path_problem
from archsim.dtypes import DType

H200 = archsim.load_system("h200")


def test_hbm_bandwidth_sets_the_pin_rate():
    """9.6 TB/s over 6 stacks x 16 channels x 64 bits: 9.6e12 x 8 / 6144 = 12.5 Gb/s per pin."""
    hw = archsim.with_params(H200, {"hbm.bandwidth": "9.6 TB/s"})
    assert hw.system.chip.hbm.data_rate_bits_per_s == pytest.approx(12.5e9, rel=1e-12)
    assert hw.system.chip.hbm.peak_bandwidth_bytes_per_s == pytest.approx(9.6e12, rel=1e-12)
    # the stacks given with it are counted: 8 stacks x 16 x 64 bits at 9.6 TB/s is 9.375 Gb/s
    hw = archsim.with_params(H200, {"hbm.stacks": 8, "hbm.bandwidth": "9.6 TB/s"})
    assert hw.system.chip.hbm.data_rate_bits_per_s == pytest.approx(9.375e9, rel=1e-12)


def test_matrix_peak_scales_the_rate_per_pe_or_the_units_per_core():
    peak = H200.system.chip.peak_flops(DType.BF16)  # 2 x 4 x 16 x 32 x 132 x 1.98 GHz = 1.0705 PFLOP/s
    assert peak == pytest.approx(2 * 4 * 16 * 32 * 132 * 1.98e9)
    doubled = archsim.with_params(H200, {"cores.matrix_units.peak": f"{2 * peak} FLOP/s"}).system.chip
    assert doubled.peak_flops(DType.BF16) == pytest.approx(2 * peak)
    assert dict(doubled.core.array.k_per_cycle) == {"bf16": 2, "fp16": 2, "fp8": 4, "int8": 4}  # ratios kept
    halved = archsim.with_params(H200, {"cores.matrix_units.peak": f"{peak / 2} FLOP/s"}).system.chip
    assert halved.core.matrix_units == 2 and halved.peak_flops(DType.BF16) == pytest.approx(peak / 2)
    with pytest.raises(archsim.ConfigError, match=r"cores.matrix_units.peak: .*nearest it can give are"):
        archsim.with_params(H200, {"cores.matrix_units.peak": "1.1 PFLOP/s"})
    with pytest.raises(archsim.ConfigError, match="FLOP/s is due"):
        archsim.with_params(H200, {"cores.matrix_units.peak": "3 TB/s"})
    assert path_problem(("hardware", "cores", "matrix_units", "peak")) is None  # a sweep may name it


def test_doubling_hbm_bandwidth_makes_batch_1_decode_twice_as_fast_where_bandwidth_binds_alone():
    """The dataflow chip streams its weights with no per-core in-flight limit or launches: its
    batch-1 decode is HBM time alone, so twice the bandwidth is twice the speed (within 10%).
    On an H200 the same doubling gives ~1.57x: launches and memory latency do not shrink
    (`archsim explain` shows the elasticity)."""
    wl = archsim.load_workload("llama3_8b", scenario={"batch": 1, "prompt_tokens": 128, "output_tokens": 4})
    for chip, low, high in (("dataflow_2stack", 1.8, 2.2), ("h200", 1.3, 1.8)):
        hw = archsim.load_system(chip)
        total = hw.system.chip.hbm.peak_bandwidth_bytes_per_s
        fast = archsim.with_params(hw, {"hbm.bandwidth": f"{2 * total} B/s"})
        speedup = archsim.run(hw, wl).tpot_s / archsim.run(fast, wl).tpot_s
        assert low <= speedup <= high, (chip, speedup)


def test_set_takes_a_path_with_or_without_its_root(tmp_path, capsys):
    import json

    out = [tmp_path / f"{i}.json" for i in range(3)]
    base = ["run", "--prompt", "64", "--generate", "2", "--quiet"]
    assert main([*base, "--set", "hardware.hbm.bandwidth=9.6 TB/s", "--json", str(out[0])]) == 0
    assert main([*base, "--set", "hbm.bandwidth=9.6 TB/s", "--json", str(out[1])]) == 0
    assert main([*base, "--set", "scenario.batch=2", "--json", str(out[2])]) == 0
    a, b, c = (json.loads(p.read_text()) for p in out)
    assert a["config_hash"] == b["config_hash"] and a["tpot_s"] == b["tpot_s"]
    assert c["config"]["workload"]["scenario"]["batch"] == 2
    capsys.readouterr()
    assert main([*base, "--set", "hbm.bandwidth=3 GHz"]) == 2
    assert "--set: hardware.hbm.bandwidth: unit 'GHz' is Hz, but bytes/s is due" in capsys.readouterr().err


def test_a_sweep_takes_a_total_as_a_parameter(tmp_path):
    spec = tmp_path / "bw.yaml"
    spec.write_text(
        "name: hbm_bandwidth\ndescription: decode against HBM bandwidth\nhardware: h200\nworkload: llama3_8b\n"
        "set:\n  workload.scenario.prompt_tokens: 64\n  workload.scenario.output_tokens: 2\n"
        "parameters:\n  hbm_tbps:\n    path: hardware.hbm.bandwidth\n    values: [4.8, 9.6]\n    unit: TB/s\n"
        "objectives:\n  tpot_ms: tpot_s * 1000\n"
    )
    _, results = archsim.sweep(str(spec), tmp_path / "out", workers=1)
    tpot = {row["hbm_tbps"]: row["tpot_ms"] for row in results.rows()}
    direct = archsim.load_workload("llama3_8b", scenario={"prompt_tokens": 64, "output_tokens": 2})
    fast = archsim.with_params(H200, {"hbm.bandwidth": "9.6 TB/s"})
    assert tpot[9.6] == pytest.approx(archsim.run(fast, direct).tpot_s * 1000, rel=1e-12)
    assert tpot[9.6] < tpot[4.8]
