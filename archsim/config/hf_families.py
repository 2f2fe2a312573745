"""How each Hugging Face architecture's `config.json` names what changes a step's cost.

One reader per family turns a config into the fields of a ModelSpec (archsim/graph/model.py),
through a `Fields` that records every key it reads, refuses a value of the wrong type or range
with `key: why`, and collects notes on what archsim costs differently from the checkpoint
(an MTP module not run, positions only, ...). `hf.py` reports the keys no reader used.

Sources: the configuration classes and modelling code of transformers 4.57 (configuration_*.py)
and vLLM's model implementations for how serving engines run them (which projections are
fused, which sliding-window layers there are).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from archsim import limits
from archsim.errors import quote

# upper bounds of counts, those of a workload file (archsim.limits); other whole numbers are widths
UPPER = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "first_k_dense_replace", "num_nextn_predict_layers",
                     "max_window_layers", "interleave_moe_layer_step", "decoder_sparse_step", "moe_layer_freq",
                     "sliding_window_pattern"), limits.MAX_LAYERS),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "linear_num_key_heads",
                     "linear_num_value_heads", "mamba_num_heads", "n_groups", "index_n_heads"), limits.MAX_HEADS),
    "full_attention_interval": limits.MAX_LAYERS,
    **dict.fromkeys(("num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
                     "experts_per_token", "n_shared_experts"), limits.MAX_EXPERTS),
    **dict.fromkeys(("sliding_window", "attention_chunk_size", "n_positions", "chunk_size", "index_topk"),
                    limits.MAX_TOKENS),
}  # fmt: skip

ACTIVATIONS = {  # transformers' ACT2FN names -> archsim's activation
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "gelu_python": "gelu",
    "gelu_accurate": "gelu",
    "relu2": "relu2",
}
_MISSING = object()

SpecFields = dict[str, Any]  # a ModelSpec's fields by name as a reader collects them (`hf.py` makes the ModelSpec)


@dataclass
class Fields:
    """A config's fields as a reader consumes them."""

    data: dict[str, Any]
    problems: list[tuple[str, str]] = field(default_factory=list)  # (key, why)
    notes: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def whole(self, key: str, default: int | None = None, *, required: bool = False, zero: bool = False) -> int:
        """A whole number above zero (or zero, if `zero`)."""
        self.used.add(key)
        value = self.data.get(key)
        if value is None:
            if required:
                self.problems.append((key, "missing required field"))
            return 0 if default is None else default
        whole = isinstance(value, int) and not isinstance(value, bool)
        high = UPPER.get(key, limits.MAX_WIDTH)
        if whole and value > high:
            self.problems.append((key, f"must be at most {high:,} (got {value:,})"))
            return 0 if default is None else default
        if not whole or not (value >= 0 if zero else value > 0):
            self.problems.append(
                (key, f"expected a whole number {'of zero or more' if zero else 'above zero'} (got {quote(value)})")
            )
            return 0 if default is None else default
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        self.used.add(key)
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, bool):
            self.problems.append((key, f"expected true or false (got {quote(value)})"))
            return default
        return value

    def number(self, key: str) -> float | None:
        self.used.add(key)
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problems.append((key, f"expected a number (got {quote(value)})"))
            return None
        return float(value)

    def ints(self, key: str) -> list[int] | None:
        self.used.add(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            self.problems.append((key, f"expected a list of whole numbers (got {quote(value)})"))
            return None
        return value

    def strings(self, key: str) -> list[str] | None:
        self.used.add(key)
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
            self.problems.append((key, f"expected a list of names (got {quote(value)})"))
            return None
        return value

    def use(self, *keys: str) -> None:
        """Keys read that change nothing archsim costs."""
        self.used.update(keys)

    def activation(self, key: str, default: str = "silu") -> str:
        self.used.add(key)
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, str) or value not in ACTIVATIONS:
            self.problems.append(
                (key, f"archsim models the SiLU and GELU activations ({', '.join(ACTIVATIONS)}) (got {quote(value)})")
            )
            return default
        return ACTIVATIONS[value]


