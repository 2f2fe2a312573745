"""The models of 2024-2026 in the graph: latent attention, sliding windows, MoE as served, the
other blocks, parameter counts. Expected values are derived by hand in the comments."""

from dataclasses import replace

import numpy as np
import pytest

from archsim.config.loader import load_workload
from archsim.dtypes import DType
from archsim.graph import params
from archsim.graph.builder import Step, build_step
from archsim.graph.ffn import layer_split
from archsim.graph.model import Activation, ModelSpec, Norm, Phase, Positions
from archsim.graph.moe import busiest_rows, expected_active_experts, rank_share, routing_probabilities
from archsim.graph.ops import OpKind, attended_pairs
from archsim.graph.parallel import Parallelism, shard_step


def _ops(w, step, **kw):
    return {op.name: op for op in build_step(w, step, **kw)}


@pytest.fixture(scope="module")
def deepseek():
    return load_workload("deepseek_v3")[0]


@pytest.fixture(scope="module")
def gemma():
    return load_workload("gemma2_9b")[0]


# --- formats ---


def test_block_scaled_formats_count_their_scales():
    # MXFP4: 4-bit elements and an 8-bit scale per 32: 0.5 + 1/32 = 0.53125 bytes; MXFP8 1 + 1/32;
    # NVFP4: an 8-bit (E4M3) scale per 16: 0.5 + 1/16 = 0.5625
    assert DType.MXFP4.bytes == 0.53125 and DType.MXFP8.bytes == 1.03125 and DType.NVFP4.bytes == 0.5625
    assert (DType.MXFP4.bits, DType.NVFP4.bits, DType.INT4.bytes) == (4, 4, 0.5)


# --- multi-head latent attention ---


def test_mla_kv_bytes_per_token_per_layer(deepseek):
    # a token caches its 512-wide latent and its 64-wide rotary key: 576 x 2 B = 1,152 B per
    # layer in bf16 (a GQA model caches 2 x kv_heads x head_dim: Llama-3-8B 2 x 8 x 128 x 2 = 4,096);
    # over 61 layers 70,272 B
    m = deepseek.model
    assert m.kv_bytes_per_layer_token(DType.BF16) == 1152
    assert m.kv_bytes_per_token(DType.BF16) == 61 * 1152 == 70272
    assert load_workload("llama3_8b")[0].model.kv_bytes_per_layer_token(DType.BF16) == 4096


def test_mla_decode_absorbs_and_attends_over_the_latent(deepseek):
    ops = _ops(deepseek, Step(Phase.DECODE, 4, 1, 1000))
    att = ops["attention"]
    # all 128 heads as one group over the latent: keys 512 + 64 wide, values the first 512 of them
    assert (att.heads, att.kv_heads, att.head_dim, att.value_dim, att.kv_shared, att.kv_len) == (
        128,
        1,
        576,
        512,
        True,
        1001,
    )
    # K/V read once: 4 sequences x 1001 tokens x 576 x 2 B; Q 4 x 128 x 576 x 2, O 4 x 128 x 512 x 2
    assert att.min_bytes() == 4 * 1001 * 576 * 2 + 4 * 128 * 576 * 2 + 4 * 128 * 512 * 2
    # W_UK per head: 4 tokens x 128 (no-rope part) -> 512; W_UV per head: 512 -> 128
    q, o = ops["q_absorb"], ops["out_absorb"]
    assert (q.groups, q.m, q.k, q.n) == (128, 4, 128, 512) and (o.groups, o.m, o.k, o.n) == (128, 4, 512, 128)
    assert ops["kv_write"].bytes == 4 * 576 * 2
    assert "kv_up" not in ops


def test_mla_prefill_expands_the_cached_latent(deepseek):
    # a chunk of 256 new tokens after 768 cached: W_UKV expands all 1,024 keys' latents into 128
    # heads of 128 (no-rope key) + 128 (value); attention is MHA with 192-wide keys, 128-wide values
    ops = _ops(deepseek, Step(Phase.PREFILL, 1, 256, 768, with_embedding_and_head=False))
    up, att = ops["kv_up"], ops["attention"]
    assert (up.m, up.k, up.n) == (1024, 512, 128 * 256)
    assert (att.heads, att.kv_heads, att.head_dim, att.value_dim, att.kv_shared) == (128, 128, 192, 128, False)
    assert ops["k_concat"].bytes == 1024 * 128 * 192 * 2
    assert "q_absorb" not in ops


