"""Measured board power against the chip files (archsim/runner/power_calibration.py and
archsim/data/power_calibration.json)."""

from __future__ import annotations

import json

import pytest

from archsim.config.loader import load_system
from archsim.runner.power_calibration import KINDS, TOLERANCE, PowerPoint, kind_errors, load_points, predict


@pytest.fixture(scope="module")
def predicted() -> list[PowerPoint]:
    return [predict(p, load_system(p["chip"])[0].chip) for p in load_points()]


def test_every_point_says_its_conditions_and_source():
    points = load_points()
    assert len({p["id"] for p in points}) == len(points)
    for p in points:
        assert p["conditions"] and p["source"] and p["measured_w"] > 0


def test_each_kernel_kind_of_each_chip_within_ten_percent(predicted):
    errors = kind_errors(predicted)
    over = {key: f"{100 * e:.1f}%" for key, e in errors.items() if e > TOLERANCE}
    assert not over, over


def test_the_a100_sxm4_idles_on_its_measured_floor(predicted):
    # static 57.9 W + idle 25 W x (210 / 1410 MHz) x v^2, v = V(f_min) / V_max = 0.7 / 1.0:
    # 57.9 + 25 x 0.14894 x 0.49 = 57.9 + 1.824 = 59.72 W against the 59.69 W measured
    a100 = next(p for p in predicted if p.id == "a100_idle_210mhz")
    assert a100.predicted_w == pytest.approx(59.72, abs=0.01)


def test_a_dense_gemm_draws_its_chips_limit(predicted):
    # a bf16 GEMM 8192^3 is power-limited on both chips: the held clock brings it to the limit
    for p in predicted:
        if p.kind == "gemm":
            limit = load_system(p.chip)[0].chip.power.limit_w
            assert p.predicted_w == pytest.approx(limit, rel=0.01)
            assert p.predicted_tflops == pytest.approx(p.measured_tflops, rel=0.06)


def test_an_idle_point_of_unknown_clock_matches_anywhere_in_its_band():
    band = {"id": "x", "chip": "c", "kind": "idle", "predicted_w": 150.0, "predicted_low_w": 80.0}
    assert PowerPoint(**band, measured_w=115.0).error == 0.0
    assert PowerPoint(**band, measured_w=160.0).error == pytest.approx((150 - 160) / 160)  # -6.25%
    assert PowerPoint(**band, measured_w=64.0).error == pytest.approx((80 - 64) / 64)  # +25%


def test_a_point_of_an_unknown_kind_or_without_its_kernel_is_refused(tmp_path):
    for bad, words in (({"kind": "decode"}, "kind 'decode'"), ({"kind": "gemm"}, "needs its kernel")):
        path = tmp_path / "p.json"
        path.write_text(json.dumps({"points": [{"id": "p1", "chip": "h200", "measured_w": 1, **bad}]}))
        with pytest.raises(ValueError, match=words):
            load_points(path)
    assert "idle" in KINDS