def _decoder(f: Fields, *, hidden: str = "hidden_size", heads: str = "num_attention_heads",
             layers: str = "num_hidden_layers", ffn: str = "intermediate_size", kv: str = "num_key_value_heads",
             act: str = "hidden_act", act_default: str = "silu", ffn_default: int = 0, tied: bool = False,
             vocab_default: int = 0) -> SpecFields:  # fmt: skip
    """The fields every decoder has, under the family's names (`kv` empty: as many KV heads as
    attention heads, for families without grouped-query attention)."""
    h = f.whole(hidden, required=True)
    n = f.whole(heads, required=True)
    out = {
        "layers": f.whole(layers, required=True),
        "hidden": h,
        "heads": n,
        "kv_heads": f.whole(kv, n) if kv else n,
        "head_dim": f.whole("head_dim", 0),
        "ffn": f.whole(ffn, ffn_default, required=not ffn_default),
        "vocab": f.whole("vocab_size", vocab_default or None, required=not vocab_default),
        "tied_embeddings": f.flag("tie_word_embeddings", tied),
        "activation": f.activation(act, act_default),
    }
    if not out["head_dim"]:
        if h and n and h % n:
            f.problems.append((hidden, f"not a multiple of {heads} ({n}) and no head_dim given (got {h})"))
        out["head_dim"] = h // n if n else 0
    f.use("max_position_embeddings", "rope_theta", "rope_scaling")
    return out


def _four_times(f: Fields, key: str) -> int:
    """The MLP width GPT-2, GPT-J and Falcon take by default: four times the hidden size."""
    value = f.data.get(key)
    return 4 * value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


ATTENTION_KINDS = ("full_attention", "sliding_attention")  # transformers' layer_types of attention layers


def layer_kinds(
    f: Fields, layers: int, known: tuple[str, ...], default: Callable[[int], str] | None = None
) -> list[str] | None:
    """`layer_types`, checked: one per layer, each a kind the family has; when absent, the
    reference implementation's default for layer i (`default`), else None."""
    kinds = f.strings("layer_types")
    if kinds is None:
        return [default(i) for i in range(layers)] if default else None
    if len(kinds) != layers:
        f.problems.append(("layer_types", f"names {len(kinds)} layers; num_hidden_layers is {layers}"))
        return None
    unknown = sorted({k for k in kinds if k not in known})
    if unknown:
        f.problems.append(
            (
                "layer_types",
                f"{', '.join(map(repr, unknown))}: not a layer kind archsim models here ({', '.join(known)})",
            )
        )
        return None
    return kinds


def _sliding(kinds: list[str] | None, layers: int) -> int:
    return sum(1 for k in kinds if k == "sliding_attention") if kinds is not None else layers


def _window(f: Fields, out: SpecFields, layers: int, key: str = "sliding_window") -> None:
    """A sliding window over every layer (Mistral v0.1), unless `layer_types` names the layers."""
    kinds = layer_kinds(f, layers, ATTENTION_KINDS)
    window = f.whole(key, 0)
    if not window:
        if kinds is not None and "sliding_attention" in kinds:
            f.problems.append(("layer_types", "names sliding-window layers but no sliding_window is given"))
        return
    out["sliding_window"] = window
    out["local_layers"] = _sliding(kinds, layers)


def _partial_rotary(f: Fields, out: SpecFields) -> None:
    """`partial_rotary_factor`: the share of each head rotary rotates (1: all of it)."""
    factor = f.number("partial_rotary_factor")
    rope = f.data.get("rope_parameters")
    if factor is None and isinstance(rope, dict) and rope.get("partial_rotary_factor") is not None:
        factor = Fields(rope).number("partial_rotary_factor")  # transformers 5's home of it
    if factor is None or factor == 1.0:
        return
    rotated = factor * out["head_dim"]
    if not 0.0 < factor < 1.0 or rotated != int(rotated) or int(rotated) % 2:
        f.problems.append(
            ("partial_rotary_factor", f"must rotate an even part of the {out['head_dim']} head dims (got {factor})")
        )
        return
    out["rotary_dim"] = int(rotated)


def _moe(f: Fields, out: SpecFields, experts_key: str, ffn_key: str | None = None) -> None:
    out["experts"] = f.whole(experts_key, 1)
    out["top_k"] = f.whole("num_experts_per_tok", 1) if out["experts"] > 1 else 1
    if ffn_key and f.has(ffn_key):
        out["dense_ffn"] = out["ffn"]
        out["ffn"] = f.whole(ffn_key)
    f.use("output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob")