def test_deepseek_v3_parameters_total_and_active(deepseek):
    m = deepseek.model
    # attention per layer: W_DQ 7168 x 1536 + norm 1536 + W_UQ 1536 x 128 x 192 + W_DKV 7168 x 576
    # + norm 512 + W_UKV 512 x 128 x 256 + W_O 128 x 128 x 7168
    attn = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    assert params.attention_params(m) == attn == 187_107_328
    expert = 3 * 7168 * 2048  # one SwiGLU expert
    moe = 256 * expert + 7168 * 256 + expert  # routed, router, one shared of the same width
    dense = 3 * 7168 * 18432
    norms = 2 * 7168
    total = 61 * (attn + norms) + 3 * dense + 58 * moe + 2 * 129280 * 7168 + 7168
    assert params.total_params(m) == total == 671_026_404_352  # DeepSeek-V3's 671B
    active = 61 * (attn + norms) + 3 * dense + 58 * (8 * expert + 7168 * 256 + expert) + 2 * 129280 * 7168 + 7168
    assert params.active_params(m) == active  # 37.55B: "37B activated"
    assert 37e9 < active < 38e9


# --- sliding windows ---


def test_windowed_pairs_by_hand():
    # 8,192 causal queries, window 4,096: query x sees min(4096, x) keys:
    # sum_{x=1}^{4096} x + 4096 x 4096 = 8,390,656 + 16,777,216
    assert attended_pairs(8192, 8192, True, 4096) == 8_390_656 + 16_777_216
    # a chunk of 100 queries after 5,000 cached, window 4,096: every query sees 4,096 keys
    assert attended_pairs(100, 5100, True, 4096) == 100 * 4096
    # a decode over 10,000 keys sees the last 4,096; without a window all of them
    assert attended_pairs(1, 10000, False, 4096) == 4096 and attended_pairs(1, 10000, False) == 10000


def test_local_layer_attention_flops_and_kv_reads_capped_at_the_window(gemma):
    ops = _ops(gemma, Step(Phase.DECODE, 1, 1, 9999))
    glob, local = ops["attention"], ops["attention_local"]
    assert (glob.repeat, local.repeat, glob.kv_len, local.kv_len) == (21, 21, 10000, 4096)
    # 16 heads x (256 + 256) x 2 FLOPs per pair: global 10,000 pairs, local 4,096
    assert glob.flops() == 2 * 16 * 512 * 10000 and local.flops() == 2 * 16 * 512 * 4096
    # KV reads: 8 KV heads x 4,096 tokens x (256 + 256) x 2 B, plus Q and O (16 x 256 x 2 each)
    assert local.min_bytes() == 8 * 4096 * 512 * 2 + 2 * 16 * 256 * 2
    # a prefill chunk of 2,048 after 6,000 cached sees keys from 6,000 - 4,095 on: 2,048 + 4,095
    chunk = _ops(gemma, Step(Phase.PREFILL, 1, 2048, 6000, with_embedding_and_head=False))["attention_local"]
    assert chunk.kv_len == 2048 + 4095 and chunk.flops() == 2 * 16 * 512 * 2048 * 4096


def test_local_layers_keep_only_the_window_in_the_kv_cache(gemma):
    m = gemma.model
    per = m.kv_bytes_per_layer_token(DType.BF16)  # 2 x 8 x 256 x 2 = 8,192 B
    assert per == 8192
    # 10,000 tokens: 21 global layers keep all of them, 21 local layers the last 4,096
    assert m.kv_cache_bytes(10000, DType.BF16) == 21 * 10000 * per + 21 * 4096 * per


# --- mixture of experts ---


@pytest.mark.parametrize("tokens,expected", [(1, 8.0), (8, 57.42), (256, 255.92)])
def test_expected_experts_touched(tokens, expected):
    # E (1 - (1 - k/E)^T) with E = 256, k = 8: T = 1 gives k; T = 8: (31/32)^8 = e^(8 ln 0.96875) =
    # e^-0.2540 = 0.7757, so 256 x 0.2243 = 57.42;
    # T = 256: 256 (1 - (31/32)^256) = 255.92
    assert expected_active_experts(256, 8, tokens) == pytest.approx(256 * (1 - (1 - 8 / 256) ** tokens))
    assert expected_active_experts(256, 8, tokens) == pytest.approx(expected, abs=0.005)


