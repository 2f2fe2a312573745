"""The power model and the clock a power limit holds, on a made-up power budget computed by hand."""

from dataclasses import replace

import pytest

from archsim.dtypes import DType
from archsim.hardware.power import (
    Activity,
    Energies,
    Power,
    energy_j,
    floor_power_w,
    held_clock_hz,
    power_w,
    relative_voltage,
)

F_MAX = 2.0e9
P = Power(
    limit_w=500.0,
    static_w=100.0,
    idle_w=50.0,
    min_clock_hz=0.5e9,
    max_clock_hz=F_MAX,
    voltage_min_v=0.6,
    voltage_max_v=1.0,
    energies=Energies(
        mac_j=(("bf16", 1e-12), ("fp8", 0.5e-12)),
        lane_op_j=2e-12,
        special_op_j=4e-12,
        l2_j_per_byte=5e-12,
        hbm_j_per_bit=4e-12,
    ),
)


def test_voltage_is_linear_in_clock_between_its_ends():
    """0.6 V at 0.5 GHz, 1.0 V at 2 GHz: 1.25 GHz is halfway, 0.8 V, 0.8 of the maximum."""
    assert relative_voltage(P, 1.25e9) == pytest.approx(0.8)
    assert relative_voltage(P, 0.1e9) == pytest.approx(0.6)  # clamped below the range


def test_energy_is_actions_times_their_energies_plus_the_floor():
    """1e12 bf16 MACs (1 J), 1e11 lane ops (0.2 J), 1e10 specials (0.04 J), 1e10 L2 bytes (0.05 J):
    1.29 J of core energy at V_max; 1e10 HBM bytes = 8e10 bits at 4 pJ = 0.32 J; over 10 ms at
    f_max the static and idle floor is (100 + 50) W x 0.01 s = 1.5 J: 3.11 J. At 1.25 GHz
    (v = 0.8): 0.64 x 1.29 + 0.32 + (100 + 50 x 0.625 x 0.64) x 0.01 = 2.3656 J."""
    a = Activity(macs=1e12, lane_ops=1e11, special_ops=1e10, l2_bytes=1e10, hbm_bytes=1e10)
    assert energy_j(P, a, 0.01, F_MAX) == pytest.approx(3.11)
    assert energy_j(P, a, 0.01, 1.25e9) == pytest.approx(0.64 * 1.29 + 0.32 + (100 + 50 * 0.625 * 0.64) * 0.01)
    fp8 = Activity(macs=1e12, mac_dtype=DType.FP8)
    assert energy_j(P, fp8, 0.0, F_MAX) == pytest.approx(0.5)


def test_the_limit_holds_the_highest_clock_under_it():
    """A compute-bound kernel of 2e12 MACs that takes 4e6 cycles, 4e6 / f seconds (2 ms at 2 GHz): at f_max
    it draws 150 W + 2 J / 2 ms = 1150 W, over the 500 W limit. Its power at f is
    150 + v(f)^2 x 2 J / (4e6 / f) (the idle term scaled likewise); the clock found is where that meets 500 W, and the
    power there is within the bisection's tolerance of the limit."""
    a = Activity(macs=2e12)

    def time_at(f: float) -> float:
        return 4e6 / f

    assert power_w(P, a, time_at(F_MAX), F_MAX) == pytest.approx(1150.0)
    f = held_clock_hz(P, a, time_at, F_MAX)
    assert P.min_clock_hz < f < F_MAX
    assert power_w(P, a, time_at(f), f) <= P.limit_w
    assert power_w(P, a, time_at(f + 0.002 * F_MAX), f + 0.002 * F_MAX) > P.limit_w


def test_a_kernel_under_the_limit_keeps_the_highest_clock():
    """A memory-bound kernel: 1e10 HBM bytes in 3 ms draws 150 + 0.32 / 0.003 = 257 W."""
    a = Activity(hbm_bytes=1e10)
    assert held_clock_hz(P, a, lambda f: 3e-3, F_MAX) == F_MAX