def _sparse_step(f: Fields, out: SpecFields, step_key: str, dense_list_key: str | None = None) -> None:
    """Dense layers among MoE ones: every step-th layer is MoE, and the listed ones are dense;
    archsim counts them (and places them first, which only a pipeline split would notice)."""
    step = f.whole(step_key, 1)
    dense = out["layers"] - out["layers"] // step if step > 1 else 0
    listed = f.ints(dense_list_key) if dense_list_key else None
    dense += len(listed or [])
    if dense:
        out["dense_layers"] = min(dense, out["layers"] - 1)
        if step > 1 or listed:
            f.notes.append(f"{out['dense_layers']} dense layers among the MoE ones, costed as the first layers")


def read_llama(f: Fields) -> SpecFields:
    """Llama 2/3 and decoders with Llama's field names; experts under either name a MoE of that
    shape uses (Mixtral's num_local_experts, OLMoE's and Qwen3-MoE's num_experts with the width in
    moe_intermediate_size)."""
    out = _decoder(f)
    bias = f.flag("attention_bias")
    out.update(qkv_bias=bias, o_bias=bias, mlp_bias=f.flag("mlp_bias"))
    f.use("pretraining_tp")
    key = "num_local_experts" if f.has("num_local_experts") else "num_experts"
    if f.has("num_local_experts") and f.has("num_experts") and f.data["num_local_experts"] != f.data["num_experts"]:
        f.problems.append(("num_experts", f"disagrees with num_local_experts ({f.data['num_local_experts']})"))
    _moe(f, out, key, "moe_intermediate_size")
    f.use("num_local_experts", "num_experts")
    return out


def read_mistral(f: Fields) -> SpecFields:
    out = _decoder(f)
    _window(f, out, out["layers"])
    return out


def read_mixtral(f: Fields) -> SpecFields:
    out = read_mistral(f)
    _moe(f, out, "num_local_experts")
    return out


def read_qwen2(f: Fields) -> SpecFields:
    """Qwen2: q, k and v biases; the window only with use_sliding_window, on the layers from
    max_window_layers on."""
    out = _decoder(f)
    out["qkv_bias"] = True
    window = f.whole("sliding_window", 0)
    if f.flag("use_sliding_window") and window:
        first = f.whole("max_window_layers", 0, zero=True)
        out.update(sliding_window=window, local_layers=max(0, out["layers"] - first))
    f.use("sliding_window", "max_window_layers", "use_sliding_window")
    return out


def read_qwen2_moe(f: Fields) -> SpecFields:
    out = read_qwen2(f)
    _moe(f, out, "num_experts", "moe_intermediate_size")
    out["shared_ffn"] = f.whole("shared_expert_intermediate_size", 0, zero=True)
    _sparse_step(f, out, "decoder_sparse_step", "mlp_only_layers")
    if out["shared_ffn"]:
        f.notes.append("the shared expert's sigmoid gate (a hidden x 1 projection) not counted")
    return out


def read_qwen3(f: Fields) -> SpecFields:
    out = read_qwen2(f)
    out["qkv_bias"] = f.flag("attention_bias")
    out["o_bias"] = out["qkv_bias"]
    out["qk_norm"] = True
    return out


def read_qwen3_moe(f: Fields) -> SpecFields:
    out = read_qwen3(f)
    _moe(f, out, "num_experts", "moe_intermediate_size")
    _sparse_step(f, out, "decoder_sparse_step", "mlp_only_layers")
    return out


def read_deepseek(f: Fields) -> SpecFields:
    """DeepSeek-V2/V3: latent attention, shared and routed experts, dense first layers."""
    out = _decoder(f)
    nope, rope = f.whole("qk_nope_head_dim", required=True), f.whole("qk_rope_head_dim", required=True)
    out.update(
        attention="mla",
        head_dim=nope + rope,
        kv_heads=out["heads"],
        q_lora_rank=f.whole("q_lora_rank", 0),
        kv_lora_rank=f.whole("kv_lora_rank", required=True),
        rope_head_dim=rope,
        v_head_dim=f.whole("v_head_dim", required=True),
    )
    f.use("num_key_value_heads", "head_dim")
    experts = f.whole("n_routed_experts", 1)
    if experts > 1:
        out.update(
            experts=experts,
            top_k=f.whole("num_experts_per_tok", 1),
            dense_ffn=out["ffn"],
            ffn=f.whole("moe_intermediate_size", required=True),
            dense_layers=f.whole("first_k_dense_replace", 0, zero=True),
        )
        out["shared_ffn"] = f.whole("n_shared_experts", 0, zero=True) * out["ffn"]
        if f.whole("moe_layer_freq", 1) != 1:
            f.problems.append(("moe_layer_freq", "archsim models a MoE layer after every dense first layer (1)"))
    mtp = f.whole("num_nextn_predict_layers", 0, zero=True)
    if mtp:
        f.notes.append(f"{mtp} multi-token prediction layer(s) not run (set model.mtp_layers to cost them)")
    f.use("topk_method", "n_group", "topk_group", "scoring_func", "routed_scaling_factor", "norm_topk_prob",
          "ep_size", "aux_loss_alpha", "seq_aux", "attention_bias")  # fmt: skip
    return out


