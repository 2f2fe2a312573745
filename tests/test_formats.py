"""Storage and compute formats: the format a matrix unit multiplies in, the conversion of an
operand it does not take, fp8 KV under bf16 maths, native block-scaled formats. Expected values
derived by hand in the comments."""

from dataclasses import replace

import pytest

from archsim.choose import simulate_op
from archsim.compiler.formats import convert_lane_ops
from archsim.compiler.tiles import compute_dtype, matmul_cycles, matrix_format
from archsim.config.loader import load_system, load_workload
from archsim.dtypes import DType
from archsim.errors import UnsupportedError
from archsim.graph.builder import Step, build_step
from archsim.graph.model import DTypes, Phase
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.graph.params import total_params


@pytest.fixture(scope="module")
def h200():
    return load_system("h200")[0].chip


@pytest.fixture(scope="module")
def b200():
    return load_system("b200")[0].chip


def test_mac_format_and_what_is_converted(h200, b200):
    a = h200.core.array
    assert compute_dtype(DType.BF16, DType.INT4) is DType.BF16  # W4A16: the weights convert
    assert convert_lane_ops(a, DType.BF16, DType.INT4) == (0.0, 2.0)
    assert convert_lane_ops(a, DType.FP8, DType.FP8) == (0.0, 0.0)  # W8A8 runs natively
    assert convert_lane_ops(a, DType.BF16, DType.BF16) == (0.0, 0.0)
    # the H200 lists no MX format: MXFP4 weights times MXFP8 activations are refused, not costed
    # as something else; MXFP4 weights under bf16 activations are a weight-only kernel
    with pytest.raises(UnsupportedError, match="no mxfp8 rate"):
        matrix_format(
            Op(OpKind.GEMM, DType.MXFP8, m=1, k=64, n=64, weight_dtype=DType.MXFP4, scaling=Scaling.FIXED), h200
        )
    assert (
        matrix_format(
            Op(OpKind.GEMM, DType.BF16, m=1, k=64, n=64, weight_dtype=DType.MXFP4, scaling=Scaling.FIXED), h200
        )
        is DType.BF16
    )
    # Blackwell mixes them natively (f8f6f4): nothing converts; bf16 activations still convert MXFP4
    bb = b200.core.array
    assert compute_dtype(DType.MXFP8, DType.MXFP4) is DType.MXFP8
    assert convert_lane_ops(bb, DType.MXFP8, DType.MXFP4) == (0.0, 0.0)
    assert convert_lane_ops(bb, DType.NVFP4, DType.NVFP4) == (0.0, 0.0)
    assert convert_lane_ops(bb, DType.BF16, DType.MXFP4) == (0.0, 1.5)


def test_w4a16_dequant_work_per_weight_in_a_tile_step(h200):
    """A 64 x 128 x 128 tile step on an H200 SM: four 16 x 32 arrays sharing the 64 rows (16 each),
    weight-stationary, pipelined: ceil(128/16) x ceil(128/32) = 32 folds of max(16 rows, R = 16)
    plus R + C - 2 = 46: 32 x 16 + 46 = 558 cycles; the SRAM delivers (64 x 128 + 128 x 128) x 2 B
    at 128 B/cycle in 384, so 558. With int4 weights each of the 128 x 128 weights takes 2 lane
    instructions to convert: 32,768 at 128 per cycle = 256 cycles more: 814."""
    core = h200.core
    assert int(matmul_cycles(core, 64, 128, 128, DType.BF16, DType.BF16)) == 558
    assert int(matmul_cycles(core, 64, 128, 128, DType.BF16, DType.INT4)) == 558 + 256


def test_w4a16_is_not_faster_than_bf16_where_compute_bounds(h200):
    """Batch 1: a quarter of the bytes makes W4A16 faster; batch 256 (compute-bound): at par
    (within 5%: the conversion costs about what the narrower weights save), not the 25% a
    model that only shrinks the bytes would give."""

    def t(m, wd):
        return simulate_op(
            Op(OpKind.GEMM, DType.BF16, m=m, k=4096, n=14336, weight_dtype=wd, scaling=Scaling.FIXED), h200
        ).time_s

    assert t(1, DType.INT4) < 0.7 * t(1, DType.BF16)
    assert t(256, DType.INT4) >= 0.95 * t(256, DType.BF16)