def test_a_power_limited_gemm_plays_at_the_limit_not_over_it():
    """The A100 PCIe's 300 W holds its 8192^3 GEMM well below 1.41 GHz. There the kernel moves
    from waiting on its operands to computing, so the estimate from one play (compute scaling
    as 1/f, the rest fixed) errs high: two corrections leave it at 1.06 GHz drawing 309 W.
    The play the clock settles on draws at most the limit, and one at a clock 0.5% of the top
    higher draws more: the held clock is the highest under it."""
    from archsim.choose import choose, played_activity, time_op
    from archsim.config.loader import load_system
    from archsim.engine.simulate import play_program
    from archsim.graph.ops import Op, OpKind, Scaling

    chip = load_system("a100_pcie")[0].chip
    op = Op(OpKind.GEMM, dtype=DType.FP16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
    c, p = choose(op, chip), chip.power
    assert c.clock_hz < 0.8 * chip.clock_hz
    assert time_op(op, chip).kernel_power_w <= p.limit_w
    higher = c.clock_hz + 0.005 * chip.clock_hz
    played = play_program(c.program, replace(chip, clock_hz=higher))
    power = power_w(p, played_activity(c.program, played), played.cycles / higher, higher)
    assert power > p.limit_w


def test_a_candidate_that_plays_as_an_earlier_one_is_played_once(h200, monkeypatch):
    """Two tilings can compile to the same program (a 128 x 256 and a 256 x 128 tile of a bf16
    GEMM move the same bytes a step): of a 4096 x 1024 x 2048 GEMM's four candidates on the
    H200, the second plays as the first and the fourth as the third. The choice plays each twin
    neither at the chip's clock nor on the way to the held clock, and chooses what playing every
    candidate chooses: the same program, clock and cycles."""
    import archsim.choose as ch
    from archsim.choose import clock, pick
    from archsim.compiler.compile import compile_candidates
    from archsim.graph.ops import Op, OpKind, Scaling

    op = Op(OpKind.GEMM, m=4096, k=1024, n=2048, scaling=Scaling.FIXED)
    candidates = compile_candidates(op, h200.chip)
    assert [ch.same_play(candidates[0], c) for c in candidates] == [True, True, False, False]
    assert ch.same_play(candidates[2], candidates[3])
    plays: list[float] = []  # the clock of each play
    play = pick.play_program
    counted = lambda p, chip, trace=False: plays.append(chip.clock_hz) or play(p, chip)  # noqa: E731
    monkeypatch.setattr(pick, "play_program", counted)
    monkeypatch.setattr(clock, "play_program", counted)
    pick._choose.cache_clear()
    once = ch.choose(op, h200.chip)
    twice = len(plays)
    monkeypatch.setattr(pick, "same_play", lambda a, b: False)
    pick._choose.cache_clear()
    every = ch.choose(op, h200.chip)
    pick._choose.cache_clear()
    assert plays[:twice].count(h200.chip.clock_hz) == 2 and plays[twice:].count(h200.chip.clock_hz) == 4
    assert twice < len(plays) - twice  # fewer plays on the way to the held clock too
    assert once.program.phases[0].label == every.program.phases[0].label
    assert (once.clock_hz, once.played.cycles) == (every.clock_hz, every.played.cycles)


def test_the_voltage_curve_is_the_silicons_not_the_clock_setting():
    """A curve from (0.5 GHz, 0.6 V) to its top (2.5 GHz, 1.0 V) on a chip set to 2 GHz: at 2 GHz
    v = (0.6 + 0.4 x 1.5 / 2.0) / 1.0 = 0.9, so 1e12 bf16 MACs take 0.81 x 1 J = 0.81 J, and the
    floor is 100 W + 50 W x (2 / 2.5) x 0.81 = 132.4 W. The chip's clock setting enters neither:
    the curve's top does (on the 2 GHz-topped P, 2 GHz is its top: v = 1, 1 J, a 150 W floor)."""
    top = replace(P, max_clock_hz=2.5e9)
    assert relative_voltage(top, 2e9) == pytest.approx(0.9)
    assert energy_j(top, Activity(macs=1e12), 0.0, 2e9) == pytest.approx(0.81)
    assert floor_power_w(top, 2e9) == pytest.approx(132.4)
    assert floor_power_w(P, 2e9) == pytest.approx(150.0)


def test_a_lower_clock_setting_holds_a_kernel_where_the_top_one_did():
    """The compute-bound kernel of the test above draws 100 + 50 x 0.625 x 0.64 + 0.64 x 2 J /
    3.2 ms = 520 W at 1.25 GHz (v = 0.8), so the 500 W limit holds it a little lower, near
    1.22 GHz, when the search starts at the curve's top (2 GHz); started at a 1.6 GHz setting,
    the power at every clock is the same, so the same clock is found (each within the
    bisection's 0.1% of its top). Set to 1.2 GHz, under that clock, it keeps the setting."""
    a = Activity(macs=2e12)

    def time_at(f: float) -> float:
        return 4e6 / f

    held = held_clock_hz(P, a, time_at, F_MAX)
    assert held_clock_hz(P, a, time_at, 1.6e9) == pytest.approx(held, abs=2e-3 * F_MAX)
    assert 1.2e9 < held < 1.25e9
    assert held_clock_hz(P, a, time_at, 1.2e9) == 1.2e9


@pytest.mark.parametrize(
    "clock,message",
    [
        ("2.4 GHz", "clock: 2.4 GHz is above the top of the voltage curve (power.max_clock 1.98 GHz)"),
        ("300 MHz", "clock: 0.3 GHz is not above the lowest clock (power.min_clock 0.345 GHz)"),
    ],
)
def test_a_clock_off_the_voltage_curve_is_refused_where_it_is_given(tmp_path, clock, message):
    """The H200's curve runs from 345 MHz to 1.98 GHz (power.min_clock, power.max_clock): a clock
    above it or not above its bottom is refused at the file's `clock` line, with the numbers."""
    from pathlib import Path

    from archsim.config.loader import load_system
    from archsim.errors import ConfigError

    text = (Path(__file__).resolve().parents[1] / "hw_configs" / "h200.yaml").read_text()
    path = tmp_path / "h200.yaml"
    path.write_text(text.replace("clock: 1.98 GHz ", f"clock: {clock} ", 1))
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if s.startswith("clock:"))
    with pytest.raises(ConfigError) as err:
        load_system(str(path))
    assert f"{path}:{line}: {message}" in str(err.value)