def read_deepseek_v32(f: Fields) -> SpecFields:
    """DeepSeek-V3.2: DeepSeek-V3 with sparse attention, a lightning indexer of index_n_heads
    heads of index_head_dim choosing the index_topk cached tokens each query attends to."""
    out = read_deepseek(f)
    out.update(
        index_heads=f.whole("index_n_heads", required=True),
        index_head_dim=f.whole("index_head_dim", required=True),
        index_topk=f.whole("index_topk", required=True),
    )
    return out


def read_gemma2(f: Fields) -> SpecFields:
    """Gemma 2: every other layer within the window (the even ones), norms after attention and
    MLP, a tanh soft cap of the attention scores, GeGLU, tied embeddings."""
    out = _decoder(f, act="hidden_activation", act_default="gelu_pytorch_tanh", tied=True)
    f.use(
        "hidden_act", "query_pre_attn_scalar", "final_logit_softcapping", "cache_implementation", "sliding_window_size"
    )
    window = f.whole("sliding_window", 0)
    kinds = layer_kinds(f, out["layers"], ATTENTION_KINDS)
    if window:
        local = _sliding(kinds, 0) if kinds is not None else out["layers"] - out["layers"] // 2
        out.update(sliding_window=window, local_layers=local)
    out.update(post_norms=True, logit_softcap=f.number("attn_logit_softcapping") is not None)
    if f.number("final_logit_softcapping") is not None:
        f.notes.append("the logits' soft cap (a tanh per vocabulary entry of the last token) not counted")
    return out


def read_gemma3(f: Fields) -> SpecFields:
    """Gemma 3: five local layers to one global (sliding_window_pattern), query/key norms."""
    # Gemma3TextConfig's default vocabulary, which the multimodal checkpoints leave out
    out = _decoder(f, act="hidden_activation", act_default="gelu_pytorch_tanh", tied=True, vocab_default=262_208)
    f.use("hidden_act", "query_pre_attn_scalar", "rope_local_base_freq", "final_logit_softcapping")
    window = f.whole("sliding_window", 0)
    kinds = layer_kinds(f, out["layers"], ATTENTION_KINDS)
    if window:
        pattern = f.whole("sliding_window_pattern", 6)
        local = _sliding(kinds, 0) if kinds is not None else out["layers"] - out["layers"] // pattern
        out.update(sliding_window=window, local_layers=local)
    f.use("sliding_window_pattern")
    out.update(post_norms=True, qk_norm=True, logit_softcap=f.number("attn_logit_softcapping") is not None)
    return out


def read_gpt_oss(f: Fields) -> SpecFields:
    """gpt-oss: alternating sliding (128) and full layers, biased projections, 128 experts;
    without `layer_types`, GptOssConfig's default: layer i slides when i is even."""
    out = _decoder(f)
    kinds = layer_kinds(f, out["layers"], ATTENTION_KINDS, _gpt_oss_kind)
    window = f.whole("sliding_window", 0)
    if kinds is not None and "sliding_attention" in kinds:
        if not window:
            f.problems.append(("sliding_window", "missing, and layer_types names sliding-window layers"))
        else:
            out.update(sliding_window=window, local_layers=_sliding(kinds, 0))
    out.update(qkv_bias=f.flag("attention_bias"), o_bias=f.flag("attention_bias"))
    out["experts"] = f.whole("num_local_experts", 1)
    key = "num_experts_per_tok" if f.has("num_experts_per_tok") else "experts_per_token"
    out["top_k"] = f.whole(key, 1)
    f.use("num_experts_per_tok", "experts_per_token", "swiglu_limit", "router_aux_loss_coef", "output_router_logits")
    f.use("initial_context_length")
    f.notes.append("attention sinks (one logit per head) not counted")
    return out