def test_fractional_experts_spread_over_the_layers(deepseek):
    # batch 8 decode: 57.42 experts; 58 MoE layers: 0.42 x 58 = 24.4 -> 24 layers of 58, 34 of 57
    assert layer_split(57.42, 58) == [(57, 34), (58, 24)]
    ops = build_step(deepseek, Step(Phase.DECODE, 8, 1, 100))
    ups = [op for op in ops if op.name.startswith("experts_gate_up")]
    mean = sum(op.groups * op.repeat for op in ups) / sum(op.repeat for op in ups)
    assert abs(mean - expected_active_experts(256, 8, 8)) <= 0.5 / 58


def test_routing_skew_makes_hot_experts_and_a_busy_rank():
    uniform = routing_probabilities(8, 2)
    assert np.allclose(uniform, 0.25)
    zipf = routing_probabilities(8, 2, 1.0)
    # weights 1, 1/2, ..., 1/8 sum to 2.7179; p_0 = 2 / 2.7179 = 0.736 (below one: no cap)
    assert zipf.sum() == pytest.approx(2.0) and zipf[0] == pytest.approx(2 / sum(1 / i for i in range(1, 9)))
    capped = routing_probabilities(8, 2, 3.0)  # the hottest would take 1.66 of the 2 picks
    assert capped[0] == 1.0 and capped.sum() == pytest.approx(2.0)
    # busiest expert's rows of 64 tokens: uniform 64 x 0.25 / (1 - 0.75^64) = 16; Zipf 64 x 0.736
    assert busiest_rows(uniform, 64) == pytest.approx(16.0, rel=1e-6)
    assert busiest_rows(zipf, 64) == pytest.approx(64 * zipf[0], rel=1e-6)
    # over 4 ranks of 2 experts, the first (the hottest pair) gets 64 x (0.736 + 0.368) rows
    share = rank_share(zipf, 64, 4)
    assert share.routed == pytest.approx(64 * (zipf[0] + zipf[1]))


def test_skewed_routing_loads_the_busiest_ep_rank():
    w = load_workload("mixtral_8x7b")[0]
    skewed = replace(w, model=replace(w.model, routing_skew=1.0))
    step, par = Step(Phase.DECODE, 16, 1, 100), Parallelism(ep=4)

    def dispatch_bytes(x):
        return max(op.bytes for op in shard_step(x, step, par).ops if op.name == "ep_dispatch")

    # uniform: 16 x 2 / 4 = 8 rows of 4,096 bf16; Zipf: 16 x (0.736 + 0.368) = 17.7 -> 18 rows
    assert dispatch_bytes(w) == 8 * 4096 * 2
    assert dispatch_bytes(skewed) == 18 * 4096 * 2


def test_shared_experts_and_dense_first_layers(deepseek):
    ops = _ops(deepseek, Step(Phase.DECODE, 1, 1, 10))
    assert (ops["dense_gate_up"].repeat, ops["dense_gate_up"].n) == (3, 2 * 18432)
    assert (ops["shared_gate_up"].repeat, ops["shared_gate_up"].n) == (58, 2 * 2048)
    # one token touches exactly its 8 experts: one GEMM of 8 groups on every MoE layer
    assert (ops["experts_gate_up[8]"].repeat, ops["experts_gate_up[8]"].m) == (58, 1)


# --- other blocks ---


GPT2 = ModelSpec(
    "gpt2", 12, 768, 12, 12, 64, 3072, 50257, tied_embeddings=True, norm=Norm.LAYERNORM, activation=Activation.GELU,
    gated=False, qkv_bias=True, o_bias=True, mlp_bias=True, positions=Positions.LEARNED, max_positions=1024,
)  # fmt: skip


def test_gpt2_parameters_by_hand():
    # wte 50257 x 768 + wpe 1024 x 768 + 12 x (2 LayerNorms 2 x 768 x 2, c_attn 768 x 2304 + 2304,
    # c_proj 768 x 768 + 768, c_fc 768 x 3072 + 3072, c_proj 3072 x 768 + 768) + ln_f 2 x 768
    layer = 2 * 2 * 768 + 768 * 2304 + 2304 + 768 * 768 + 768 + 768 * 3072 + 3072 + 3072 * 768 + 768
    assert params.total_params(GPT2) == 50257 * 768 + 1024 * 768 + 12 * layer + 2 * 768 == 124_439_808


