"""Hugging Face configs of every architecture archsim reads (tests/data/hf): each gives the model
its card describes, the shipped workloads equal their configs, `archsim run --model` runs each,
and an architecture archsim does not read is refused in one line."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from archsim.api import load_workload as api_workload
from archsim.cli import main
from archsim.config.hf import load_hf_config
from archsim.config.loader import load_workload
from archsim.dtypes import DType
from archsim.graph.params import total_params

DATA = Path(__file__).resolve().parent / "data" / "hf"

# config folder: (parameters the model card states, in billions, text decoder only; what to check)
CARDS = {
    "DeepSeek-V3": (671.0, "mla"),
    "DeepSeek-V3.2-Exp": (671.9, "mla"),  # V3's and an indexer per layer (685B on the card with its MTP layer)
    "DeepSeek-V2-Lite": (15.7, "mla"),
    "Qwen3-30B-A3B": (30.5, "moe"),
    "Qwen3-8B": (8.2, "qk_norm"),
    "Qwen2-7B": (7.6, "qkv_bias"),
    "Qwen1.5-MoE-A2.7B": (14.3, "shared"),
    "gemma-2-9b": (9.24, "window"),
    "gemma-3-27b-it": (27.0, "window"),  # 27.4B with its 0.4B vision encoder, which archsim leaves out
    "gpt-oss-120b": (116.8, "window"),
    "Mistral-7B-v0.1": (7.24, "window"),
    "Mixtral-8x7B-v0.1": (46.7, "moe"),
    "Meta-Llama-3-8B": (8.03, "dense"),
    "Llama-4-Scout-17B-16E": (107.8, "shared"),  # 109B with the vision encoder
    "gpt2": (0.124, "learned"),
    "gpt-j-6b": (6.05, "parallel"),
    "falcon-7b": (6.92, "parallel"),
    "phi-4": (14.7, "dense"),
    # 79.7B less the shared experts' sigmoid gates (48 x 2048, which archsim leaves out)
    "Qwen3-Next-80B-A3B-Instruct": (79.7, "linear"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": (31.6, "mamba"),
}


def test_every_architecture_has_a_config():
    assert sorted(p.name for p in DATA.iterdir()) == sorted(CARDS)


@pytest.mark.parametrize("folder", sorted(CARDS))
def test_config_gives_the_model_of_its_card(folder):
    billions, feature = CARDS[folder]
    m = load_hf_config(str(DATA / folder / "config.json")).model
    assert total_params(m) / 1e9 == pytest.approx(billions, rel=0.01)
    check = {
        "mla": m.is_mla and m.kv_lora_rank == 512,
        "moe": m.is_moe and not m.shared_ffn,
        "qk_norm": m.qk_norm,
        "qkv_bias": m.qkv_bias and not m.o_bias,
        "shared": m.shared_ffn > 0,
        "window": 0 < m.local_layers < m.layers or m.local_layers == m.layers == 32,
        "dense": not m.is_moe and not m.sliding_window,
        "learned": m.max_positions == 1024 and not m.gated,
        "parallel": m.parallel_block and not m.gated,
        "linear": (m.attention_layers, m.linear_layers, m.rotary, m.attn_output_gate) == (12, 36, 64, True),
        "mamba": (m.attention_layers, m.mamba_layers, m.moe_layers, m.rotary, m.gated) == (6, 23, 23, 0, False),
    }
    assert check[feature], (folder, feature)


@pytest.mark.parametrize(
    "folder,workload",
    [
        ("DeepSeek-V3", "deepseek_v3"),
        ("DeepSeek-V3.2-Exp", "deepseek_v32"),
        ("Qwen3-30B-A3B", "qwen3_30b_a3b"),
        ("gemma-2-9b", "gemma2_9b"),
        ("gpt-oss-120b", "gpt_oss_120b"),
        ("Mixtral-8x7B-v0.1", "mixtral_8x7b"),
        ("Qwen3-Next-80B-A3B-Instruct", "qwen3_next_80b"),
        ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron3_nano"),
    ],
)
def test_shipped_workload_is_its_config(folder, workload):
    shipped = load_workload(workload)[0].model
    hf = load_hf_config(str(DATA / folder / "config.json")).model
    assert replace(hf, name=shipped.name) == shipped


def test_windows_of_each_family():
    def read(folder):
        return load_hf_config(str(DATA / folder / "config.json")).model

    # Gemma 2: the even layers of 42 are local; Gemma 3: five local to one global, 62 - 62 // 6;
    # gpt-oss: layer_types names 18 sliding of 36; Llama 4: chunked attention on the 36 rotary layers of 48
    assert (read("gemma-2-9b").local_layers, read("gemma-3-27b-it").local_layers) == (21, 52)
    assert read("gpt-oss-120b").local_layers == 18 and read("gpt-oss-120b").sliding_window == 128
    assert (read("Llama-4-Scout-17B-16E").local_layers, read("Llama-4-Scout-17B-16E").sliding_window) == (36, 8192)


def test_notes_say_what_is_costed_differently():
    notes = "; ".join(load_hf_config(str(DATA / "DeepSeek-V3" / "config.json")).unmodelled)
    assert "multi-token prediction layer(s) not run" in notes
    notes = "; ".join(load_hf_config(str(DATA / "Llama-4-Scout-17B-16E" / "config.json")).unmodelled)
    assert "chunked attention costed as a sliding window of 8192 tokens" in notes


def test_unknown_architecture_is_one_line_and_exit_2(tmp_path, capsys):
    cfg = json.loads((DATA / "Meta-Llama-3-8B" / "config.json").read_text())
    cfg["architectures"] = ["MambaForCausalLM"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg, indent=2))
    assert main(["run", "--model", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"{path}:2: architectures: 'MambaForCausalLM' is not an architecture archsim reads")


def test_workload_dtypes_win_unless_asked(tmp_path):
    gemma = str(DATA / "gemma-2-9b" / "config.json")  # its checkpoint is fp32
    assert load_hf_config(gemma).dtype is DType.FP32
    kept = api_workload("llama3_8b", hf_config=gemma).workload
    assert kept.dtypes.weights is DType.BF16
    taken = api_workload("llama3_8b", hf_config=gemma, hf_dtypes=True).workload
    assert (taken.dtypes.weights, taken.dtypes.kv_cache) == (DType.FP32, DType.FP32)
    # DeepSeek's fp8 checkpoint: fp8 weights and fp8 GEMM inputs (W8A8); gpt-oss's MXFP4 experts
    ds = api_workload("llama3_8b", hf_config=str(DATA / "DeepSeek-V3" / "config.json"), hf_dtypes=True).workload
    assert (ds.dtypes.weights, ds.dtypes.gemm_input, ds.dtypes.activations) == (DType.FP8, DType.FP8, DType.BF16)
    oss = api_workload("llama3_8b", hf_config=str(DATA / "gpt-oss-120b" / "config.json"), hf_dtypes=True).workload
    assert (oss.dtypes.experts, oss.dtypes.weights) == (DType.MXFP4, DType.BF16)


def test_model_dtypes_flag_needs_a_model(capsys):
    assert main(["run", "--model-dtypes", "--quiet"]) == 2
    assert "--model-dtypes" in capsys.readouterr().err


# the hardware and layout each model fits (bf16 unless --model-dtypes)
RUNS = {
    "DeepSeek-V3": ["--hw", "h200x8", "--tp", "8", "--model-dtypes"],
    "DeepSeek-V3.2-Exp": ["--hw", "h200x8", "--tp", "8", "--model-dtypes"],
    "Llama-4-Scout-17B-16E": ["--hw", "h200x8", "--tp", "2"],
    "gpt-oss-120b": ["--hw", "h200x8", "--tp", "2"],
    "Qwen3-Next-80B-A3B-Instruct": ["--hw", "h200x8", "--tp", "2"],
}


@pytest.mark.parametrize("folder", sorted(CARDS))
def test_run_with_every_architecture(folder, capsys):
    args = ["run", "--model", str(DATA / folder / "config.json"), "--batch", "1", "--prompt", "32", "--generate", "2"]
    assert main([*args, *RUNS.get(folder, []), "--quiet", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tpot_s"] > 0 and out["config"]["workload"]["model"]["layers"] > 0