def test_fp8_kv_cache_with_bf16_maths(h200):
    w = load_workload("llama3_8b")[0]
    fp8_kv = replace(w, dtypes=DTypes(DType.BF16, DType.BF16, DType.FP8))
    att = next(op for op in build_step(fp8_kv, Step(Phase.DECODE, 8, 1, 8191)) if op.name == "attention")
    # the maths in bf16, the cache in fp8: K and V of 8 KV heads x 8,192 tokens x 256 at 1 B
    assert (att.dtype, att.kv_format) == (DType.BF16, DType.FP8)
    assert att.min_bytes() == 8 * 8 * 8192 * 256 * 1 + 2 * 8 * 32 * 128 * 2
    bf16 = next(op for op in build_step(w, Step(Phase.DECODE, 8, 1, 8191)) if op.name == "attention")
    # long-KV decode streams the cache: half the bytes, but not faster than half the time
    ratio = simulate_op(att, h200).time_s / simulate_op(bf16, h200).time_s
    assert 0.5 < ratio < 0.9


def test_w8a8_quantises_the_gemm_inputs():
    w = load_workload("deepseek_v3")[0]
    ops = {op.name: op for op in build_step(w, Step(Phase.DECODE, 1, 1, 10))}
    # GEMM inputs in fp8, outputs in the activations' bf16; vector ops stay bf16
    assert (ops["o_proj"].dtype, ops["o_proj"].b_dtype, ops["o_proj"].c_dtype) == (DType.FP8, DType.FP8, DType.BF16)
    assert ops["attn_norm"].dtype is DType.BF16


def test_expert_weights_in_their_own_format():
    from archsim.graph.weights import weight_bytes

    w = load_workload("gpt_oss_120b")[0]
    m = w.model
    ups = [op for op in build_step(w, Step(Phase.DECODE, 1, 1, 10)) if op.name.startswith("experts_gate_up")]
    assert all(op.b_dtype is DType.MXFP4 for op in ups)
    # 36 layers x 128 experts x 3 x 2880 x 2880 routed parameters at 0.53125 B, the rest at 2 B
    routed = 36 * 128 * 3 * 2880 * 2880
    assert weight_bytes(w) == pytest.approx((total_params(m) - routed) * 2 + routed * 0.53125)


def test_a_warpgroup_mma_puts_the_larger_side_on_its_rows(h200):
    """The H200's four 16 x 32 weight-stationary tensor cores share a tile by rows (16 of the
    warpgroup MMA's 64 each); the library runs a product with more columns than rows transposed.
    A 1 x 128 x 256 step as given: each core streams its 1 row through 8 x 8 folds, a fold loading
    its 16 rows: 64 x 16 + 16 + 32 - 2 = 1,070 cycles. Transposed (256 x 128 x 1), each core
    streams 64 of the 256 rows through 8 x 1 folds: 8 x 64 + 46 = 558, over the 514 the SRAM's
    128 B a cycle needs for its 65,792 operand bytes. A 256 x 128 x 8 step keeps its own
    orientation (558 against 1,070 transposed). An attention kernel keeps its query rows on the
    MMA's rows (cuDNN's and FlashAttention's 64-row query tiles): 1,070."""
    core = h200.core
    assert core.array.split_m_only and (core.array.rows, core.array.cols, core.matrix_units) == (16, 32, 4)
    assert int(matmul_cycles(core, 1, 128, 256, DType.BF16, transposable=True)) == 558
    assert int(matmul_cycles(core, 256, 128, 8, DType.BF16, transposable=True)) == 558
    assert int(matmul_cycles(core, 1, 128, 256, DType.BF16)) == 1070
