"""Invariants of the simulator on random ops and random chips (hypothesis).

For every op on every chip: time is never below the compute bound (FLOPs over the peak of the
units the op runs on) nor below the memory bound (compulsory bytes over peak HBM bandwidth, or
HBM and L2 together for an op whose input the kernel before just wrote); HBM bytes moved are
never below the compulsory bytes; utilisation is at most 1; stalls are not negative. More HBM
bandwidth never makes an op slower. Under a power limit, no kernel draws more than the limit
where a lower clock could hold it under, and a higher limit never makes an op slower. ARCHSIM_PROPERTY_EXAMPLES sets the examples per property.

Chips are the H200 with cores, clock, SRAM, DMA depth and HBM data rate varied (and its power
limit, floor, voltage range and energies per action, for the power properties); shapes are kept
small so the file runs in well under a minute.
"""

import os
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from archsim.choose import choose, simulate_op, time_op
from archsim.config.loader import load_system
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import Chip, DType
from archsim.hardware.power import floor_power_w

ROOT = Path(__file__).resolve().parents[1]
H200 = load_system(str(ROOT / "hw_configs" / "h200.yaml"))[0].chip
REL = 1e-9  # float slack on bounds computed two ways
CLOCK_ROUNDING = 1e-3  # the engine rounds each memory latency up to whole cycles at the clock it plays:
# a memory-bound kernel at a higher clock can round to a few ns more (17 cycles of 29,800, 0.06%,
# for an embedding at 1.05 GHz against 0.63 GHz)

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


def powered_chip(
    energy: float, static_w: float, idle_w: float, v_min: float, margin_w: float, cores: int, clock_hz: float
) -> Chip:
    """The H200 with `cores` cores at `clock_hz` (on its voltage curve), its energies per action
    times `energy`, its floor and lowest voltage as given, and a limit `margin_w` above the floor
    at the lowest clock (below it no clock holds even an idle chip under; the loader refuses it)."""
    p, e = H200.power, H200.power.energies
    energies = replace(
        e,
        mac_j=tuple((f, j * energy) for f, j in e.mac_j),
        lane_op_j=e.lane_op_j * energy,
        l2_j_per_byte=e.l2_j_per_byte * energy,
        hbm_j_per_bit=e.hbm_j_per_bit * energy,
    )
    power = replace(p, static_w=static_w, idle_w=idle_w, voltage_min_v=v_min, energies=energies)
    power = replace(power, limit_w=floor_power_w(power, power.min_clock_hz) + margin_w)
    return replace(H200, cores=cores, clock_hz=clock_hz, power=power)


powered_chips = st.builds(
    powered_chip,
    st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from([20.0, 73.7, 150.0]),
    st.sampled_from([0.0, 84.0, 200.0]),
    st.sampled_from([0.6, 0.7, 1.0]),
    st.sampled_from([5.0, 50.0, 150.0, 400.0, 1000.0]),
    st.sampled_from([4, 33, 132]),
    st.sampled_from([1.2e9, 1.755e9, 1.98e9]),
)


@PROPERTY
@given(ops, powered_chips)
@example(  # a small GEMM held from 1.755 GHz, which the estimate alone left 0.5% over the limit
    Op(OpKind.GEMM, DType.BF16, m=16, k=4096, n=1024, groups=2, scaling=Scaling.FIXED),
    powered_chip(2.0, 20.0, 84.0, 1.0, 400.0, 132, 1.755e9),
)
def test_no_kernel_draws_more_than_its_chips_limit(op, chip):
    """The clock a kernel's power holds keeps its power at or under the limit, unless the kernel
    draws more even at the lowest clock (memory traffic whose power no clock lowers): then it runs
    there. The limit is above the floor at the lowest clock, so an idle chip is under it."""
    t = time_op(op, chip)
    if t.timing.clock_hz > chip.power.min_clock_hz:
        assert t.kernel_power_w <= chip.power.limit_w * (1 + REL), (
            f"over the limit at {t.timing.clock_hz / 1e9:.3f} GHz"
        )


@PROPERTY
@given(ops, powered_chips, st.sampled_from([1.1, 1.5, 3.0]))
def test_a_higher_power_limit_never_slows_a_kernel(op, chip, factor):
    """A higher limit lets every clock the lower one let (power at a clock does not depend on the
    limit), so the clock held is no lower and the op no slower: but for the engine's rounding to
    whole cycles at each clock (CLOCK_ROUNDING) and the two rounds of the op's cycles to the chip's."""
    higher = replace(chip, power=replace(chip.power, limit_w=chip.power.limit_w * factor))
    low, high = choose(op, chip), choose(op, higher)
    assert high.clock_hz >= low.clock_hz
    fast, slow = simulate_op(op, higher), simulate_op(op, chip)
    assert fast.time_s <= slow.time_s * (1 + CLOCK_ROUNDING) + 2 / chip.clock_hz
