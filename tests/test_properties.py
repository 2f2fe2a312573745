"""Invariants of the simulator on random ops and random chips (hypothesis).

For every op on every chip: time is never below the compute bound (FLOPs over the peak of the
units the op runs on) nor below the memory bound (compulsory bytes over peak HBM bandwidth, or
HBM and L2 together for an op whose input the kernel before just wrote); HBM bytes moved are
never below the compulsory bytes; utilisation is at most 1; stalls are not negative. More HBM
bandwidth never makes an op slower. ARCHSIM_PROPERTY_EXAMPLES sets the examples per property.

Chips are the H200 with cores, clock, SRAM, DMA depth and HBM data rate varied; shapes are kept
small so the file runs in well under a minute.
"""

import os
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.choose import simulate_op
from archsim.config.loader import load_system
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import Chip, DType

ROOT = Path(__file__).resolve().parents[1]
H200 = load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0].chip
REL = 1e-9  # float slack on bounds computed two ways

PROPERTY = settings(
    max_examples=int(os.environ.get("ARCHSIM_PROPERTY_EXAMPLES", 300)),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def chips(draw) -> Chip:
    """The H200 with its core count, clock, SRAM, DMA depth and HBM pin rate varied."""
    core = H200.core
    core = replace(
        core,
        sram=replace(core.sram, capacity_bytes=draw(st.sampled_from([64, 128, 228, 512])) * 1024),
        max_inflight_bytes=draw(st.sampled_from([4, 16, 32, 128])) * 1024,
    )
    return replace(
        H200,
        cores=draw(st.sampled_from([1, 4, 33, 132, 264])),
        clock_hz=draw(st.sampled_from([0.8e9, 1.755e9, 2.5e9])),
        core=core,
        hbm=replace(H200.hbm, data_rate_bits_per_s=draw(st.sampled_from([1.6e9, 6.25e9, 12.5e9]))),
    )


dims = st.sampled_from([1, 3, 16, 64, 100, 256, 1024])
gemms = st.builds(
    lambda dt, m, k, n, g: Op(OpKind.GEMM, dt, m=m, k=k, n=n, groups=g, scaling=Scaling.FIXED),
    st.sampled_from([DType.BF16, DType.FP8]),
    dims,
    st.sampled_from([16, 128, 1000, 4096]),
    st.sampled_from([16, 128, 1024, 4096]),
    st.sampled_from([1, 2, 8]),
)


@st.composite
def attentions(draw) -> Op:
    kv_heads = draw(st.sampled_from([1, 2, 8]))
    q_len = draw(st.sampled_from([1, 1, 16, 128, 512]))
    return Op(
        OpKind.ATTENTION,
        DType.BF16,
        batch=draw(st.sampled_from([1, 2, 8])),
        heads=kv_heads * draw(st.sampled_from([1, 4])),
        kv_heads=kv_heads,
        head_dim=draw(st.sampled_from([64, 128])),
        q_len=q_len,
        kv_len=q_len + draw(st.sampled_from([0, 100, 1000, 4000])),
        causal=draw(st.booleans()),
        scaling=Scaling.FIXED,
    )


vectors = st.builds(
    lambda m, n, v, strided, hot: Op(
        OpKind.VECTOR, DType.BF16, m=m, n=n, vop=v, strided=strided, hot=hot, scaling=Scaling.FIXED
    ),
    st.sampled_from([1, 8, 64, 2048]),
    st.sampled_from([128, 4096, 14336]),
    st.sampled_from(list(VectorOp)),
    st.booleans(),
    st.booleans(),
)
copies = st.builds(
    lambda b, strided, hot: Op(OpKind.COPY, DType.BF16, bytes=b, strided=strided, hot=hot, scaling=Scaling.FIXED),
    st.sampled_from([1024, 1 << 20, 64 << 20]),
    st.booleans(),
    st.booleans(),
)
embeddings = st.builds(
    lambda m, n: Op(OpKind.EMBEDDING, DType.BF16, m=m, n=n, scaling=Scaling.FIXED),
    st.sampled_from([1, 64, 2048]),
    st.sampled_from([4096, 8192]),
)
ops = st.one_of(gemms, attentions(), vectors, copies, embeddings)


def peak_flops(op: Op, chip: Chip) -> float:
    """Peak FLOP/s of the units the op runs on (matrix units, or the vector unit's wider path)."""
    if op.kind in (OpKind.GEMM, OpKind.ATTENTION):
        return chip.peak_flops(op.dtype)
    v = chip.core.vector
    return max(v.lanes, v.special_per_cycle) * chip.cores * chip.clock_hz


@PROPERTY
@given(ops, chips())
def test_time_bytes_utilisation_and_stalls_obey_their_bounds(op, chip):
    t = simulate_op(op, chip)
    if op.flops():
        assert t.time_s >= op.flops() / peak_flops(op, chip) * (1 - REL), "faster than the compute bound"
    if op.hot:  # its input was just written and may be served from L2
        memory_bw = chip.hbm.peak_bandwidth_bytes_per_s + chip.l2.bandwidth_bytes_per_s
        assert t.time_s >= op.min_bytes() / memory_bw * (1 - REL), "faster than HBM and L2 together"
        assert t.hbm_bytes + t.l2_bytes >= op.min_bytes() * (1 - REL), "fewer bytes than the op moves"
    else:
        assert t.time_s >= op.min_bytes() / chip.hbm.peak_bandwidth_bytes_per_s * (1 - REL), "faster than HBM"
        assert t.hbm_bytes >= op.min_bytes() * (1 - REL), "fewer HBM bytes than the compulsory traffic"
    assert 0.0 <= t.utilisation <= 1.0 + REL
    assert t.stall_cycles >= 0 and t.compute_cycles >= 0 and t.overhead_cycles >= 0
    assert t.cycles >= t.compute_cycles + t.stall_cycles, "critical core busier than the op is long"


@PROPERTY
@given(ops, chips(), st.sampled_from([1.5, 2.0, 4.0]))
def test_more_hbm_bandwidth_never_slows_an_op(op, chip, factor):
    """Every kind of op on the chip and on one with faster HBM pins."""
    fast = replace(chip, hbm=replace(chip.hbm, data_rate_bits_per_s=chip.hbm.data_rate_bits_per_s * factor))
    assert simulate_op(op, fast).time_s <= simulate_op(op, chip).time_s * (1 + REL)
