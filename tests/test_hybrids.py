"""Hybrid models: Gated DeltaNet (Qwen3-Next) and Mamba-2 (Nemotron 3 Nano) layers beside a few
attention layers. Parameter counts, KV bytes per token and state bytes per sequence derived by
hand from the config.json values; the chunked prefill's FLOPs and bytes per chunk; a decode
step that grows with context only by the attention layers' KV, its constant state traffic in
the op table; the serving pool's state slots."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from archsim.api import load_workload as api_workload
from archsim.cli import main
from archsim.config.hf import load_hf_config
from archsim.config.loader import load_system, load_workload
from archsim.dtypes import DType
from archsim.errors import ConfigError
from archsim.graph.builder import build_step
from archsim.graph.model import Phase
from archsim.graph.ops import OpKind, Scaling, VectorOp
from archsim.graph.parallel import Parallelism, ParallelismError, check_parallelism, shard_model
from archsim.graph.params import active_params, total_params
from archsim.graph.recurrent import gdn_chunk_flops, mamba_chunk_flops
from archsim.graph.step import Step
from archsim.runner.generation import simulate_step
from archsim.runner.memory import footprint
from archsim.serving.kvpool import size_pool


@pytest.fixture(scope="module")
def qwen():
    return load_workload("qwen3_next_80b")[0]


@pytest.fixture(scope="module")
def nemotron():
    return load_workload("nemotron3_nano")[0]


def test_qwen3_next_parameters(qwen):
    # per Gated DeltaNet layer: in_proj_qkvz 2048 x (2 x 16 x 128 + 2 x 32 x 128) = 25,165,824,
    # in_proj_ba 2048 x 64 = 131,072, conv 8192 channels x 4 = 32,768, dt_bias and A_log 64,
    # the gated norm 128, out_proj 4096 x 2048 = 8,388,608: 33,718,464
    # per attention layer: q and its gate 2048 x 8192 = 16,777,216, k and v 2048 x 512 x 2 =
    # 2,097,152, o 4096 x 2048 = 8,388,608, q/k norms 512: 27,263,488
    # per MoE: 512 experts x 3 x 2048 x 512 = 1,610,612,736, router 2048 x 512 = 1,048,576,
    # shared 3 x 2048 x 512 = 3,145,728: 1,614,807,040; two norms 4,096 per layer
    # embedding and LM head 151936 x 2048 each = 311,164,928; final norm 2,048
    layers = 36 * 33_718_464 + 12 * 27_263_488 + 48 * (1_614_807_040 + 4_096)
    assert total_params(qwen.model) == layers + 2 * 311_164_928 + 2_048 == 79_674_292_992
    # 10 of 512 experts: 10 x 3 x 2048 x 512 = 31,457,280 (+ router and shared) per layer
    active = 36 * 33_718_464 + 12 * 27_263_488 + 48 * (31_457_280 + 1_048_576 + 3_145_728 + 4_096)
    assert active_params(qwen.model) == active + 2 * 311_164_928 + 2_048 == 3_874_831_104


def test_nemotron3_nano_parameters(nemotron):
    # per Mamba-2 layer: in_proj 2688 x (4096 + 6144 + 64) = 27,697,152, out_proj 4096 x 2688 =
    # 11,010,048, conv 6144 channels x (4 taps + bias) = 30,720, dt_bias, A_log, D 192, norm
    # 4096: 38,742,208
    # per attention layer: qkv 2688 x (4096 + 2 x 256) = 12,386,304, o 4096 x 2688 = 11,010,048
    # per MoE: 128 experts x 2 x 2688 x 1856 = 1,277,165,568 (squared ReLU, not gated), router
    # 2688 x 128 = 344,064, shared 2 x 2688 x 3712 = 19,955,712: 1,297,465,344
    # one norm per block: 52 x 2688; embedding and LM head 131072 x 2688 each; final norm 2688
    expected = 23 * 38_742_208 + 6 * 23_396_352 + 23 * 1_297_465_344 + 52 * 2_688 + 2 * 352_321_536 + 2_688
    assert total_params(nemotron.model) == expected == 31_577_937_344


def test_kv_and_state_bytes(qwen, nemotron):
    bf16, fp32 = DType.BF16, DType.FP32
    # KV: only the attention layers cache it; K and V of 2 heads of 256 (Qwen) or 128 (Nemotron)
    assert qwen.model.kv_bytes_per_token(bf16) == 12 * 2 * 2 * 256 * 2 == 24_576
    assert nemotron.model.kv_bytes_per_token(bf16) == 6 * 2 * 2 * 128 * 2 == 6_144
    # state: 32 value heads x 128 x 128 in fp32 and the conv's last 3 inputs of 8192 channels in
    # bf16, per Gated DeltaNet layer; 64 heads x 64 x 128 in fp32 and 3 x 6144 in bf16 per Mamba
    assert qwen.model.state_bytes_per_sequence(fp32, bf16) == 36 * (32 * 128 * 128 * 4 + 3 * 8192 * 2) == 77_266_944
    assert nemotron.model.state_bytes_per_sequence(fp32, bf16) == 23 * (64 * 64 * 128 * 4 + 3 * 6144 * 2)
    assert qwen.dtypes.recurrent_state is fp32


def _ops(w, step, prefix):
    return [op for op in build_step(w, step) if op.name.startswith(prefix)]


def test_gated_deltanet_prefill_chunk_by_hand(qwen):
    # one sequence of one 64-token chunk: per head, the products
    # kkt and qkt 2 x (64 x 128 x 64), solve 64 x 32 x 64, wu 64 x 64 x 256, ws and qs
    # 2 x (64 x 128 x 128), state 128 x 64 x 128, pv 64 x 64 x 128
    # flops = 2 (3 C^2 dk + 2 C^2 dv + C^3/2 + 3 C dk dv) = 2 x 5,898,240 = 11,796,480
    # bytes (bf16, each input read and output written once): 81,920 + 16,384 + 73,728 +
    # 131,072 + 65,536 + 40,960 = 409,600
    assert gdn_chunk_flops(64, 128, 128) == 11_796_480
    chunk = _ops(qwen, Step(Phase.PREFILL, 1, 64, 0), "lin_chunk")
    assert sum(op.flops() for op in chunk) == 32 * 11_796_480
    assert sum(op.min_bytes() for op in chunk) == 32 * 409_600
    assert all(op.repeat == 36 and op.scaling is Scaling.KV_LENGTH for op in chunk)
    # 65 tokens take two chunks (the last one padded, as the kernel pads it)
    two = _ops(qwen, Step(Phase.PREFILL, 1, 65, 0), "lin_chunk")
    assert sum(op.flops() for op in two) == 2 * 32 * 11_796_480


def test_mamba_prefill_chunk_by_hand(nemotron):
    # one chunk of Q = 128 tokens: CB^T per group 8 x 2 x 128 x 128 x 128 = 33,554,432; per head
    # the chunk state, the masked scan and C h, 3 x 2 x 128 x 128 x 64 = 6,291,456, x 64 heads
    q = 128
    assert mamba_chunk_flops(q, 64, 64, 128, 8) == 33_554_432 + 64 * 6_291_456
    chunk = [op for op in _ops(nemotron, Step(Phase.PREFILL, 1, q, 0), "ssm_chunk") if op.kind is OpKind.GEMM]
    assert sum(op.flops() for op in chunk) == 33_554_432 + 64 * 6_291_456


def test_decode_state_ops_read_and_write_the_state_once(qwen, nemotron):
    batch = 4
    lin = _ops(qwen, Step(Phase.DECODE, batch, 1, 1000), "lin_")
    rec = next(op for op in lin if op.name == "lin_recurrent")
    # every state element of every value head read and written once, in fp32: 2 x 4 x 2 MiB
    assert rec.vop is VectorOp.DELTA_STATE and rec.min_bytes() == 2 * batch * 32 * 128 * 128 * 4
    assert not rec.hot  # written a step ago: from HBM
    conv = next(op for op in lin if op.name == "lin_conv_state")
    assert conv.min_bytes() == 2 * batch * 3 * 8192 * 2 and not conv.hot
    ssm = next(op for op in _ops(nemotron, Step(Phase.DECODE, batch, 1, 1000), "ssm_") if op.name == "ssm_recurrent")
    assert ssm.min_bytes() == 2 * batch * 64 * 64 * 128 * 4


@pytest.mark.parametrize("workload", ["qwen3_next_80b", "nemotron3_nano"])
def test_decode_grows_with_context_by_the_attention_kv_only(workload):
    w, _ = load_workload(workload)
    system, _ = load_system("h200")
    batch, short, long = 32, 4096, 32768
    at_short = simulate_step(w, system, Step(Phase.DECODE, batch, 1, short - 1))
    at_long = simulate_step(w, system, Step(Phase.DECODE, batch, 1, long - 1))
    kv_s = (
        batch
        * (long - short)
        * w.model.kv_bytes_per_token(w.dtypes.kv_cache)
        / system.chip.hbm.peak_bandwidth_bytes_per_s
    )
    growth = at_long.time_s - at_short.time_s
    assert 0.8 <= growth / kv_s <= 1.8, (growth, kv_s)
    # the state traffic is in the op table and does not grow with the context
    recurrent = [r for r in at_short.ops if r.op.name.endswith("_recurrent")]
    assert recurrent and all(r.timing.hbm_bytes > 0 for r in recurrent)
    again = {r.op.name: r.time_s for r in at_long.ops}
    assert all(again[r.op.name] == r.time_s for r in recurrent)


def test_memory_plan_and_pool_hold_state_slots(nemotron):
    system, _ = load_system("h200")
    state = nemotron.model.state_bytes_per_sequence(DType.FP32, DType.BF16)
    w = replace(nemotron, scenario=replace(nemotron.scenario, batch=8))
    fp = footprint(w, system)
    context = w.scenario.prompt_tokens + w.scenario.output_tokens
    assert fp.kv_cache_bytes == 8 * (context * 6_144 + state)
    with_slots = size_pool(w, system, 16, 0.9, 8192, 64)
    assert (with_slots.state_slots, with_slots.state_slot_bytes) == (64, state)
    # the blocks are what is left after the 64 slots: (capacity x 0.9 - weights - activations
    # - 64 x state) / (16 tokens x 6,144 bytes)
    p = with_slots
    free = p.capacity_bytes * 0.9 - p.weights_bytes - p.activations_bytes - 64 * state
    assert p.block_bytes == 16 * 6_144 and p.blocks == int(free // p.block_bytes)
    assert size_pool(nemotron_dense_free(w), system, 16, 0.9, 8192, 64).state_slots == 0


def nemotron_dense_free(w):
    """The model with its Mamba layers taken out (attention and MoE blocks alone): no state."""
    m = w.model
    return replace(
        w,
        model=replace(
            m, mamba_layers=0, mamba_heads=0, mixer_only_layers=m.mixer_only_layers - 23, layers=m.layers - 23
        ),
    )


# --- the families' checks: layer_types, one-part block patterns, fields of other families ---

HF = Path(__file__).resolve().parent / "data" / "hf"


def _config(tmp_path, folder, **changes):
    data = json.loads((HF / folder / "config.json").read_text())
    data.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del data[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, indent=2))
    return str(path)


def _problems(path):
    with pytest.raises(ConfigError) as e:
        load_hf_config(path)
    return str(e.value)


def test_gpt_oss_layer_types_checked_and_defaulted(tmp_path):
    kinds = json.loads((HF / "gpt-oss-120b" / "config.json").read_text())["layer_types"]
    assert "layer_types: names 35 layers; num_hidden_layers is 36" in _problems(
        _config(tmp_path, "gpt-oss-120b", layer_types=kinds[:35])
    )
    unknown = _problems(_config(tmp_path, "gpt-oss-120b", layer_types=["linear_attention"] * 36))
    assert "layer_types: 'linear_attention': not a layer kind archsim models here" in unknown
    # GptOssConfig's default: layer i slides when i is even, 18 of 36
    m = load_hf_config(_config(tmp_path, "gpt-oss-120b", layer_types=None)).model
    assert (m.local_layers, m.sliding_window) == (18, 128)


def test_hybrid_fields_in_another_family_are_refused(tmp_path):
    llama = "Meta-Llama-3-8B"
    linear = _problems(_config(tmp_path, llama, layer_types=["linear_attention", "full_attention"] * 16))
    assert "layer_types: 'linear_attention': layers of another kind than full attention are not read" in linear
    assert "mamba_num_heads: Mamba-2 layers are read for NemotronHForCausalLM configs" in _problems(
        _config(tmp_path, llama, mamba_num_heads=64)
    )
    # DeepSeek-V3.2's indexer in a V3 config: never costed as dense attention
    assert "index_topk: DeepSeek sparse attention" in _problems(_config(tmp_path, "DeepSeek-V3", index_topk=2048))
    assert "linear_num_value_heads: Gated DeltaNet" in _problems(_config(tmp_path, llama, linear_num_value_heads=32))
    # a layer_types of full attention only is what a Llama is
    assert load_hf_config(_config(tmp_path, llama, layer_types=["full_attention"] * 32)).model.layers == 32


def test_hybrid_layouts_are_checked(tmp_path):
    nemo = "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
    bad = _problems(_config(tmp_path, nemo, hybrid_override_pattern="MEMX" + "E" * 48))
    assert "hybrid_override_pattern: expected one of M (a Mamba-2 mixer)" in bad
    assert "hybrid_override_pattern" in _problems(_config(tmp_path, nemo, hybrid_override_pattern="ME"))
    qwen = "Qwen3-Next-80B-A3B-Instruct"
    kinds = ["linear_attention", "linear_attention", "linear_attention", "mamba"] * 12
    assert "'mamba': not a layer kind archsim models here" in _problems(_config(tmp_path, qwen, layer_types=kinds))
    # layer_types, when given, wins over the interval: one full layer in two
    m = load_hf_config(_config(tmp_path, qwen, layer_types=["linear_attention", "full_attention"] * 24)).model
    assert (m.linear_layers, m.attention_layers) == (24, 24)
    assert "linear_num_value_heads: must be a multiple" in _problems(_config(tmp_path, qwen, linear_num_value_heads=24))


def test_phi_configs(tmp_path):
    # Phi-4: a dense Llama-shaped decoder of 40 layers; Phi-3-mini's window on every layer and
    # Phi-4-mini's partial rotary (0.75 of 128 = 96 dims)
    m = load_hf_config(str(HF / "phi-4" / "config.json")).model
    assert (m.layers, m.kv_heads, m.sliding_window, m.rotary) == (40, 10, 0, 128)
    m = load_hf_config(_config(tmp_path, "phi-4", sliding_window=2047)).model
    assert (m.sliding_window, m.local_layers) == (2047, 40)
    m = load_hf_config(_config(tmp_path, "phi-4", partial_rotary_factor=0.75, head_dim=128)).model
    assert m.rotary == 96
    assert "partial_rotary_factor" in _problems(_config(tmp_path, "phi-4", partial_rotary_factor=1.5))


def test_tensor_parallel_splits_the_mixers_heads_and_pipelines_are_refused(qwen, nemotron):
    half = shard_model(qwen.model, Parallelism(tp=2))
    assert (half.linear_k_heads, half.linear_v_heads, half.kv_heads) == (8, 16, 1)
    # each chip holds half of every state: 36 x (16 x 128 x 128 x 4 + 3 x 4096 x 2)
    assert half.state_bytes_per_sequence(DType.FP32, DType.BF16) == 36 * (16 * 128 * 128 * 4 + 3 * 4096 * 2)
    with pytest.raises(ParallelismError, match="TP 32 must divide the 16 linear-attention key heads"):
        check_parallelism(qwen.model, Parallelism(tp=32))
    with pytest.raises(ParallelismError, match="pipeline stages of a hybrid"):
        check_parallelism(nemotron.model, Parallelism(pp=2))


def test_workload_blocks_must_add_up():
    with pytest.raises(ConfigError, match="must not exceed layers"):
        api_workload("qwen3_next_80b", {"model.linear_attention.layers": 49})
    with pytest.raises(ConfigError, match="relu2 is non-gated"):
        api_workload("nemotron3_nano", {"model.mlp.gated": True})
    with pytest.raises(ConfigError, match=r"k_heads \(16\) must divide v_heads"):
        api_workload("qwen3_next_80b", {"model.linear_attention.v_heads": 24})
    with pytest.raises(ConfigError, match="linear attention and Mamba run fused"):
        api_workload("nemotron3_nano", {"fusion": "eager"})


def test_serve_runs_a_hybrid(capsys):
    args = ["serve", "--workload", "nemotron3_nano", "--requests", "20", "--rate", "10", "--max-num-seqs", "32"]
    assert main([*args, "--quiet"]) == 0
    assert "blocks (and 32 state slots)" in capsys.readouterr().out


# --- DeepSeek sparse attention (DeepSeek-V3.2) ---


def test_deepseek_v32_parameters_and_cache():
    v3, v32 = load_workload("deepseek_v3")[0].model, load_workload("deepseek_v32")[0].model
    # the indexer of each of 61 layers: wq_b 1536 x 64 x 128 = 12,582,912, wk 7168 x 128 =
    # 917,504, its LayerNorm 256, weights_proj 7168 x 64 = 458,752: 13,959,424
    assert total_params(v32) - total_params(v3) == 61 * 13_959_424
    assert total_params(v32) == 671_877_929_216
    # a token caches per layer the 576-wide latent (bf16) and the indexer's fp8 key of 128 with
    # its fp32 scale: 1,152 + 132 = 1,284 bytes
    assert v32.kv_bytes_per_token(DType.BF16) == 61 * 1_284 == 78_324


def test_sparse_attention_reads_top_k_latents():
    w = load_workload("deepseek_v32")[0]
    decode = {op.name: op for op in build_step(w, Step(Phase.DECODE, 2, 1, 99_999))}
    # the indexer scores all 100,000 cached tokens; attention reads the 2,048 chosen
    assert decode["indexer"].kv_len == 100_000 and decode["attention"].kv_len == 2_048
    # the indexer's keys: 128 fp8 bytes per token and sequence, as the cache holds them
    assert decode["indexer"].min_bytes() >= 2 * 100_000 * 128
    prefill = {op.name: op for op in build_step(w, Step(Phase.PREFILL, 1, 4096, 0))}
    # a prefill query at position p scores min(p, 2048) keys: 2048 x 2049 / 2 + 2048 x 2048
    pairs = 2048 * 2049 / 2 + 2048 * 2048
    assert prefill["attention"].flops() == 2 * 128 * (576 + 512) * pairs
    assert "kv_up" not in prefill  # the latent is not expanded: the absorbed form, as decode


def test_sparse_decode_grows_with_context_far_less_than_dense():
    system, _ = load_system("h200")
    dense, sparse = load_workload("deepseek_v3")[0], load_workload("deepseek_v32")[0]

    def growth(w):
        short, long = (simulate_step(w, system, Step(Phase.DECODE, 8, 1, n - 1)).time_s for n in (16_384, 131_072))
        return long - short

    assert growth(sparse) <= 0.4 * growth(dense)
    assert growth(sparse) > 0  # the indexer still reads every cached key


def test_qwen3_5_text_decoder_is_read_from_its_wrapper(tmp_path):
    # Qwen3.5-35B-A3B's text_config (its rotary share under rope_parameters, as transformers 5
    # writes it): 40 layers, every fourth attending, 256 experts of 512, 8 per token
    text = {
        "model_type": "qwen3_5_moe_text",
        "num_hidden_layers": 40,
        "full_attention_interval": 4,
        "hidden_size": 2048,
        "vocab_size": 248320,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "attn_output_gate": True,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "intermediate_size": 5120,
        "mtp_num_hidden_layers": 1,
        "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10]},
    }
    wrapper = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": text, "vision_config": {}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(wrapper, indent=2))
    hf = load_hf_config(str(path))
    m = hf.model
    assert (m.attention_layers, m.linear_layers, m.rotary, m.experts, m.top_k) == (10, 30, 64, 256, 8)
    assert any("multi-token prediction" in note for note in hf.unmodelled)