def test_the_curves_top_defaults_to_the_clock_and_stays_out_of_the_hash_there():
    """A power section without max_clock tops its curve at `clock`; one equal to `clock` (every
    shipped chip's) leaves the resolved config as it was without it, so the config hash holds.
    Set to 1.5 GHz, the H200 keeps its 1.98 GHz top, and the resolved config says so."""
    import archsim

    h200 = archsim.load_system("h200")
    assert h200.system.chip.power.max_clock_hz == h200.system.chip.clock_hz == 1.98e9
    assert "max_clock" not in h200.config["power"]
    slow = archsim.load_system("h200", {"clock": "1.5 GHz"})
    assert slow.system.chip.power.max_clock_hz == 1.98e9
    assert slow.config["power"]["max_clock"] == 1.98e9
    own = archsim.load_system("h200", {"clock": "1.5 GHz", "power.max_clock": None})
    assert own.system.chip.power.max_clock_hz == 1.5e9


def test_a_limit_no_clock_can_keep_is_refused_with_the_numbers():
    """At its lowest clock, 345 MHz, v = 0.7 V / 1.0 V: the H200 idles at 73.7 W static + 84 W x
    (345 / 1980) x 0.49 = 7.172 W; streaming its 4.8 TB/s it adds HBM 4.8e12 x 8 x 3.9 pJ = 149.76 W
    and L2 4.8e12 x 5 pJ x 0.49 = 11.76 W, memory traffic no clock lowers: 242.4 W in all. A limit
    under it is refused at power.limit with those numbers; one over it runs, held under it."""
    import archsim
    from archsim.hardware.power import streaming_floor_w

    h200 = archsim.load_system("h200")
    p, bandwidth = h200.system.chip.power, h200.system.chip.hbm.peak_bandwidth_bytes_per_s
    assert streaming_floor_w(p, bandwidth) == pytest.approx(73.7 + 7.172 + 149.76 + 11.76, abs=1e-3)
    with pytest.raises(archsim.ConfigError) as err:
        archsim.with_params(h200, {"power.limit": "242 W"})
    assert str(err.value) == (
        "with_params: power.limit: 242 W is below what the chip draws at its lowest clock (345 MHz) idle"
        " (80.9 W) and streaming its main memory at 4.8 TB/s (162 W): 242 W, which no clock lowers"
    )
    archsim.with_params(h200, {"power.limit": "243 W"})  # above it: a chip that can keep its limit