def _gpt_oss_kind(i: int) -> str:
    return "sliding_attention" if (i + 1) % 2 else "full_attention"


def read_phi3(f: Fields) -> SpecFields:
    """Phi-3 and Phi-4 (Phi3ForCausalLM): a Llama-shaped decoder with fused qkv and gate-up
    projections, a sliding window on every layer where given (Phi-3-mini), partial rotary
    (Phi-4-mini); LongRoPE's scaling changes positions only."""
    out = _decoder(f)
    bias = f.flag("attention_bias")
    out.update(qkv_bias=bias, o_bias=bias)
    _partial_rotary(f, out)
    _window(f, out, out["layers"])
    f.use("original_max_position_embeddings", "resid_pdrop", "embd_pdrop", "lm_head_bias")
    if f.flag("lm_head_bias"):
        f.notes.append("the LM head's bias not counted")
    return out


def _qwen3_next_kind(interval: int) -> Callable[[int], str]:
    return lambda i: "full_attention" if (i + 1) % interval == 0 else "linear_attention"


def read_qwen3_next(f: Fields) -> SpecFields:
    """Qwen3-Next and Qwen3.5's text decoder: Gated DeltaNet on three of every four layers (`layer_types`, else every
    `full_attention_interval`-th layer attends, Qwen3NextConfig's default), gated attention with
    query/key norms and partial rotary on the rest, a MoE with a shared expert on every layer."""
    out = read_qwen3(f)
    _moe(f, out, "num_experts", "moe_intermediate_size")
    out["shared_ffn"] = f.whole("shared_expert_intermediate_size", 0, zero=True)
    _sparse_step(f, out, "decoder_sparse_step", "mlp_only_layers")
    if out["shared_ffn"]:
        f.notes.append("the shared expert's sigmoid gate (a hidden x 1 projection) not counted")
    _partial_rotary(f, out)
    # positions only (Qwen3.5's multimodal rotary); the MTP layers' embedding choice
    f.use("rope_parameters", "mrope_section", "mrope_interleaved", "mtp_use_dedicated_embeddings")
    out["attn_output_gate"] = f.flag("attn_output_gate", True)
    interval = f.whole("full_attention_interval", 4)
    kinds = layer_kinds(f, out["layers"], ("linear_attention", "full_attention"), _qwen3_next_kind(interval))
    linear = sum(1 for k in kinds or [] if k == "linear_attention")
    if linear:
        out.update(
            linear_layers=linear,
            linear_k_heads=f.whole("linear_num_key_heads", required=True),
            linear_v_heads=f.whole("linear_num_value_heads", required=True),
            linear_k_dim=f.whole("linear_key_head_dim", required=True),
            linear_v_dim=f.whole("linear_value_head_dim", required=True),
            conv_kernel=f.whole("linear_conv_kernel_dim", 4),
        )
        if out["linear_k_heads"] and out["linear_v_heads"] % out["linear_k_heads"]:
            f.problems.append(
                ("linear_num_value_heads", f"must be a multiple of linear_num_key_heads ({out['linear_k_heads']})")
            )
    f.use("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
          "linear_conv_kernel_dim", "mamba_ssm_dtype")  # fmt: skip
    mtp = f.whole("num_nextn_predict_layers", 0, zero=True) or f.whole("mtp_num_hidden_layers", 0, zero=True)
    if mtp:
        f.notes.append(f"{mtp} multi-token prediction layer(s) not run")
    return out


NEMOTRON_BLOCKS = {"M": "a Mamba-2 mixer", "*": "an attention mixer", "-": "a dense MLP", "E": "a mixture of experts"}


