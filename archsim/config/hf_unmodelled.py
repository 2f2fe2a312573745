"""What a Hugging Face config.json asks of archsim that it cannot cost truly, and how long a
sequence its model takes.

`unmodelled_problems`: a field of a mechanism archsim does not model (state-space layers,
linear attention, sparse attention, cross-attention, attention windows other than the ones the
families read) changes what a step costs; costed as dense attention, the result would be wrong
with nothing to say so. Such a field, present with a value that turns the mechanism on and not
read by the config's family reader (archsim/config/hf_families.py), is refused with its name.
A family that models one of them reads the field (`Fields.use` and the like) and so lifts the
refusal for its own configs.

`max_model_len`: the longest sequence (prompt and output) the model takes, derived as serving
engines derive it (vLLM's `_get_and_verify_max_len`): the smallest of the length fields
present, times the RoPE scaling factor for the scalings that stretch the positions (linear,
dynamic; YaRN from its original length), unchanged for Llama 3's and LongRoPE's.
"""

from __future__ import annotations

from typing import Any

from archsim.config.jsonfile import line_of
from archsim.errors import Problem, quote

_SSM = "state-space (Mamba) layers"
_LINEAR = "linear-attention layers"
_SPARSE = "sparse attention"
_CROSS = "cross-attention"
_WINDOW = "an attention window of a kind archsim does not read"

# field -> the mechanism it configures
UNMODELLED: dict[str, str] = {
    **dict.fromkeys(
        (
            "ssm_cfg",
            "state_size",
            "ssm_state_size",
            "mamba_d_state",
            "mamba_d_conv",
            "mamba_expand",
            "mamba_n_heads",
            "mamba_d_head",
            "mamba_head_dim",
            "mamba_n_groups",
            "mamba_chunk_size",
            "mamba_dt_rank",
            "time_step_rank",
            "attn_layer_period",
            "attn_layer_offset",
            "attn_layer_indices",
            "hybrid_override_pattern",
            "layers_block_type",
        ),
        _SSM,
    ),
    **dict.fromkeys(
        (
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel_dim",
            "linear_attn_config",
            "full_attention_interval",
            "attn_type_list",
        ),
        _LINEAR,
    ),
    **dict.fromkeys(
        ("index_topk", "index_n_heads", "index_head_dim", "sparse_attention_config", "block_sparse_attention"),
        _SPARSE,
    ),
    **dict.fromkeys(("cross_attention_layers", "add_cross_attention", "is_encoder_decoder"), _CROSS),
    **dict.fromkeys(
        (
            "sliding_window",
            "use_sliding_window",
            "sliding_window_pattern",
            "attention_window",
            "attention_types",
            "window_size",
            "local_attention",
            "global_attn_every_n_layers",
        ),
        _WINDOW,
    ),
}

# the length fields serving engines take the smallest of (vLLM's possible_keys, in its order)
LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
UNSCALED_ROPE = ("su", "longrope", "llama3")  # scalings that keep the stated maximum


def unmodelled_off(key: str, value: object, data: dict[str, Any]) -> bool:
    """Whether `value` leaves the mechanism off: null, false, zero, empty, or a window that
    `use_sliding_window: false` turns off (Qwen's configs keep one)."""
    if value in (None, False, 0, "", [], {}):
        return True
    return key == "sliding_window" and data.get("use_sliding_window") is False


def unmodelled_problems(data: dict[str, Any], used: set[str], path: str, text: str) -> list[Problem]:
    """A problem for each field of a mechanism archsim does not model that is on and that the
    family reader did not read."""
    return [
        Problem(
            path,
            line_of(text, key),
            key,
            f"{UNMODELLED[key]} are not modelled: archsim would cost this model as dense attention, "
            f"so it refuses it (got {quote(value)})",
        )
        for key, value in data.items()
        if key in UNMODELLED and key not in used and not unmodelled_off(key, value, data)
    ]


def _whole(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1 or value != int(value):
        return None
    return int(value)


def max_model_len(data: dict[str, Any]) -> tuple[int, str] | None:
    """The longest sequence the model takes and the field it is from (`max_position_embeddings`,
    `rope_scaling.factor x ...`), or None when the config states none."""
    found = [(n, key) for key in LENGTH_KEYS if (n := _whole(data.get(key))) is not None]
    if not found:
        return None
    length, key = min(found)
    rope = data.get("rope_scaling")
    if isinstance(rope, dict):
        kind = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor", 1.0)
        if isinstance(kind, str) and kind not in UNSCALED_ROPE and _positive(factor):
            if kind == "yarn" and (original := _whole(rope.get("original_max_position_embeddings"))) is not None:
                length, key = original, "rope_scaling.original_max_position_embeddings"
            scaled = int(length * float(factor))
            if scaled != length:
                return scaled, f"{key} {length:,} x rope_scaling.factor {factor:g}"
    return length, key


def _positive(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < 1e6
