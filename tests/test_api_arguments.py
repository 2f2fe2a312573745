"""The Python API checks every argument as the command line checks its flag, every refusal is
an `archsim.ConfigError`, and inputs that cannot be physically (a context past the model's
positions, an L2 larger than the memory it caches, a mechanism archsim does not model) are
refused by name. Every refusal here comes before any simulation."""

import json
import math
from pathlib import Path

import pytest

import archsim
import archsim.api
from archsim.config.hf import load_hf_config
from archsim.config.hf_unmodelled import max_model_len

DATA = Path(__file__).resolve().parent / "data" / "hf"
LLAMA3_8B = DATA / "Meta-Llama-3-8B" / "config.json"
SMALL = {"scenario": {"batch": 1, "prompt_tokens": 16, "output_tokens": 4}}


def test_every_refusal_is_a_config_error_exported_from_archsim():
    for name in archsim.api.REFUSALS:
        cls = getattr(archsim, name)
        assert issubclass(cls, archsim.ConfigError) and name in archsim.__all__, name
    # a refusal past the loader carries its one message, and survives a trip through pickle
    # (a sweep's workers send theirs back that way)
    import pickle

    err = pickle.loads(pickle.dumps(archsim.DoesNotFitError("needs 2 TB")))
    assert type(err) is archsim.DoesNotFitError and str(err) == "needs 2 TB"
    assert [str(p) for p in err.problems] == ["needs 2 TB"]


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"ep": -1}, "archsim.run: ep: must be greater than zero (got -1)"),  # had run, with negative energy
        ({"tp": 0}, "archsim.run: tp: must be greater than zero (got 0)"),  # had ended in ZeroDivisionError
        ({"tp": True}, "archsim.run: tp: must be a whole number (got True)"),
        ({"pp": "2"}, "archsim.run: pp: must be a whole number (got '2')"),
        ({"pp": 2.0}, "archsim.run: pp: must be a whole number (got 2.0)"),
        ({"tp": 2**31}, "archsim.run: tp: must be at most 2,147,483,647 (got 2147483648)"),
        ({"kv_stride": 0}, "archsim.run: kv_stride: must be greater than zero (got 0)"),
        ({"kv_stride": math.nan}, "archsim.run: kv_stride: must be a whole number (got nan)"),
        ({"progress": 3}, "archsim.run: progress: must be a function or None (got int)"),
    ],
)
def test_run_refuses_each_argument_as_its_flag(keywords, message):
    with pytest.raises(archsim.ConfigError) as err:
        archsim.run("h200", archsim.load_workload("llama3_8b", SMALL), **keywords)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: archsim.run(5, "llama3_8b"), "archsim.run: hardware: must be an archsim.Hardware"),
        (lambda: archsim.run(archsim.load_workload("llama3_8b"), "llama3_8b"), "(got Workload)"),
        (lambda: archsim.load_system("h200", [1]), "archsim.load_system: params: must be a mapping"),
        (lambda: archsim.load_system(b"h200"), "archsim.load_system: name_or_path: must be a shipped name"),
        (lambda: archsim.load_workload("llama3_8b", hf_config=3), "archsim.load_workload: hf_config: must be a path"),
        (lambda: archsim.load_workload("llama3_8b", hf_dtypes="yes"), "hf_dtypes: must be True or False"),
        (lambda: archsim.with_params(None, {}), "archsim.with_params: obj: must be a Hardware or a Workload"),
        (lambda: archsim.generate_requests(1.0, 0, 10, 10), "archsim.generate_requests: count: must be greater"),
        (lambda: archsim.generate_requests(math.nan, 4, 10, 10), "rate_per_s: must be at most 1e+06 (got nan)"),
        (lambda: archsim.generate_requests(1.0, 4, 10.5, 10), "prompt_tokens: must be a whole number (got 10.5)"),
        (lambda: archsim.generate_requests(1.0, 4, "lognormal:x", 10), "prompt_tokens: expected N"),
        (lambda: archsim.generate_requests(1.0, 4, 10, 10, arrival=3), "arrival: must be one of poisson, gamma"),
        (lambda: archsim.generate_requests(1.0, 4, 10, 10, seed=1.5), "seed: must be a whole number (got 1.5)"),
        (lambda: archsim.load_requests(5), "archsim.load_requests: name_or_path: must be a path"),
        (lambda: archsim.load_requests("azure_llm_2023_conv", count="3"), "count: must be a whole number"),
        (lambda: archsim.serve("h200", "llama3_8b", [1]), "archsim.serve: requests: must be requests"),
        (lambda: archsim.serve("h200", "llama3_8b", "x", bogus=1), "archsim.serve: bogus: is not a keyword"),
        (lambda: archsim.serve("h200", "llama3_8b", "x", slo_ttft_s="0.2"), "a duration needs its unit"),
        (lambda: archsim.serve("h200", "llama3_8b", "x", slo_tpot_s="-5ms"), "slo_tpot_s: must be greater than"),
        (lambda: archsim.serve("h200", "llama3_8b", "x", rate_per_s=-1.0), "rate_per_s: must be at least 1e-06"),
        (lambda: archsim.serve("h200", "llama3_8b", "x", options=3), "options: must be an archsim.ServeOptions"),
        (lambda: archsim.sweep(3, "out"), "archsim.sweep: spec: must be a path"),
        (lambda: archsim.sweep("h200_variants", "out", workers=-1), "workers: must be greater than zero (got -1)"),
        (lambda: archsim.sweep("h200_variants", "out", allow_paths="/tmp"), "allow_paths: must be a list of paths"),
        (lambda: archsim.load_sweep(5), "archsim.load_sweep: out_dir: must be a path"),
        (lambda: archsim.load_sweep("/nonexistent/archsim"), "no such results folder"),
    ],
)
def test_no_argument_reaches_the_simulator_unchecked(call, message):
    with pytest.raises(archsim.ConfigError) as err:
        call()
    assert message in str(err.value)


