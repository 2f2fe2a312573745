"""What-ifs respond as hardware does: the direction and size of a response to one changed
parameter of the H200 model, each bound derived in its docstring (not a golden number).
"""

from dataclasses import replace

import pytest

import archsim
from archsim.choose import choose, simulate_op
from archsim.compiler.gemm import best_raster, candidate_tilings
from archsim.config.loader import load_system, load_workload
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware import Chip
from archsim.runner.generation import run_generation


@pytest.fixture(scope="module")
def h200() -> Chip:
    return load_system("h200")[0].chip


def _tensor_cores(chip: Chip, factor: int) -> Chip:
    return replace(chip, core=replace(chip.core, matrix_units=chip.core.matrix_units * factor))


def _hbm_rate(chip: Chip, factor: float) -> Chip:
    return replace(chip, hbm=replace(chip.hbm, data_rate_bits_per_s=chip.hbm.data_rate_bits_per_s * factor))


BIG_GEMM = Op(OpKind.GEMM, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
GEMV = Op(
    OpKind.GEMM, m=1, k=4096, n=128256, scaling=Scaling.FIXED
)  # Llama-3-8B's LM head on one token: 1 GB of weights


def _l2_rate(chip: Chip, factor: float) -> Chip:
    return replace(
        chip,
        l2=replace(chip.l2, bandwidth_bytes_per_s=chip.l2.bandwidth_bytes_per_s * factor),
        noc=replace(chip.noc, bandwidth_bytes_per_s=chip.noc.bandwidth_bytes_per_s * factor),
    )


def test_doubling_matrix_throughput_speeds_a_compute_bound_gemm(h200):
    """8192^3 needs 2 x 8192^3 / (4 x 8192^2 x 2 B) = 1365 FLOP per HBM byte, far above the
    H200's ~230 (989 TFLOP/s over 4.3 TB/s): compute-bound. Twice the tensor cores at a fixed
    clock must speed it by at most 2x, and by at least what operand delivery from L2 leaves: a
    128 x 256 tile with its 256-wide operand multicast to a pair of SMs loads (128 + 256/2) x 2 B
    per unit of K for 2 x 128 x 256 FLOP, 128 FLOP per L2 byte, so 10.0 TB/s of L2 feeds at most
    1.28 PFLOP/s, about 1.25x the measured ~1 PFLOP/s. With L2 bandwidth doubled as well, the gain must
    grow. Under the 700 W limit the extra MACs draw power too: at iso-power the clock falls
    until f V(f)^2 halves, so the gain is smaller but still a gain (more than 1.1x)."""
    fixed = replace(h200, power=None)
    base, doubled = simulate_op(BIG_GEMM, fixed).time_s, simulate_op(BIG_GEMM, _tensor_cores(fixed, 2)).time_s
    assert 1.25 <= base / doubled <= 2.0
    fed = simulate_op(BIG_GEMM, _l2_rate(_tensor_cores(fixed, 2), 2)).time_s
    assert base / fed >= base / doubled + 0.1
    held, held_doubled = simulate_op(BIG_GEMM, h200).time_s, simulate_op(BIG_GEMM, _tensor_cores(h200, 2)).time_s
    assert 1.1 < held / held_doubled < base / doubled


def test_doubling_matrix_throughput_leaves_memory_bound_work_alone(h200):
    """A GEMV at one token reads 1 GB for 0.5 GFLOP: bound by HBM, it must not speed up by more
    than the last percent when the tensor cores double; nor must a 1 GiB copy."""
    doubled = _tensor_cores(h200, 2)
    copy = Op(OpKind.COPY, bytes=1 << 30, scaling=Scaling.FIXED)
    for op in (GEMV, copy):
        assert simulate_op(op, doubled).time_s >= 0.98 * simulate_op(op, h200).time_s


def test_halving_hbm_bandwidth_slows_a_memory_bound_gemv(h200):
    """The GEMV streams 1 GB at ~4.5 TB/s, about 230 us, its fixed costs a few us: halving the
    pin rate must slow it by at least 1.8x (2x on the streaming part)."""
    assert simulate_op(GEMV, _hbm_rate(h200, 0.5)).time_s >= 1.8 * simulate_op(GEMV, h200).time_s


def test_twice_the_flops_half_the_bandwidth_prefills_faster_and_decodes_slower(h200):
    """Llama-3-8B at batch 1: a 2048-token prefill is compute-bound (GEMMs of M = 2048 and
    causal attention) and decoding is bound by streaming 16 GB of weights per token. A chip with
    twice the tensor cores and half the HBM rate, under the same power limit, must prefill faster
    and decode slower than the H200."""
    system = load_system("h200")[0]
    w = load_workload("llama3_8b")[0]
    w = replace(w, scenario=replace(w.scenario, batch=1, prompt_tokens=2048, output_tokens=4))
    what_if = replace(system, chip=_hbm_rate(_tensor_cores(system.chip, 2), 0.5))
    base, other = run_generation(w, system), run_generation(w, what_if)
    assert other.ttft_s < base.ttft_s
    assert other.tpot_s > base.tpot_s


def test_a_large_gemm_reads_at_most_twice_its_compulsory_bytes_under_the_best_raster(h200):
    """Llama-3-8B's prefill gate_up, 2048 x 4096 x 28672: 16 MiB of activations, 224 MiB of
    weights and 112 MiB of output, far above the L2's 30 MiB per partition. Launched row by row,
    each wave of 132 tiles spans all 4096 / ... row blocks' worth of weights and re-reads them;
    the raster the kernel picks (column-major or grouped) keeps a wave's panels few enough to be
    reused, so every tiling on the shortlist reads at most twice the compulsory bytes."""
    op = Op(OpKind.GEMM, m=2048, k=4096, n=28672, scaling=Scaling.FIXED)
    for t in candidate_tilings(op, h200):
        _tiling, hbm = best_raster(op, h200, t)
        assert hbm <= 2 * op.min_bytes()


def test_a_lower_power_limit_lowers_a_dense_gemm_clock_not_a_copy(h200):
    """At 700 W the dense 8192^3 GEMM already runs below the 1.98 GHz maximum (its MACs draw
    the power); at 400 W it must run slower still. A 1 GiB copy draws HBM power only: it keeps the
    highest clock under both limits."""
    low = replace(h200, power=replace(h200.power, limit_w=400.0))
    gemm_700, gemm_400 = choose(BIG_GEMM, h200).clock_hz, choose(BIG_GEMM, low).clock_hz
    assert gemm_400 < gemm_700 < h200.clock_hz
    copy = Op(OpKind.COPY, bytes=1 << 30, scaling=Scaling.FIXED)
    assert choose(copy, h200).clock_hz == choose(copy, low).clock_hz == h200.clock_hz


def test_a_clock_what_if_moves_along_the_silicons_voltage_curve(h200):
    """The 700 W limit holds the dense 8192^3 GEMM near 1.41 GHz. `clock` picks a point on the
    silicon's voltage curve (0.7 V at 345 MHz to 1.0 V at power.max_clock, 1.98 GHz), so the same
    chip set to 1.65 GHz (1.98 / 1.2) draws at every clock below 1.65 what it drew: the GEMM holds
    the same clock and time (within the search's 0.1% of the top), a change far under the clock
    ratio 1.2. Set to 1.2 GHz, below the held clock, it runs at 1.2 GHz: 1.41 / 1.2 = 1.17x slower
    (a little less: its fixed costs do not slow), under the ratio 1.98 / 1.2 = 1.65. At every setting the power record is the file's: the same
    energy per action, voltages and curve."""
    base = simulate_op(BIG_GEMM, h200)
    for ghz, slower in ((1.65, 1.0), (1.2, 1.41 / 1.2)):
        chip = archsim.load_system("h200", {"clock": f"{ghz} GHz"}).system.chip
        assert chip.power == h200.power
        t = simulate_op(BIG_GEMM, chip)
        assert t.time_s / base.time_s == pytest.approx(slower, rel=1e-2)
        assert t.time_s / base.time_s < h200.clock_hz / chip.clock_hz


def test_a_design_at_the_top_voltage_at_a_lower_clock_draws_more_there(h200):
    """A design that reaches 1.5 GHz at the top voltage (power.max_clock 1.5 GHz, the energies
    the same at 1.0 V) runs 1.41 GHz at 0.7 + 0.3 x 1.065 / 1.155 = 0.977 V, where the H200 runs
    it at 0.7 + 0.3 x 1.065 / 1.635 = 0.895 V: its MACs draw (0.977 / 0.895)^2 = 1.19x the power,
    so the same limit holds it lower: slower by more than 2%."""
    base = simulate_op(BIG_GEMM, h200).time_s
    top = replace(h200, clock_hz=1.5e9, power=replace(h200.power, max_clock_hz=1.5e9))
    assert simulate_op(BIG_GEMM, top).time_s > 1.02 * base


def test_a_power_limit_what_if_moves_a_dense_gemm_clock_as_the_curve_says(h200):
    """The dense GEMM is compute-bound: it plays N ~ 2.09e6 cycles at any clock, so it runs
    T = N / f and draws P(f) = P_static + f / N x ((P_idle N / f_top + E_core) v(f)^2 + E_hbm),
    with E_core its MACs' and L2 bytes' energy at 1.0 V (8192^3 x 1.79 pJ = 0.984 J, and 8.76 GB
    x 5 pJ = 0.044 J), E_hbm its 1.32 GB at 3.9 pJ/bit (0.041 J) and v(f) the curve's
    (0.7 + 0.3 (f - 0.345 GHz) / 1.635 GHz) / 1.0. The clock each limit holds is where P(f) meets
    it, found here from that formula alone: at 700 W 1.41 GHz, at 400 W 0.90 GHz (the power at
    0.90 GHz: 73.7 + 0.90e9 / 2.09e6 x ((84 x 2.09e6 / 1.98e9 + 1.028) x 0.805^2 + 0.041)
    = 73.7 + 430 x 0.744 = 394 W, the rest of the 400 W in the cycles' rounding). The chip's
    clock plays no part: set to 1.5 GHz, the limits hold the GEMM at the same clocks."""
    p = h200.power
    mac_j, l2_j, hbm_j = BIG_GEMM.m * BIG_GEMM.k * BIG_GEMM.n * 1.79e-12, 8.76e9 * 5e-12, 1.32e9 * 8 * 3.9e-12
    n = 2.09e6

    def curve_w(f: float) -> float:
        v = (0.7 + 0.3 * (f - 0.345e9) / 1.635e9) / 1.0
        return 73.7 + f / n * ((84 * n / 1.98e9 + mac_j + l2_j) * v * v + hbm_j)

    def held_ghz(limit_w: float) -> float:
        lo, hi = 0.345e9, 1.98e9
        while hi - lo > 1e5:
            lo, hi = ((lo + hi) / 2, hi) if curve_w((lo + hi) / 2) <= limit_w else (lo, (lo + hi) / 2)
        return lo / 1e9

    capped = archsim.load_system("h200", {"clock": "1.5 GHz"}).system.chip
    for limit_w in (700.0, 400.0):
        for chip in (h200, capped):
            held = choose(BIG_GEMM, replace(chip, power=replace(p, limit_w=limit_w))).clock_hz / 1e9
            assert held == pytest.approx(held_ghz(limit_w), rel=1e-2)
