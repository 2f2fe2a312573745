"""The Python API: inputs validated like files, results that match the command line."""

import json

import pytest

import archsim
from archsim.cli import main
from archsim.errors import ConfigError

SMALL = {"scenario": {"batch": 2, "prompt_tokens": 128, "output_tokens": 4}}


def problems(call) -> list[str]:
    with pytest.raises(ConfigError) as err:
        call()
    return [str(p) for p in err.value.problems]


def test_with_params_sets_a_value_by_dotted_path():
    """8 Gbps per pin: the peak HBM bandwidth is 6 stacks x 16 channels x 64 bits x 8e9 / 8
    = 6.144e12 bytes/s; the other values stay the H200's."""
    h200 = archsim.load_system("h200")
    fast = archsim.with_params(h200, {"hbm.data_rate": "8 Gbps"})
    assert fast.system.chip.hbm.peak_bandwidth_bytes_per_s == pytest.approx(6 * 16 * 64 * 8e9 / 8)
    assert fast.system.chip.clock_hz == h200.system.chip.clock_hz
    assert fast.config_hash != h200.config_hash
    assert archsim.load_system("h200", hbm={"data_rate": "8 Gbps"}) == fast  # by section, the same design


def test_python_values_get_the_messages_a_file_gets():
    h200 = archsim.load_system("h200")
    assert problems(lambda: h200.with_params({"hbm.data_rate": "-8 Gbps"})) == [
        "with_params: hbm.data_rate: must be greater than zero (got '-8 Gbps')"
    ]
    assert problems(lambda: h200.with_params({"hbm.dat_rate": "8 Gbps"})) == [
        "with_params: hbm.dat_rate: hardware.hbm has no key 'dat_rate'; did you mean 'data_rate'?"
    ]
    assert problems(lambda: h200.with_params({"clock": 1.5e9})) == [
        "with_params: clock: a unit is required, e.g. '1.98 GHz' (got 1500000000.0)"
    ]
    # a cross-field check that needs the built chip: 2 KiB is the smallest double-buffered bf16 tile
    assert problems(lambda: h200.with_params({"cores.sram.capacity": "1 KiB"})) == [
        "with_params: cores.sram.capacity: too small for the smallest legal tile (2048 bytes needed, got 1024)"
    ]


def test_a_mapping_is_validated_like_a_file(tmp_path):
    data = {"name": "tiny", "model": {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 3, "head_dim": 64}}
    assert problems(lambda: archsim.load_workload(data)) == [
        "<python>: model.kv_heads: kv_heads (3) must divide heads (8)",
        "<python>: model.ffn: missing required key",
        "<python>: model.vocab: missing required key",
        "<python>: scenario: missing required key",
    ]


def test_a_system_built_without_validation_is_refused():
    from dataclasses import replace

    system = archsim.load_system("h200").system
    bad = replace(system, chip=replace(system.chip, hbm=replace(system.chip.hbm, data_rate_bits_per_s=-1.0)))
    with pytest.raises(ConfigError, match="not validated"):
        archsim.run(bad, "llama3_8b")


def test_run_matches_the_command_line(tmp_path):
    """The API's run and `archsim run --json` are the same document, keyed by the same hash."""
    report = archsim.run("h200", archsim.load_workload("llama3_8b", SMALL))
    out = tmp_path / "r.json"
    assert main(["run", "--batch", "2", "--prompt", "128", "--generate", "4", "--json", str(out), "--quiet"]) == 0
    cli = json.loads(out.read_text())
    assert cli["config_hash"] == report.config_hash
    assert cli["tpot_s"] == report.tpot_s and cli["ttft_s"] == report.ttft_s
    assert json.loads(json.dumps(report.to_dict())) == cli


def test_run_results_as_a_table():
    pandas = pytest.importorskip("pandas")
    report = archsim.run("h200", archsim.load_workload("llama3_8b", SMALL))
    frame = report.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    prefill = frame[frame.phase == "prefill"]
    assert prefill.step_time_s.sum() == pytest.approx(report.ttft_s, rel=1e-12)  # the ops add up to the step
    assert len(frame) == len(report.result.prefill.ops) + len(report.result.decode.ops)
    assert len(report.decode_steps()["time_s"]) == 3  # 4 tokens: the first from prefill, then 3 steps


def test_serve_reports_every_request():
    pytest.importorskip("pandas")
    requests = archsim.generate_requests(20.0, 30, 64, 8, seed=1)
    report = archsim.serve("h200", "llama3_8b", requests, slo_ttft_s=0.2)
    frame = report.to_pandas()
    assert len(frame) == report.metrics.requests == 30
    assert (frame.first_token_s >= frame.arrival_s).all()
    assert frame.ttft_s.mean() == pytest.approx(report.metrics.ttft_s.mean, rel=1e-9)
    assert report.to_dict()["config_hash"] == report.config_hash


def test_hugging_face_model_and_its_warnings():
    from pathlib import Path

    path = Path(__file__).parent / "data" / "hf" / "Meta-Llama-3-8B" / "config.json"
    w = archsim.load_workload("llama3_8b", hf_config=str(path))
    assert w.workload.model.layers == 32 and w.workload.model.kv_heads == 8
    assert all("does not model" in text for text in w.warnings)


def test_the_api_is_loaded_on_first_use():
    import subprocess
    import sys

    code = "import sys, archsim; assert 'archsim.api' not in sys.modules; archsim.load_system; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
