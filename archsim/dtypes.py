"""Number formats of weights, activations and the KV cache, shared by the graph and the hardware."""

from __future__ import annotations

from enum import Enum


class DType(str, Enum):
    """Number formats of weights, activations and the KV cache."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def bytes(self) -> float:
        return _BYTES[self.value]


_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