def read_nemotron_h(f: Fields) -> SpecFields:
    """Nemotron-H and Nemotron 3: blocks of one part each, as `hybrid_override_pattern` lays
    them out (M Mamba-2, * attention, - a squared-ReLU MLP, E a MoE of squared-ReLU experts with
    shared ones), one norm per block; attention without position encoding."""
    out = _decoder(f, act="mlp_hidden_act", act_default="relu2")
    layers = out["layers"]
    f.used.add("hybrid_override_pattern")
    pattern = f.data.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != layers or set(pattern) - set(NEMOTRON_BLOCKS):
        kinds = ", ".join(f"{k} ({v})" for k, v in NEMOTRON_BLOCKS.items())
        f.problems.append(
            ("hybrid_override_pattern", f"expected one of {kinds} per layer, {layers} in all (got {quote(pattern)})")
        )
        pattern = "*" * layers
    count = {c: pattern.count(c) for c in NEMOTRON_BLOCKS}
    out.update(gated=False, positions="none", mixer_only_layers=count["M"] + count["*"])
    out["ffn_only_layers"] = count["-"] + count["E"]
    bias = f.flag("attention_bias")
    out.update(qkv_bias=bias, o_bias=bias, mlp_bias=f.flag("mlp_bias"))
    if count["M"]:
        out.update(
            mamba_layers=count["M"],
            mamba_heads=f.whole("mamba_num_heads", required=True),
            mamba_head_dim=f.whole("mamba_head_dim", required=True),
            mamba_state=f.whole("ssm_state_size", required=True),
            mamba_groups=f.whole("n_groups", 1),
            conv_kernel=f.whole("conv_kernel", 4),
            mamba_chunk=f.whole("chunk_size", 256),
        )
        if out["mamba_groups"] and out["mamba_heads"] % out["mamba_groups"]:
            f.problems.append(("n_groups", f"must divide mamba_num_heads ({out['mamba_heads']})"))
        if f.flag("mamba_proj_bias"):
            f.problems.append(("mamba_proj_bias", "biases on the Mamba projections are not modelled"))
    experts = f.whole("n_routed_experts", 1) if count["E"] else 1
    if experts > 1:
        out.update(
            experts=experts,
            top_k=f.whole("num_experts_per_tok", 1),
            dense_ffn=out["ffn"],
            ffn=f.whole("moe_intermediate_size", required=True),
            dense_layers=count["-"],
        )
        shared = f.whole("n_shared_experts", 0, zero=True)
        out["shared_ffn"] = shared * f.whole("moe_shared_expert_intermediate_size", out["ffn"]) if shared else 0
    elif count["E"]:
        f.problems.append(("n_routed_experts", "E blocks of the pattern need routed experts"))
    f.use("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "chunk_size", "expand",
          "use_conv_bias", "mamba_hidden_act", "mamba_proj_bias", "time_step_min", "time_step_max", "time_step_floor",
          "time_step_limit", "time_step_rank", "mamba_ssm_cache_dtype", "use_mamba_kernels", "residual_in_fp32",
          "rescale_prenorm_residual", "norm_eps", "layer_norm_epsilon", "num_logits_to_keep", "routed_scaling_factor",
          "n_group", "topk_group", "norm_topk_prob", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
          "moe_intermediate_size", "moe_shared_expert_intermediate_size", "partial_rotary_factor", "sliding_window",
          "hidden_dropout", "attention_bias", "mlp_bias", "use_bias")  # fmt: skip
    return out


def read_llama4(f: Fields) -> SpecFields:
    """Llama 4 (its text_config): MoE every interleave_moe_layer_step-th layer with a shared
    expert as wide as a routed one, dense layers of intermediate_size_mlp, chunked attention on
    the rotary layers, costed as a sliding window of the chunk (no more keys than that)."""
    out = _decoder(f)
    out["qk_norm"] = f.flag("use_qk_norm")
    experts = f.whole("num_local_experts", 1)
    if experts > 1:
        out.update(experts=experts, top_k=f.whole("num_experts_per_tok", 1), shared_ffn=out["ffn"])
        dense_ffn = f.whole("intermediate_size_mlp", out["ffn"])
        _sparse_step(f, out, "interleave_moe_layer_step")
        if out.get("dense_layers"):
            out["dense_ffn"] = dense_ffn
    chunk = f.whole("attention_chunk_size", 0)
    rope_layers = f.ints("no_rope_layers")  # 1: the layer uses rotary (and chunked attention)
    if chunk:
        local = sum(rope_layers) if rope_layers else out["layers"] - out["layers"] // 4
        out.update(sliding_window=chunk, local_layers=local)
        f.notes.append(f"chunked attention costed as a sliding window of {chunk} tokens (at most as many keys)")
    f.use("attention_bias", "moe_layers", "router_aux_loss_coef", "output_router_logits", "floor_scale",
          "attn_scale", "attn_temperature_tuning", "nope_layer_interval", "use_qk_norm", "for_llm_compressor")  # fmt: skip
    return out


