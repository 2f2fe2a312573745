"""A model from a Hugging Face transformers `config.json` on disk (no network).

Reads the field names of the Llama, Mistral, Qwen2 and Mixtral configs: `hidden_size`,
`num_attention_heads`, `num_key_value_heads` (default: as many as the query heads),
`head_dim` (default: hidden_size / num_attention_heads), `intermediate_size`,
`num_hidden_layers`, `vocab_size`, `num_local_experts` and `num_experts_per_tok` (MoE),
`tie_word_embeddings` (default false, as in those families) and `torch_dtype` (or `dtype`).
Fields that change what a step costs but that archsim does not model (a sliding window,
projection biases, RoPE scaling, quantisation, ...) are returned by name, for a warning; fields
that do not change the cost (token ids, norm epsilon, RoPE base) are passed over. Every problem
in the file is reported at once as a ConfigError located by file and line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from archsim.errors import ConfigError, Problem
from archsim.graph.model import ModelSpec
from archsim.hardware import DType

FAMILIES = ("llama", "mistral", "qwen2", "mixtral")
REQUIRED = ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers", "vocab_size")
OPTIONAL_INTS = ("num_key_value_heads", "head_dim", "num_local_experts", "num_experts_per_tok")
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


def _line_of(text: str, key: str) -> int | None:
    """Line of the first `"key":` in the file (JSON keeps no positions after parsing)."""
    match = re.search(rf'"{re.escape(key)}"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _read(path: str) -> tuple[dict, str]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError.single(path, "", "no such file" if not p.exists() else "not a file")
    try:
        text = p.read_text()
        data = json.loads(text)
    except UnicodeDecodeError:
        raise ConfigError.single(path, "", "not a text file") from None
    except json.JSONDecodeError as err:
        raise ConfigError.single(path, "", f"not valid JSON: {err.msg} (column {err.colno})", err.lineno) from None
    if not isinstance(data, dict):
        raise ConfigError.single(path, "", "expected a JSON object of config fields")
    return data, text


def _ints(data: dict, path: str, text: str) -> tuple[dict[str, int], list[Problem]]:
    """The whole-number fields, each above zero; a missing required field is a problem."""
    values, problems = {}, []
    for key in REQUIRED + OPTIONAL_INTS:
        value = data.get(key)
        if value is None:
            if key in REQUIRED:
                problems.append(Problem(path, None, key, "missing required field"))
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(
                Problem(path, _line_of(text, key), key, f"expected a whole number above zero (got {value!r})")
            )
            continue
        values[key] = value
    return values, problems


def _shape_problems(v: dict[str, int], path: str, text: str) -> list[Problem]:
    def at(key: str, message: str) -> Problem:
        return Problem(path, _line_of(text, key), key, message)

    problems = []
    heads, kv = v.get("num_attention_heads"), v.get("num_key_value_heads")
    if heads and kv and heads % kv:
        problems.append(at("num_key_value_heads", f"must divide num_attention_heads ({heads}) (got {kv})"))
    hidden = v.get("hidden_size")
    if heads and hidden and "head_dim" not in v and hidden % heads:
        problems.append(
            at("hidden_size", f"not a multiple of num_attention_heads ({heads}) and no head_dim given (got {hidden})")
        )
    experts, top_k = v.get("num_local_experts", 1), v.get("num_experts_per_tok", 1)
    if experts > 1 and top_k > experts:
        problems.append(at("num_experts_per_tok", f"must not exceed num_local_experts ({experts}) (got {top_k})"))
    return problems


def _dtype(data: dict, path: str, text: str) -> tuple[DType | None, list[Problem]]:
    key = "torch_dtype" if data.get("torch_dtype") is not None else "dtype"
    name = data.get(key)
    if name is None or name == "auto":
        return None, []
    if name not in TORCH_DTYPES:
        return None, [
            Problem(path, _line_of(text, key), key, f"expected one of {', '.join(TORCH_DTYPES)} (got {name!r})")
        ]
    return TORCH_DTYPES[name], []


def unmodelled_fields(data: dict) -> tuple[str, ...]:
    """The fields that would change the cost of a step but that archsim does not model."""
    used = set(REQUIRED + OPTIONAL_INTS) | {"tie_word_embeddings"}
    out = []
    family = data.get("model_type")
    if isinstance(family, str) and family not in FAMILIES:
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
    problems += _shape_problems(v, path, text)
    dtype, dtype_problems = _dtype(data, path, text)
    problems += dtype_problems
    tied = data.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        problems.append(
            Problem(
                path,
                _line_of(text, "tie_word_embeddings"),
                "tie_word_embeddings",
                f"expected true or false (got {tied!r})",
            )
        )
    if problems:
        raise ConfigError(problems)
    heads, experts = v["num_attention_heads"], v.get("num_local_experts", 1)
    model = ModelSpec(
        name=model_name(data, path),
        layers=v["num_hidden_layers"],
        hidden=v["hidden_size"],
        heads=heads,
        kv_heads=v.get("num_key_value_heads", heads),
        head_dim=v.get("head_dim", v["hidden_size"] // heads),
        ffn=v["intermediate_size"],
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
