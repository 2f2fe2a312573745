"""Golden results: reference chips x models give the recorded numbers until a change means to
alter them (then run tools/regen_golden.py and say why in the commit)."""

import json
from pathlib import Path

import pytest

GOLDEN = {  # name: (hw, workload, batch, prompt, generate)
    "h200_llama3_8b": ("h200", "llama3_8b", 4, 512, 16),
    "h200_mixtral_8x7b": ("h200", "mixtral_8x7b", 2, 256, 8),
    "a100_llama2_7b": ("a100", "llama2_7b", 8, 256, 8),
    "dataflow_2stack_llama3_8b": ("dataflow_2stack", "llama3_8b", 1, 512, 8),
}
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def golden_record(hw: str, workload: str, batch: int, prompt: int, generate: int) -> dict:
    from archsim.commands.run import load_run_inputs
    from archsim.config.resolved import run_options
    from archsim.runner.generation import KV_STRIDE, run_generation

    system, w, resolved = load_run_inputs(hw, workload, batch, prompt, generate)
    digest = resolved.with_options(**run_options(KV_STRIDE)).hash
    r = run_generation(w, system)
    return {
        "config_hash": digest,
        "ttft_s": r.ttft_s,
        "tpot_s": r.tpot_s,
        "prefill_ops_s": {op.op.name: op.time_s for op in r.prefill.ops},
        "decode_ops_s": {op.op.name: op.time_s for op in r.decode.ops},
    }


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name):
    path = GOLDEN_DIR / f"{name}.json"
    expected = json.loads(path.read_text())
    got = json.loads(json.dumps(golden_record(*GOLDEN[name])))
    assert got["config_hash"] == expected["config_hash"], "config changed: regenerate on purpose"
    for key in ("ttft_s", "tpot_s"):
        assert got[key] == pytest.approx(expected[key], rel=1e-9), key
    for phase in ("prefill_ops_s", "decode_ops_s"):
        assert got[phase] == pytest.approx(expected[phase], rel=1e-9), phase