def read_gpt2(f: Fields) -> SpecFields:
    """GPT-2: LayerNorm, learned positions, a non-gated GELU MLP of 4 hidden, biases on every
    projection, tied embeddings."""
    out = _decoder(f, hidden="n_embd", heads="n_head", layers="n_layer", ffn="n_inner", kv="", act="activation_function",
                   act_default="gelu_new", tied=True, ffn_default=_four_times(f, "n_embd"))  # fmt: skip
    out.update(norm="layernorm", gated=False, positions="learned", max_positions=f.whole("n_positions", 1024))
    out.update(qkv_bias=True, o_bias=True, mlp_bias=True)
    f.use("n_ctx", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
          "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
          "summary_first_dropout", "layer_norm_epsilon", "resid_pdrop", "embd_pdrop", "attn_pdrop", "task_specific_params")  # fmt: skip
    return out


def read_gptj(f: Fields) -> SpecFields:
    """GPT-J: attention and MLP in parallel after one LayerNorm, rotary on rotary_dim of each
    head, a non-gated GELU MLP with biases."""
    out = _decoder(f, hidden="n_embd", heads="n_head", layers="n_layer", ffn="n_inner", kv="", act="activation_function",
                   act_default="gelu_new", ffn_default=_four_times(f, "n_embd"))  # fmt: skip
    out.update(norm="layernorm", gated=False, parallel_block=True, mlp_bias=True)
    out["rotary_dim"] = f.whole("rotary_dim", 0)
    f.use(
        "n_positions",
        "layer_norm_epsilon",
        "task_specific_params",
        "rotary",
        "scale_attn_weights",
        "gradient_checkpointing",
    )
    f.use("summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout")
    f.notes.append("the LM head's bias not counted")
    return out


def read_falcon(f: Fields) -> SpecFields:
    """Falcon: parallel attention and MLP, multi-query (7B) or grouped KV (the new decoder
    architecture), a non-gated GELU MLP of 4 hidden, LayerNorm, rotary."""
    out = _decoder(f, ffn="ffn_hidden_size", kv="", act="activation", act_default="gelu",
                   ffn_default=_four_times(f, "hidden_size"), tied=True)  # fmt: skip
    if f.flag("new_decoder_architecture"):
        out["kv_heads"] = f.whole("num_kv_heads", out["heads"])
        f.notes.append("the new decoder architecture's two parallel LayerNorms costed as one")
    elif f.flag("multi_query", True):
        out["kv_heads"] = 1
    f.use("num_kv_heads", "multi_query")
    if f.flag("alibi"):
        f.problems.append(("alibi", "ALiBi position biases are not modelled (rotary Falcon models are)"))
    bias = f.flag("bias")
    out.update(norm="layernorm", gated=False, parallel_block=f.flag("parallel_attn", True))
    out.update(qkv_bias=bias, o_bias=bias, mlp_bias=bias)
    f.use("layer_norm_epsilon", "num_ln_in_parallel_attn", "apply_residual_connection_post_layernorm")
    return out


