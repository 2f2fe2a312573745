"""Which format a matrix unit multiplies in, and what converting an operand into it costs.

A product of an A operand stored in format a and a B operand in format b runs in the wider of
the two (fp8 x fp8 in fp8, W4A16's int4 weights times bf16 activations in bf16); a chip whose
matrix units have no rate for that format is refused (tiles.matrix_format), never costed at
another format's rate (fp8 weights on an A100 are a weight-only kernel: bf16 activations,
their weights converted). An operand stored in another
format than the one the unit multiplies in is converted by the vector lanes inside each tile
step, once per element the step loads, unless the unit takes it directly: the 8-bit-and-below
floating formats (fp8, MXFP8, MXFP4, NVFP4) mix freely in an 8-bit or narrower product on a
unit that lists them (Blackwell's tcgen05 f8f6f4 kinds), so an MXFP4 weight times an MXFP8
activation needs no conversion there.

Conversion counts the thread-instructions a kernel issues per element into a 16-bit format
(as VECTOR_COSTS count them): fp8 and int8 a packed convert (two elements per instruction,
cvt.rn.f16x2.e4m3x2) and a packed scale multiply; int4 the LOP3 and magic-number subtract of
FasterTransformer's fast int4-to-fp16 path (Kim et al., arXiv 2211.10017, as Marlin, Frantar et
al. 2024, runs it), a register shuffle into the MMA layout and the group scale and zero point;
the 4-bit floating formats a byte-permute lookup of the E2M1 values and the block scale.
"""

from __future__ import annotations

from archsim.dtypes import DType

# thread-instructions per element to bring a stored operand into a 16-bit (or 8-bit) MAC format
CONVERT_LANE_OPS: dict[DType, float] = {
    DType.FP32: 0.5,
    DType.BF16: 0.5,
    DType.FP16: 0.5,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.MXFP8: 1.0,
    DType.INT4: 2.0,
    DType.MXFP4: 1.5,
    DType.NVFP4: 1.5,
}
MIXABLE = frozenset({DType.FP8, DType.MXFP8, DType.MXFP4, DType.NVFP4})  # formats an 8-bit float MMA mixes


def wider(a: DType, b: DType) -> DType:
    """The wider of two formats by element bits (ties: a's): the format their product runs in."""
    return a if a.bits >= b.bits else b


def converted(array, stored: DType, mac: DType) -> bool:
    """Whether an operand stored in `stored` is converted before an `mac` product."""
    if stored is mac:
        return False
    native = stored in MIXABLE and mac in MIXABLE and array.k_rate(stored) > 0
    return not native


def convert_lane_ops(array, a: DType, b: DType) -> tuple[float, float]:
    """Lane instructions per element of A and of B to convert them for their product (0: none)."""
    mac = wider(a, b)
    return (
        CONVERT_LANE_OPS[a] if converted(array, a, mac) else 0.0,
        CONVERT_LANE_OPS[b] if converted(array, b, mac) else 0.0,
    )