def test_gpt2_step_ops():
    w = replace(load_workload("llama3_8b")[0], model=GPT2)
    ops = _ops(w, Step(Phase.DECODE, 2, 1, 10))
    assert ops["attn_norm"].vop.value == "add_layernorm" and ops["final_norm"].vop.value == "layernorm"
    assert "rope" not in ops and ops["pos_embedding"].m == 2 and ops["pos_add"].n == 768
    # a plain MLP: up to 3,072, GELU, down; no gate
    assert ops["up"].n == 3072 and ops["gelu"].vop.value == "gelu" and "gate_up" not in ops


def test_parallel_block_has_one_norm_and_one_all_reduce():
    gptj = ModelSpec("gptj", 28, 4096, 16, 16, 256, 16384, 50400, norm=Norm.LAYERNORM, activation=Activation.GELU,
                     gated=False, parallel_block=True, rotary_dim=64, mlp_bias=True)  # fmt: skip
    w = replace(load_workload("llama3_8b")[0], model=gptj)
    names = [op.name for op in shard_step(w, Step(Phase.DECODE, 1, 1, 10), Parallelism(tp=2)).ops]
    assert "ffn_norm" not in names and "o_proj_allreduce" not in names and "down_allreduce" in names
    # rotary on 64 of each head's 256 dims: (16 + 16) / 2 heads per chip x 64
    rope = next(op for op in shard_step(w, Step(Phase.DECODE, 1, 1, 10), Parallelism(tp=2)).ops if op.name == "rope")
    assert rope.n == (8 + 8) * 64


def test_qk_norm_and_softcap(gemma):
    qwen = load_workload("qwen3_30b_a3b")[0]
    ops = _ops(qwen, Step(Phase.DECODE, 3, 1, 10))
    # an RMSNorm of each of 3 tokens' 32 query and 4 key heads of 128
    assert (ops["q_norm"].m, ops["q_norm"].n, ops["k_norm"].m) == (3 * 32, 128, 3 * 4)
    assert _ops(gemma, Step(Phase.DECODE, 1, 1, 10))["attention"].softcap
    assert "post_attn_norm" in _ops(gemma, Step(Phase.DECODE, 1, 1, 10))


def test_mtp_layers_run_on_every_step(deepseek):
    with_mtp = replace(deepseek, model=replace(deepseek.model, mtp_layers=1))
    ops = _ops(with_mtp, Step(Phase.DECODE, 1, 1, 10))
    assert ops["mtp_eh_proj"].k == 2 * 7168 and ops["mtp_attention"].repeat == 1 and "mtp_lm_head" in ops
    # one more layer of the MoE kind with its projection: attention, norms, a MoE FFN, two input
    # norms and the 7168 x 14336 projection
    extra = params.attention_params(deepseek.model) + 2 * 7168 + params.moe_params(deepseek.model) + 2 * 7168
    assert params.total_params(with_mtp.model) - params.total_params(deepseek.model) == extra + 2 * 7168 * 7168
    assert with_mtp.model.kv_bytes_per_token(DType.BF16) == 62 * 1152


def test_dense_models_unchanged_by_the_variants():
    """A Llama has none of the variants: the same ops as a ModelSpec of its plain fields."""
    w = load_workload("llama3_8b")[0]
    plain = ModelSpec("x", 32, 4096, 32, 8, 128, 14336, 128256)
    assert [repr(op) for op in build_step(w, Step(Phase.DECODE, 2, 1, 5))] == [
        repr(op) for op in build_step(replace(w, model=plain), Step(Phase.DECODE, 2, 1, 5))
    ]
    assert all(
        op.kind is not OpKind.ATTENTION or op.name == "attention" for op in build_step(w, Step(Phase.DECODE, 1, 1, 5))
    )


def test_the_model_record_does_not_import_its_parameter_counts():
    """archsim.graph.params reads archsim.graph.model; model imports nothing of params, not even
    inside a function, so the two make no import circle."""
    import ast
    from pathlib import Path

    import archsim.graph.model as model

    tree = ast.parse(Path(model.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not any(name and "params" in name for name in imported), imported