# fields that shape a model only some families have: key -> (the value with nothing to model,
# the families that read it, what they are); hf.py refuses them in a config of another family
_DEEPSEEK = ("deepseek_v2", "deepseek_v3", "deepseek_v32")
_QWEN_NEXT = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe")
_QWEN_MOE = ("qwen2_moe", "qwen3_moe", *_QWEN_NEXT)
STRUCTURAL: dict[str, tuple[object, tuple[str, ...], str]] = {
    "kv_lora_rank": (None, _DEEPSEEK, "latent attention (MLA) fields"),
    "q_lora_rank": (None, _DEEPSEEK, "latent attention (MLA) fields"),
    "qk_rope_head_dim": (None, _DEEPSEEK, "latent attention (MLA) fields"),
    "n_routed_experts": (None, (*_DEEPSEEK, "nemotron_h"), "DeepSeek's routed and shared experts"),
    "n_shared_experts": (0, (*_DEEPSEEK, "nemotron_h"), "shared experts"),
    "first_k_dense_replace": (0, _DEEPSEEK, "dense layers before the MoE ones"),
    "moe_layer_freq": (1, _DEEPSEEK, "dense layers among MoE ones"),
    "shared_expert_intermediate_size": (0, ("qwen2_moe", *_QWEN_NEXT), "shared experts"),
    "decoder_sparse_step": (1, _QWEN_MOE, "dense layers among MoE ones"),
    "mlp_only_layers": ([], _QWEN_MOE, "dense layers among MoE ones"),
    "interleave_moe_layer_step": (1, ("llama4", "llama4_text"), "dense layers among MoE ones"),
    "attention_chunk_size": (None, ("llama4", "llama4_text"), "chunked attention layers"),
    "linear_num_value_heads": (None, _QWEN_NEXT, "Gated DeltaNet (linear attention) layers"),
    "linear_num_key_heads": (None, _QWEN_NEXT, "Gated DeltaNet (linear attention) layers"),
    "full_attention_interval": (None, _QWEN_NEXT, "linear-attention layers between full ones"),
    "hybrid_override_pattern": (None, ("nemotron_h",), "Mamba-2 hybrid layouts"),
    "mamba_num_heads": (None, ("nemotron_h",), "Mamba-2 layers"),
    "ssm_state_size": (None, ("nemotron_h",), "Mamba-2 layers"),
    "mamba_d_state": (None, ("nemotron_h",), "Mamba layers"),
    "layers_block_type": (None, ("nemotron_h",), "Mamba layers"),
    "attn_layer_period": (None, ("nemotron_h",), "Mamba layers"),
    "index_topk": (None, ("deepseek_v32",), "DeepSeek sparse attention (an indexer over the cache) layers"),
    "index_n_heads": (None, ("deepseek_v32",), "DeepSeek sparse attention (an indexer over the cache) layers"),
    "index_head_dim": (None, ("deepseek_v32",), "DeepSeek sparse attention (an indexer over the cache) layers"),
}


@dataclass(frozen=True)
class Family:
    name: str  # what the README and messages call it
    read: Callable[[Fields], SpecFields]
    text_config: bool = False  # the decoder's fields sit under `text_config` (multimodal wrappers)


FAMILIES: dict[str, Family] = {
    "llama": Family("Llama 2/3", read_llama),
    "mistral": Family("Mistral", read_mistral),
    "mixtral": Family("Mixtral", read_mixtral),
    "qwen2": Family("Qwen2", read_qwen2),
    "qwen2_moe": Family("Qwen2-MoE", read_qwen2_moe),
    "qwen3": Family("Qwen3", read_qwen3),
    "qwen3_moe": Family("Qwen3-MoE", read_qwen3_moe),
    "deepseek_v2": Family("DeepSeek-V2", read_deepseek),
    "deepseek_v3": Family("DeepSeek-V3", read_deepseek),
    "deepseek_v32": Family("DeepSeek-V3.2", read_deepseek_v32),
    "gemma2": Family("Gemma 2", read_gemma2),
    "gemma3_text": Family("Gemma 3", read_gemma3),
    "gemma3": Family("Gemma 3", read_gemma3, text_config=True),
    "gpt_oss": Family("gpt-oss", read_gpt_oss),
    "llama4_text": Family("Llama 4", read_llama4),
    "llama4": Family("Llama 4", read_llama4, text_config=True),
    "gpt2": Family("GPT-2", read_gpt2),
    "gptj": Family("GPT-J", read_gptj),
    "falcon": Family("Falcon", read_falcon),
    "phi3": Family("Phi-3/Phi-4", read_phi3),
    "qwen3_next": Family("Qwen3-Next", read_qwen3_next),
    "qwen3_5_text": Family("Qwen3.5", read_qwen3_next),
    "qwen3_5_moe_text": Family("Qwen3.5-MoE", read_qwen3_next),
    "qwen3_5": Family("Qwen3.5", read_qwen3_next, text_config=True),
    "qwen3_5_moe": Family("Qwen3.5-MoE", read_qwen3_next, text_config=True),
    "nemotron_h": Family("Nemotron-H", read_nemotron_h),
}
ARCHITECTURES: dict[str, str] = {  # `architectures[0]` -> family
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "GptOssForCausalLM": "gpt_oss",
    "Llama4ForCausalLM": "llama4_text",
    "Llama4ForConditionalGeneration": "llama4",
    "GPT2LMHeadModel": "gpt2",
    "GPTJForCausalLM": "gptj",
    "FalconForCausalLM": "falcon",
    "Phi3ForCausalLM": "phi3",
    "Qwen3NextForCausalLM": "qwen3_next",
    "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe",
    "NemotronHForCausalLM": "nemotron_h",
}
