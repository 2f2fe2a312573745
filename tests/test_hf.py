"""Models from Hugging Face config.json files: the shipped models again, warnings, errors."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.config.hf import load_hf_config
from archsim.config.loader import load_workload
from archsim.errors import ConfigError
from archsim.hardware import DType

DATA = Path(__file__).resolve().parent / "data" / "hf"
LLAMA3_8B = DATA / "Meta-Llama-3-8B" / "config.json"

# mistralai/Mixtral-8x7B-v0.1 config.json (public values)
MIXTRAL = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}


def _write(tmp_path: Path, data, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def test_llama3_8b_config_gives_the_shipped_model():
    hf = load_hf_config(str(LLAMA3_8B))
    shipped, _ = load_workload("llama3_8b")
    assert hf.model.name == "Meta-Llama-3-8B"  # the folder of the config.json
    assert replace(hf.model, name=shipped.model.name) == shipped.model
    assert hf.dtype is DType.BF16
    assert hf.unmodelled == ()  # nothing in it changes the cost of a step


def test_mixtral_config_gives_the_shipped_moe_model(tmp_path):
    hf = load_hf_config(str(_write(tmp_path, {**MIXTRAL, "_name_or_path": "mistralai/Mixtral-8x7B-v0.1"})))
    shipped, _ = load_workload("mixtral_8x7b")
    assert hf.model.name == "Mixtral-8x7B-v0.1"
    assert replace(hf.model, name=shipped.model.name) == shipped.model
    assert hf.model.experts == 8 and hf.model.top_k == 2


def test_fields_archsim_cannot_model_are_named(tmp_path):
    llama = {
        "architectures": ["LlamaForCausalLM"],
        **{k: v for k, v in MIXTRAL.items() if k not in ("architectures", "num_local_experts", "num_experts_per_tok")},
        "model_type": "llama",
        "rope_scaling": {"type": "linear", "factor": 2.0},  # positions only: nothing to cost
        "new_thing": 3,
        "empty_thing": None,
    }
    hf = load_hf_config(str(_write(tmp_path, llama)))
    assert hf.unmodelled == ("new_thing=3 (not modelled)",)
    # a Mistral's window is read: every layer attends to the last 4,096 tokens
    mistral = {**llama, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096}
    del mistral["new_thing"]
    m = load_hf_config(str(_write(tmp_path, mistral))).model
    assert (m.sliding_window, m.local_layers) == (4096, 32)
    # Qwen2 keeps a window in its config but uses it only with use_sliding_window
    qwen = {**mistral, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "use_sliding_window": False}
    m = load_hf_config(str(_write(tmp_path, qwen))).model
    assert m.local_layers == 0 and m.qkv_bias


def test_defaults_kv_heads_and_head_dim(tmp_path):
    cfg = {
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "vocab_size": 32000,
        "head_dim": None,
    }
    m = load_hf_config(str(_write(tmp_path, cfg, "tiny.json"))).model
    assert (m.kv_heads, m.head_dim, m.tied_embeddings, m.name) == (16, 128, False, "tiny")


def test_every_problem_is_reported_with_the_file(tmp_path):
    cfg = {**MIXTRAL, "num_key_value_heads": 5, "hidden_size": "4096", "torch_dtype": "float64"}
    del cfg["vocab_size"]
    path = _write(tmp_path, cfg)
    with pytest.raises(ConfigError) as err:
        load_hf_config(str(path))
    text = str(err.value)
    assert f"{path}: vocab_size: missing required field" in text
    assert "hidden_size: expected a whole number above zero (got '4096')" in text
    assert "num_key_value_heads: must divide the 32 attention heads (got 5)" in text
    assert "torch_dtype: expected one of" in text
    line = next(i + 1 for i, s in enumerate(path.read_text().splitlines()) if '"hidden_size"' in s)
    assert f"{path}:{line}: hidden_size" in text


def test_bad_json_and_missing_file(tmp_path):
    path = _write(tmp_path, '{\n  "hidden_size": 4096,\n  oops\n}')
    with pytest.raises(ConfigError) as err:
        load_hf_config(str(path))
    assert str(err.value).startswith(f"{path}:3: not valid JSON")
    with pytest.raises(ConfigError, match="no such file"):
        load_hf_config(str(tmp_path / "absent.json"))


def test_run_with_model_flag(tmp_path, capsys):
    out = tmp_path / "r.json"
    mistral = {**MIXTRAL, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "new_thing": 7}
    mistral["_name_or_path"] = "x/Mistral-7B"
    for key in ("num_local_experts", "num_experts_per_tok"):
        del mistral[key]
    cfg = _write(tmp_path, mistral)
    assert main(["run", "--model", str(cfg), "--prompt", "64", "--generate", "2", "--quiet", "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {cfg}: archsim does not model: new_thing=7 (not modelled)" in err
    data = json.loads(out.read_text())
    assert data["config"]["workload"]["name"] == "Mistral-7B"
    assert data["config"]["workload"]["model"]["vocab"] == 32000
    assert data["config"]["workload"]["scenario"]["prompt_tokens"] == 64


def test_run_with_bad_model_exits_2(tmp_path, capsys):
    cfg = _write(tmp_path, "[1, 2]")
    assert main(["run", "--model", str(cfg)]) == 2
    assert f"{cfg}: expected a JSON object" in capsys.readouterr().err
