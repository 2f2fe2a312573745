"""Number formats of weights, activations and the KV cache, shared by the graph and the hardware.

A format's `bytes` is what one element occupies in memory, its block scale included: the OCP
Microscaling formats (MX v1.0, 2023) share one 8-bit power-of-two scale (E8M0) per block of 32
elements, so MXFP8 takes 1 + 1/32 bytes and MXFP4 0.5 + 1/32; NVIDIA's NVFP4 shares one FP8
(E4M3) scale per block of 16 (Blackwell whitepaper, 2024), 0.5 + 1/16 bytes (its one fp32 scale
per tensor is negligible). `bits` is the width of an element alone, which sets how a matrix unit
takes it.
"""

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
    MXFP8 = "mxfp8"  # OCP MX: fp8 (E4M3) elements, one E8M0 scale per 32
    MXFP4 = "mxfp4"  # OCP MX: fp4 (E2M1) elements, one E8M0 scale per 32
    NVFP4 = "nvfp4"  # NVIDIA: fp4 (E2M1) elements, one E4M3 scale per 16

    @property
    def bytes(self) -> float:
        """Bytes one element occupies in memory, its share of a block scale included."""
        bits, scale_bits, block = _FORMATS[self.value]
        return bits / 8.0 + (scale_bits / 8.0 / block if block else 0.0)

    @property
    def bits(self) -> int:
        """Bits of one element, without its block scale."""
        return _FORMATS[self.value][0]

    @property
    def block_scaled(self) -> bool:
        return _FORMATS[self.value][2] > 0


# format: (element bits, scale bits, elements per scale block; 0: no block scale)
_FORMATS = {
    "fp32": (32, 0, 0),
    "bf16": (16, 0, 0),
    "fp16": (16, 0, 0),
    "fp8": (8, 0, 0),
    "int8": (8, 0, 0),
    "int4": (4, 0, 0),
    "mxfp8": (8, 8, 32),
    "mxfp4": (4, 8, 32),
    "nvfp4": (4, 8, 16),
}
DTYPE_NAMES = tuple(_FORMATS)