def test_a_duration_is_taken_with_its_unit_as_the_flag_takes_it():
    from archsim.api.arguments import duration_s

    assert duration_s("w", "k", "200ms") == pytest.approx(0.2)
    assert duration_s("w", "k", "1.5 s") == pytest.approx(1.5)
    assert duration_s("w", "k", 0.2) == 0.2
    with pytest.raises(archsim.ConfigError, match="must be at most 86,400 s"):
        duration_s("w", "k", "100000s")


def test_an_l2_larger_than_the_main_memory_is_refused():
    # H200: 143,771 MiB of HBM; an L2 of 200 GiB would hold more than there is to cache
    with pytest.raises(archsim.ConfigError, match=r"l2\.capacity: 214,748,364,800 bytes is more than the main memory"):
        archsim.load_system("h200", {"l2.capacity": "200 GiB"})
    archsim.load_system("h200", {"l2.capacity": "60 MiB"})  # the datasheet's: fine


def test_the_power_limit_is_checked_against_what_the_chip_draws_idle():
    with pytest.raises(archsim.ConfigError, match=r"power\.limit: 1 W is below what the chip draws"):
        archsim.load_system("h200", {"power.limit": "1 W"})


def _hf(tmp_path: Path, **fields) -> str:
    data = {**json.loads(LLAMA3_8B.read_text()), **fields}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, indent=1))
    return str(path)


def test_max_model_len_is_derived_as_serving_engines_derive_it():
    assert max_model_len({"max_position_embeddings": 8192}) == (8192, "max_position_embeddings")
    # the smallest of the length fields present
    assert max_model_len({"max_position_embeddings": 8192, "seq_length": 4096}) == (4096, "seq_length")
    # linear scaling stretches the positions: 4,096 x 4 = 16,384
    assert max_model_len({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4}})[0] == 16384
    # YaRN from its original length: 4,096 x 40 = 163,840 (DeepSeek-V3's)
    deepseek = load_hf_config(str(DATA / "DeepSeek-V3" / "config.json"))
    assert deepseek.max_model_len is not None and deepseek.max_model_len[0] == 163840
    # Llama 3.1's scaling keeps the stated maximum
    llama31 = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert max_model_len(llama31) == (131072, "max_position_embeddings")
    assert max_model_len({"vocab_size": 5}) is None
    assert max_model_len({"max_position_embeddings": "8k"}) is None  # not a length: no bound taken


def test_a_context_past_the_models_maximum_is_refused_with_both_numbers():
    # Llama 3 8B's max_position_embeddings is 8,192; 8,000 + 500 = 8,500 tokens
    w = archsim.load_workload(
        "llama3_8b", hf_config=str(LLAMA3_8B), scenario={"prompt_tokens": 8000, "output_tokens": 500}
    )
    with pytest.raises(archsim.RefusedError, match=r"8,500 tokens, more than the model's maximum of 8,192"):
        archsim.run("h200", w)
    requests = archsim.generate_requests(1.0, 2, 8000, 500)
    with pytest.raises(archsim.RefusedError, match=r"request 0 of .*8,500 tokens, more than .* 8,192"):
        archsim.serve("h200", w, requests)
    with pytest.raises(archsim.ConfigError, match=r"max_model_len: 10,000 tokens is more than .* 8,192"):
        archsim.serve("h200", w, requests, max_model_len=10000)


def test_a_learned_position_table_bounds_the_context():
    # GPT-2: 1,024 learned positions; 1,000 + 100 = 1,100 tokens
    w = archsim.load_workload("llama3_8b", hf_config=str(DATA / "gpt2" / "config.json"))
    with pytest.raises(archsim.RefusedError, match=r"1,100 tokens, more than the model's maximum of 1,024"):
        archsim.run("h200", w.with_params({"scenario.prompt_tokens": 1000, "scenario.output_tokens": 100}))


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("ssm_state_size", 128, "state-space (Mamba) layers"),
        ("hybrid_override_pattern", "M-M-M*-", "state-space (Mamba) layers"),
        ("linear_num_value_heads", 32, "linear-attention layers"),
        ("full_attention_interval", 4, "linear-attention layers"),
        ("index_topk", 2048, "sparse attention"),
        ("cross_attention_layers", [3, 8], "cross-attention"),
        ("sliding_window", 4096, "an attention window"),  # a Llama reads none: it would cost full attention
        ("attention_window", 512, "an attention window"),
    ],
)
def test_a_mechanism_archsim_does_not_model_is_refused_by_name(tmp_path, field, value, what):
    path = _hf(tmp_path, **{field: value})
    with pytest.raises(archsim.ConfigError) as err:
        archsim.load_workload("llama3_8b", hf_config=path)
    message = str(err.value)
    # named by the generic refusal, or by the family that reads the field (which says which does)
    assert (f"{field}: {what}" in message and "not modelled" in message) or (
        f"{field}: " in message and "are read for" in message
    )
    assert message.count(f"{field}:") == 1  # refused once


def test_a_mechanism_left_off_is_no_refusal(tmp_path):
    # null, false, zero, empty: nothing on; Qwen's configs keep a window that use_sliding_window turns off
    path = _hf(tmp_path, ssm_state_size=None, add_cross_attention=False, sliding_window=4096, use_sliding_window=False)
    archsim.load_workload("llama3_8b", hf_config=path)
    # a family that reads the field models it: Mistral's window
    mistral = _hf(tmp_path, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=4096)
    assert archsim.load_workload("llama3_8b", hf_config=mistral).workload.model.sliding_window == 4096
