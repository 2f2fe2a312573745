"""A model from a Hugging Face transformers `config.json` on disk (no network).

Reads the field names of the Llama, Mistral, Qwen2 and Mixtral configs: `hidden_size`,
`num_attention_heads`, `num_key_value_heads` (default: as many as the query heads),
`head_dim` (default: hidden_size / num_attention_heads), `intermediate_size`,
`num_hidden_layers`, `vocab_size`, `num_local_experts` and `num_experts_per_tok` (MoE; the
experts may also be `num_experts`, as in OLMoE and Qwen3-MoE, with their width in
`moe_intermediate_size`), `tie_word_embeddings` (default false, as in those families) and
`torch_dtype` (or `dtype`). Fields that change what a step costs but that archsim does not model
(a sliding window, projection biases, RoPE scaling, quantisation, ...) are returned by name, for
a warning; fields that do not change the cost (token ids, norm epsilon, RoPE base) are passed
over. A model archsim cannot represent at all (latent attention, shared experts, dense layers
among MoE layers) is refused, never run as a dense model. Every problem in the file is reported
at once as a ConfigError located by file and line; every count has the bounds of a workload file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from archsim import limits
from archsim.config.jsonfile import line_of, read_json
from archsim.errors import ConfigError, Problem, quote
from archsim.graph.model import ModelSpec
from archsim.hardware import DType

FAMILIES = ("llama", "mistral", "qwen2", "mixtral")
REQUIRED = ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers", "vocab_size")
OPTIONAL_INTS = (
    "num_key_value_heads",
    "head_dim",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
)
UPPER = {  # the bounds of a workload file (archsim.limits)
    "num_hidden_layers": limits.MAX_LAYERS,
    "num_attention_heads": limits.MAX_HEADS,
    "num_key_value_heads": limits.MAX_HEADS,
    "num_local_experts": limits.MAX_EXPERTS,
    "num_experts": limits.MAX_EXPERTS,
    "num_experts_per_tok": limits.MAX_EXPERTS,
}
# what a model may hold that archsim cannot represent: field -> (value with nothing to model, why)
UNREPRESENTABLE = {
    "kv_lora_rank": (None, "multi-head latent attention (MLA) is not modelled"),
    "q_lora_rank": (None, "multi-head latent attention (MLA) is not modelled"),
    "n_routed_experts": (None, "DeepSeek-style experts (routed and shared) are not modelled"),
    "n_shared_experts": (0, "shared experts are not modelled"),
    "shared_expert_intermediate_size": (0, "shared experts are not modelled"),
    "first_k_dense_replace": (0, "dense layers among MoE layers are not modelled"),
    "moe_layer_freq": (1, "dense layers among MoE layers are not modelled"),
    "decoder_sparse_step": (1, "dense layers among MoE layers are not modelled"),
    "mlp_only_layers": ([], "dense layers among MoE layers are not modelled"),
}
TORCH_DTYPES = {
    "bfloat16": DType.BF16,
    "float16": DType.FP16,
    "float32": DType.FP32,
    "float8_e4m3fn": DType.FP8,
    "int8": DType.INT8,
}
# no effect on the cost of a step: identity, token ids, numerics, training-only settings
NO_COST = frozenset(
    {
        "_name_or_path",
        "architectures",
        "model_type",
        "transformers_version",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "initializer_range",
        "rms_norm_eps",
        "rope_theta",
        "use_cache",
        "attention_dropout",
        "pretraining_tp",
        "max_position_embeddings",
        "output_router_logits",
        "router_aux_loss_coef",
        "router_jitter_noise",
        "tokenizer_class",
        "auto_map",
        "max_window_layers",
        "torch_dtype",
        "dtype",
        "use_sliding_window",
        "return_dict",
        "output_attentions",
        "output_hidden_states",
        "is_decoder",
        "norm_topk_prob",
    }
)
# field -> (the value at which there is nothing to model, what archsim does instead)
NEUTRAL = {
    "rope_scaling": (None, "positions only; costed as plain RoPE"),
    "sliding_window": (None, "attention reads the whole KV cache"),
    "attention_bias": (False, "projection biases not counted"),
    "mlp_bias": (False, "FFN biases not counted"),
    "hidden_act": ("silu", "FFN costed as a SiLU-gated unit"),
    "quantization_config": (None, "weights costed in torch_dtype"),
}
FAMILY_NOTES = {"qwen2": "q/k/v projection biases (Qwen2) not counted"}


@dataclass(frozen=True)
class HfModel:
    """A model read from a config.json: its shape, its dtype if stated, and what it leaves out."""

    model: ModelSpec
    dtype: DType | None
    unmodelled: tuple[str, ...]  # `field=value (what archsim does instead)`, for a warning
    source: str


def _read(path: str) -> tuple[dict, str]:
    data, text = read_json(path, "config.json")
    if not isinstance(data, dict):
        raise ConfigError.single(path, "", "expected a JSON object of config fields")
    return data, text


def _ints(data: dict, path: str, text: str) -> tuple[dict[str, int], list[Problem]]:
    """The whole-number fields, each above zero and within its bound; a missing required field
    is a problem."""
    values, problems = {}, []
    for key in REQUIRED + OPTIONAL_INTS:
        value = data.get(key)
        if value is None:
            if key in REQUIRED:
                problems.append(Problem(path, None, key, "missing required field"))
            continue
        high = UPPER.get(key, limits.MAX_WIDTH)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(
                Problem(path, line_of(text, key), key, f"expected a whole number above zero (got {quote(value)})")
            )
            continue
        if value > high:
            problems.append(Problem(path, line_of(text, key), key, f"must be at most {high:,} (got {value:,})"))
            continue
        values[key] = value
    return values, problems


def _unrepresentable(data: dict, path: str, text: str) -> list[Problem]:
    """Refusals of what archsim cannot model at all (never run as something else)."""
    problems = []
    for key, (nothing, why) in UNREPRESENTABLE.items():
        if key in data and data[key] is not None and data[key] != nothing:
            problems.append(Problem(path, line_of(text, key), key, f"{why} (got {quote(data[key])})"))
    return problems


def _shape_problems(v: dict[str, int], path: str, text: str) -> list[Problem]:
    def at(key: str, message: str) -> Problem:
        return Problem(path, line_of(text, key), key, message)

    problems = []
    heads, kv = v.get("num_attention_heads"), v.get("num_key_value_heads")
    if heads and kv and heads % kv:
        problems.append(at("num_key_value_heads", f"must divide num_attention_heads ({heads}) (got {kv})"))
    hidden = v.get("hidden_size")
    if heads and hidden and "head_dim" not in v and hidden % heads:
        problems.append(
            at("hidden_size", f"not a multiple of num_attention_heads ({heads}) and no head_dim given (got {hidden})")
        )
    experts_key = _experts_key(v)
    experts, top_k = v.get(experts_key, 1), v.get("num_experts_per_tok", 1)
    if experts > 1 and top_k > experts:
        problems.append(at("num_experts_per_tok", f"must not exceed {experts_key} ({experts}) (got {top_k})"))
    if "num_local_experts" in v and "num_experts" in v and v["num_local_experts"] != v["num_experts"]:
        problems.append(at("num_experts", f"disagrees with num_local_experts ({v['num_local_experts']})"))
    return problems


def _experts_key(v: dict[str, int]) -> str:
    return "num_local_experts" if "num_local_experts" in v else "num_experts"


def _dtype(data: dict, path: str, text: str) -> tuple[DType | None, list[Problem]]:
    key = "torch_dtype" if data.get("torch_dtype") is not None else "dtype"
    name = data.get(key)
    if name is None or name == "auto":
        return None, []
    if not isinstance(name, str) or name not in TORCH_DTYPES:
        return None, [
            Problem(path, line_of(text, key), key, f"expected one of {', '.join(TORCH_DTYPES)} (got {quote(name)})")
        ]
    return TORCH_DTYPES[name], []


def unmodelled_fields(data: dict) -> tuple[str, ...]:
    """The fields that would change the cost of a step but that archsim does not model."""
    used = set(REQUIRED + OPTIONAL_INTS) | {"tie_word_embeddings"} | set(UNREPRESENTABLE)
    out = []
    family = data.get("model_type")
    if not isinstance(family, str):
        family = None if family is None else _short(family)
    if family is not None and family not in FAMILIES:
        out.append(f"model_type={family!r} (read with Llama field names)")
    if family in FAMILY_NOTES:
        out.append(FAMILY_NOTES[family])
    for key, value in data.items():
        if key in used or key in NO_COST:
            continue
        if key in NEUTRAL:
            neutral, instead = NEUTRAL[key]
            if value == neutral or (key == "sliding_window" and data.get("use_sliding_window") is False):
                continue
            out.append(f"{key}={_short(value)} ({instead})")
        else:
            out.append(f"{key}={_short(value)} (not modelled)")
    return tuple(out)


def _short(value: object, limit: int = 40) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def model_name(data: dict, path: str) -> str:
    """`_name_or_path`'s last part, else the folder of a `config.json`, else the file's stem."""
    named = data.get("_name_or_path")
    if isinstance(named, str) and named.strip("/"):
        return named.rstrip("/").rsplit("/", 1)[-1]
    p = Path(path).resolve()
    return p.parent.name if p.stem == "config" and p.parent.name else p.stem


def load_hf_config(path: str) -> HfModel:
    """Read a transformers config.json into a ModelSpec; ConfigError lists every problem."""
    data, text = _read(path)
    v, problems = _ints(data, path, text)
    problems += _unrepresentable(data, path, text)
    problems += _shape_problems(v, path, text)
    dtype, dtype_problems = _dtype(data, path, text)
    problems += dtype_problems
    tied = data.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        problems.append(
            Problem(
                path,
                line_of(text, "tie_word_embeddings"),
                "tie_word_embeddings",
                f"expected true or false (got {quote(tied)})",
            )
        )
    if problems:
        raise ConfigError(problems)
    heads, experts = v["num_attention_heads"], v.get(_experts_key(v), 1)
    ffn = v.get("moe_intermediate_size", v["intermediate_size"]) if experts > 1 else v["intermediate_size"]
    model = ModelSpec(
        name=model_name(data, path),
        layers=v["num_hidden_layers"],
        hidden=v["hidden_size"],
        heads=heads,
        kv_heads=v.get("num_key_value_heads", heads),
        head_dim=v.get("head_dim", v["hidden_size"] // heads),
        ffn=ffn,
        vocab=v["vocab_size"],
        tied_embeddings=tied,
        experts=experts,
        top_k=v.get("num_experts_per_tok", 1) if experts > 1 else 1,
    )
    return HfModel(model, dtype, unmodelled_fields(data), path)


def model_cfg(model: ModelSpec) -> dict:
    """The model as the `model:` section of a workload file, for the resolved config and its hash."""
    return {
        "layers": model.layers,
        "hidden": model.hidden,
        "heads": model.heads,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "ffn": model.ffn,
        "vocab": model.vocab,
        "tied_embeddings": model.tied_embeddings,
        "moe": {"experts": model.experts, "top_k": model.top_k} if model.is_moe else None,
    }
