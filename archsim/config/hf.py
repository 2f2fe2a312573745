"""A model from a Hugging Face transformers `config.json` on disk (no network).

The architecture (`architectures[0]`, else `model_type`) picks the reader of its family
(archsim/config/hf_families.py): Llama 2/3/4, Mistral, Mixtral, Qwen2/3 and their MoE models,
DeepSeek-V2/V3 and V3.2 (sparse attention), Gemma 2/3, gpt-oss, GPT-2, GPT-J, Falcon,
Phi-3/Phi-4, and the hybrids Qwen3-Next and Qwen3.5 (Gated DeltaNet) and Nemotron-H /
Nemotron 3 (Mamba-2). `layer_types` is checked for its length and kinds; in a family that does
not read it, a layer of another kind than full attention is refused. Every field that changes
what a step costs is read, or refused with `file:line: key: why`; an architecture archsim does not read
is refused in one line, never run as a dense Llama, and a field that shapes another family's
models (latent attention in a Llama config) is refused too. The file is read strictly and
boundedly (archsim/config/jsonfile.py); every count has the bounds of a workload file. Fields that change the cost but that
archsim does not model, and what it costs differently from the checkpoint, are returned as
notes for a warning; fields that change nothing archsim costs (token ids, norm epsilon, RoPE
base, dropout) are passed over. A config with neither `architectures` nor `model_type` is read
with Llama's field names.

The formats: `torch_dtype` (or `dtype`) and a `quantization_config` (fp8, MXFP4, 4- and 8-bit
AWQ/GPTQ) give the checkpoint's formats, which replace the workload's only when asked
(`archsim run --model-dtypes`); by default the workload's dtypes apply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim.config.hf_families import ARCHITECTURES, FAMILIES, STRUCTURAL, Fields, SpecFields
from archsim.config.hf_unmodelled import max_model_len, unmodelled_off, unmodelled_problems
from archsim.config.jsonfile import line_of, read_json
from archsim.dtypes import DType
from archsim.errors import ConfigError, Problem, quote
from archsim.graph.model import Activation, AttentionKind, ModelSpec, Norm, Positions

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
        "layer_norm_eps",
        "rope_theta",
        "use_cache",
        "attention_dropout",
        "tokenizer_class",
        "auto_map",
        "torch_dtype",
        "dtype",
        "quantization_config",
        "return_dict",
        "output_attentions",
        "output_hidden_states",
        "is_decoder",
        "tie_word_embeddings",
        "text_config",
        "vision_config",
        "image_token_index",
        "boi_token_index",
        "eoi_token_index",
        "mm_tokens_per_image",
        "vision_feature_layer",
        # training only
        "router_aux_loss_coef",
        "router_jitter_noise",
        "output_router_logits",
        "aux_loss_alpha",
        "seq_aux",
        "pretraining_tp",
        "gradient_checkpointing",
    }
)


@dataclass(frozen=True)
class HfModel:
    """A model read from a config.json: its shape, its formats if stated, and notes."""

    model: ModelSpec
    dtype: DType | None  # torch_dtype
    unmodelled: tuple[str, ...]  # `field=value (what archsim does instead)` and notes, for a warning
    source: str
    dtypes: dict[str, str] | None = None  # the checkpoint's formats as a workload `dtypes:` section
    max_model_len: tuple[int, str] | None = None  # the longest sequence and the field it is from


def _line_of(text: str, key: str) -> int | None:
    return line_of(text, key)


def _read(path: str) -> tuple[dict[str, Any], str]:
    data, text = read_json(path, "config.json")
    if not isinstance(data, dict):
        raise ConfigError.single(path, "", "expected a JSON object of config fields")
    return data, text


def family_of(data: dict[str, Any], path: str, text: str) -> str:
    """The family reader's key: from `architectures[0]`, else `model_type`, else Llama's."""
    arch = data.get("architectures")
    if arch is not None:
        if not isinstance(arch, list) or not arch or not isinstance(arch[0], str):
            raise ConfigError.single(
                path, "architectures", f"expected a list of names (got {quote(arch)})", _line_of(text, "architectures")
            )
        if arch[0] not in ARCHITECTURES:
            raise ConfigError.single(
                path,
                "architectures",
                f"{arch[0]!r} is not an architecture archsim reads; it reads {', '.join(sorted(ARCHITECTURES))}",
                _line_of(text, "architectures"),
            )
        return ARCHITECTURES[arch[0]]
    family = data.get("model_type")
    if family is None:
        return "llama"
    if not isinstance(family, str) or family not in FAMILIES:
        raise ConfigError.single(
            path,
            "model_type",
            f"{quote(family)} is not a model type archsim reads; it reads {', '.join(sorted(FAMILIES))}",
            _line_of(text, "model_type"),
        )
    return family


def _dtype(data: dict[str, Any], path: str, text: str) -> tuple[DType | None, list[Problem]]:
    key = "torch_dtype" if data.get("torch_dtype") is not None else "dtype"
    name = data.get(key)
    if name is None or name == "auto":
        return None, []
    if not isinstance(name, str) or name not in TORCH_DTYPES:
        return None, [
            Problem(path, _line_of(text, key), key, f"expected one of {', '.join(TORCH_DTYPES)} (got {quote(name)})")
        ]
    return TORCH_DTYPES[name], []


def checkpoint_dtypes(data: dict[str, Any], dtype: DType | None) -> tuple[dict[str, str] | None, list[str]]:
    """The checkpoint's formats as a `dtypes:` section (None if it states none), and notes on a
    quantisation it does not read: torch_dtype for everything; fp8 (DeepSeek's block-scaled W8A8)
    weights and GEMM inputs in fp8; MXFP4 (gpt-oss) the routed experts; AWQ/GPTQ 4- or 8-bit
    weights."""
    out = dict.fromkeys(("weights", "activations", "kv_cache"), dtype.value) if dtype else {}
    q = data.get("quantization_config")
    if not isinstance(q, dict):
        return (out or None), []
    method, bits = q.get("quant_method"), q.get("bits")
    if method == "fp8":
        out.update(weights="fp8", compute="fp8")
    elif method == "mxfp4":
        out["expert_weights"] = "mxfp4"
    elif method in ("awq", "gptq") and bits in (4, 8):
        out["weights"] = "int4" if bits == 4 else "int8"
    else:
        return (out or None), [f"quantization_config={_short(q)} (not read; the weights' format is torch_dtype)"]
    return out, []


def structural_problems(data: dict[str, Any], family: str, path: str, text: str) -> list[Problem]:
    """Fields that shape a model only the families that read them have (latent attention, shared
    experts, dense layers among MoE ones, chunked attention): in a config of another family they
    are refused, never run as something else; a field that turns its mechanism off (its neutral
    value, or false, 0 or empty where it has none) is not."""
    problems = []
    for key, (neutral, families, what) in STRUCTURAL.items():
        value = data.get(key)
        off = value is None or value == neutral or (neutral is None and unmodelled_off(key, value, data))
        if not off and family not in families:
            names = ", ".join(sorted(k for k, f in ARCHITECTURES.items() if f in families))
            where = f"are read for {names} configs" if names else "are not modelled"
            problems.append(Problem(path, _line_of(text, key), key, f"{what} {where} (got {quote(data[key])})"))
    return problems


def layer_types_problems(data: dict[str, Any], used: set[str], path: str, text: str) -> list[Problem]:
    """`layer_types` in a family that does not read it: refused unless every layer is a full
    attention layer (what such a family costs), never costed as something else."""
    kinds = data.get("layer_types")
    if "layer_types" in used or kinds is None:
        return []
    other = sorted({k for k in kinds if k != "full_attention"}) if isinstance(kinds, list) else [kinds]
    if not other:
        return []
    return [
        Problem(
            path,
            _line_of(text, "layer_types"),
            "layer_types",
            f"{', '.join(map(quote, other))}: layers of another kind than full attention are not read for this family",
        )
    ]


def _shape_problems(spec: SpecFields, path: str, text: str) -> list[Problem]:
    problems = []
    heads, kv = spec["heads"], spec["kv_heads"]
    if heads and kv and heads % kv:
        problems.append(
            Problem(
                path,
                _line_of(text, "num_key_value_heads"),
                "num_key_value_heads",
                f"must divide the {heads} attention heads (got {kv})",
            )
        )
    if spec.get("experts", 1) > 1 and spec.get("top_k", 1) > spec["experts"]:
        problems.append(
            Problem(
                path,
                _line_of(text, "num_experts_per_tok"),
                "num_experts_per_tok",
                f"must not exceed the {spec['experts']} experts (got {spec['top_k']})",
            )
        )
    if spec.get("dense_layers", 0) >= spec["layers"] > 0 and spec.get("experts", 1) > 1:
        problems.append(Problem(path, None, "first_k_dense_replace", f"leaves no MoE layer of the {spec['layers']}"))
    return problems


def unread_fields(data: dict[str, Any], used: set[str]) -> list[str]:
    """The fields no reader used that may change a step's cost (a value that means nothing to
    model, null, false or empty, is passed over)."""
    out = []
    for key, value in data.items():
        if key in used or key in NO_COST or key.endswith(("_dropout", "_pdrop")) or value in (None, False, [], {}):
            continue
        out.append(f"{key}={_short(value)} (not modelled)")
    return out


def _short(value: object, limit: int = 40) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def model_name(data: dict[str, Any], path: str) -> str:
    """`_name_or_path`'s last part, else the folder of a `config.json`, else the file's stem."""
    named = data.get("_name_or_path")
    if isinstance(named, str) and named.strip("/"):
        return named.rstrip("/").rsplit("/", 1)[-1]
    p = Path(path).resolve()
    return p.parent.name if p.stem == "config" and p.parent.name else p.stem


def _spec(name: str, fields: SpecFields) -> ModelSpec:
    enums = {
        "attention": AttentionKind,
        "norm": Norm,
        "activation": Activation,
        "positions": Positions,
    }
    return ModelSpec(name=name, **{k: enums[k](v) if k in enums else v for k, v in fields.items()})


def load_hf_config(path: str) -> HfModel:
    """Read a transformers config.json into a ModelSpec; ConfigError lists every problem."""
    data, text = _read(path)
    family_key = family_of(data, path, text)
    family = FAMILIES[family_key]
    fields_data = data
    if family.text_config:
        inner = data.get("text_config")
        if not isinstance(inner, dict):
            raise ConfigError.single(
                path,
                "text_config",
                f"{family.name} keeps its decoder under text_config (got {quote(inner)})",
                _line_of(text, "text_config"),
            )
        fields_data = inner
    f = Fields(fields_data)
    spec = family.read(f)
    problems = structural_problems(fields_data, family_key, path, text)
    problems += [Problem(path, _line_of(text, key), key, why) for key, why in f.problems]
    problems += layer_types_problems(fields_data, f.used, path, text)
    problems += _shape_problems(spec, path, text)
    named = {q.key for q in problems}  # a field refused above by the family that reads it is not refused twice
    problems += [q for q in unmodelled_problems(fields_data, f.used, path, text) if q.key not in named]
    dtype, dtype_problems = _dtype(data, path, text)
    problems += dtype_problems
    if problems:
        raise ConfigError(problems)
    if spec.get("local_layers", 0) > spec["layers"]:
        spec["local_layers"] = spec["layers"]
    if not spec.get("dense_layers"):  # a dense width with no dense layer to use it
        spec.pop("dense_ffn", None)
    model = _spec(model_name(data, path), spec)
    dtypes, notes = checkpoint_dtypes(data, dtype)
    unmodelled = tuple(unread_fields(fields_data, f.used) + f.notes + notes)
    return HfModel(model, dtype, unmodelled, path, dtypes, max_model_len(fields_data))


def model_cfg(model: ModelSpec) -> dict[str, Any]:
    """The model as the `model:` section of a workload file (what differs from a Llama-style
    default only), for the resolved config and its hash."""
    out: dict[str, Any] = {
        "layers": model.layers,
        "hidden": model.hidden,
        "heads": model.heads,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "ffn": model.ffn,
        "vocab": model.vocab,
        "tied_embeddings": model.tied_embeddings,
        "moe": None,
    }
    if model.is_moe:
        moe = {"experts": model.experts, "top_k": model.top_k}
        for key, value in (
            ("shared_ffn", model.shared_ffn),
            ("dense_layers", model.dense_layers),
            ("dense_ffn", model.dense_ffn),
        ):
            if value:
                moe[key] = value
        out["moe"] = moe
    attention = {
        "kind": "mla" if model.is_mla else None,
        "q_lora_rank": model.q_lora_rank or None,
        "kv_lora_rank": model.kv_lora_rank or None,
        "rope_head_dim": model.rope_head_dim or None,
        "v_head_dim": model.v_head_dim or None,
        "sliding_window": model.sliding_window or None,
        "local_layers": model.local_layers if model.sliding_window else None,
        "qk_norm": model.qk_norm or None,
        "qkv_bias": model.qkv_bias or None,
        "o_bias": model.o_bias or None,
        "logit_softcap": model.logit_softcap or None,
        "rotary_dim": model.rotary_dim or None,
        "output_gate": model.attn_output_gate or None,
        "index_heads": model.index_heads or None,
        "index_head_dim": model.index_head_dim or None,
        "index_topk": model.index_topk or None,
    }
    attention = {k: v for k, v in attention.items() if v is not None}
    if attention:
        out["attention"] = attention
    mlp = {
        "activation": model.activation.value if model.activation is not Activation.SILU else None,
        "gated": False if not model.gated else None,
        "bias": model.mlp_bias or None,
    }
    mlp = {k: v for k, v in mlp.items() if v is not None}
    if mlp:
        out["mlp"] = mlp
    if model.norm is not Norm.RMSNORM:
        out["norm"] = model.norm.value
    if model.parallel_block:
        out["parallel_block"] = True
    if model.post_norms:
        out["post_norms"] = True
    if model.positions is not Positions.ROPE:
        out["positions"] = model.positions.value
    if model.max_positions:
        out["max_positions"] = model.max_positions
    if model.mtp_layers:
        out["mtp_layers"] = model.mtp_layers
    out.update(_mixers_cfg(model))
    return out


def _mixers_cfg(model: ModelSpec) -> dict[str, Any]:
    """The recurrent mixers and one-part blocks of a hybrid, as workload sections."""
    out: dict[str, Any] = {}
    if model.linear_layers:
        out["linear_attention"] = {
            "layers": model.linear_layers,
            "k_heads": model.linear_k_heads,
            "v_heads": model.linear_v_heads,
            "k_head_dim": model.linear_k_dim,
            "v_head_dim": model.linear_v_dim,
            "conv_kernel": model.conv_kernel,
        }
    if model.mamba_layers:
        out["mamba"] = {
            "layers": model.mamba_layers,
            "heads": model.mamba_heads,
            "head_dim": model.mamba_head_dim,
            "state": model.mamba_state,
            "groups": model.mamba_groups,
            "conv_kernel": model.conv_kernel,
            "chunk": model.mamba_chunk,
        }
    for key in ("mixer_only_layers", "ffn_only_layers"):
        if getattr(model, key):
            out[key] = getattr(model, key)
    return out
