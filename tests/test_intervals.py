"""`--interval` on op, run and compare: the stored transfer error of the op's kind around each
predicted time (archsim/runner/transfer.py, the one implementation validate uses too), widened
by the swings of the stated ranges that count on the chip (archsim/runner/sensitivity.py)."""

from __future__ import annotations

import json
import math

import pytest

from archsim.cli import main
from archsim.runner import transfer


def band(kind: str, level: float = 90.0) -> transfer.Band:
    return transfer.stored_bands(level)[kind]


def swung(record: dict, name: str, t: float) -> list[float]:
    """The interval a record's parts give a time t: q and each parameter's swing, root-sum-square."""
    ups = [p["swing"][name]["up"] for p in record["parameters"]]
    downs = [p["swing"][name]["down"] for p in record["parameters"]]
    q_low, q_high = math.hypot(record["q"], *downs), math.hypot(record["q"], *ups)
    assert record["q_low_high"][name] == pytest.approx([q_low, q_high])
    return [t / (1 + q_low), t / (1 - q_high)]


def test_an_interval_record_by_hand():
    # q 0.2: a time predicted as 10 us was measured between 10 / 1.2 = 8.333 and 10 / 0.8 = 12.5 us
    b = transfer.Band(0.2, 5)
    low, high = b.interval(10e-6)
    assert low == pytest.approx(8.3333e-6, rel=1e-4) and high == pytest.approx(12.5e-6)
    record = transfer.interval("gemm", 90.0, {"time_s": 1.0})
    assert record is not None and record["kind"] == "gemm" and record["n"] == band("gemm").n
    q = band("gemm").q
    assert record["time_s"] == pytest.approx([1 / (1 + q), 1 / (1 - q)])
    assert transfer.interval("allgather", 90.0, {"time_s": 1.0}) is None, "no stored transfer errors of the kind"


def test_op_carries_the_interval_of_its_kind(tmp_path):
    out = tmp_path / "op.json"
    assert main(["op", "gemm", "--M", "128", "--K", "4096", "--N", "4096", "--interval", "90", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    record, t = data["interval"], data["time_s"]
    assert record["kind"] == "gemm" and record["q"] == band("gemm").q
    # the H200's [EST] energies count (its [CAL] values were fitted on its own sets)
    assert {p["key"] for p in record["parameters"]} == {
        f"power.energy.{k}" for k in ("lane_op", "special_op", "l2", "hbm")
    }
    assert record["time_s"] == pytest.approx(swung(record, "time_s", t))
    # decode attention (one new token) takes the decode cases' band
    args = ["op", "attention", "--kv-len", "4096", "--interval", "80", "--json", str(out)]
    assert main(args) == 0
    assert json.loads(out.read_text())["interval"]["kind"] == "attention_decode"
    # without the flag, no interval key: the output is as before
    assert main(["op", "gemm", "--M", "128", "--K", "4096", "--N", "4096", "--json", str(out)]) == 0
    assert "interval" not in json.loads(out.read_text())
    assert main(["op", "gemm", "--M", "8", "--K", "8", "--N", "8", "--interval", "0"]) == 2
    # a fraction for a percent (0.9 meaning 90%) is refused, not run as a 0.9% interval
    assert main(["op", "gemm", "--M", "8", "--K", "8", "--N", "8", "--interval", "0.9"]) == 2


def test_a_lone_collective_op_adds_the_last_ranks_wait_and_its_interval(tmp_path):
    out = tmp_path / "ar.json"
    base = ["op", "allreduce", "--hw", "h200x8", "--bytes", "1048576", "--ranks", "8", "--json", str(out)]
    assert main(base) == 0
    plain = json.loads(out.read_text())
    assert main([*base, "--standalone", "--interval", "90"]) == 0
    lone = json.loads(out.read_text())
    # 8 ranks wait 9.65 us x (761/280 - 1) = 16.577 us for the last
    assert lone["arrival_wait_s"] == pytest.approx(16.577e-6, rel=1e-4)
    assert lone["time_s"] == pytest.approx(plain["time_s"] + lone["arrival_wait_s"])
    assert lone["interval"]["kind"] == "allreduce"


def test_run_and_compare_carry_the_model_step_interval(tmp_path):
    out = tmp_path / "run.json"
    small = ["--batch", "1", "--prompt", "128", "--generate", "4"]
    assert main(["run", "--quiet", *small, "--interval", "90", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["interval"]["q"] == band("model_step").q
    for name in ("ttft_s", "tpot_s", "total_time_s"):
        assert data["interval"][name] == pytest.approx(swung(data["interval"], name, data[name]))
    cmp = tmp_path / "cmp.json"
    assert main(["compare", "h200", "a100", *small, "--interval", "90", "--quiet", "--json", str(cmp)]) == 0
    for chip in json.loads(cmp.read_text())["chips"]:
        assert chip["interval"]["tpot_s"] == pytest.approx(swung(chip["interval"], "tpot_s", chip["tpot_s"]))
        assert chip["interval"]["parameters"], "both chips state ranges that count on them"


def test_pooled_coverage_by_hand():
    from archsim.commands.validate import pooled

    # 4 cases at 50% and 6 at 100%: 2 + 6 = 8 of 10 inside, 80%
    assert pooled({"a": {"n": 4, "coverage_pct": 50.0}, "b": {"n": 6, "coverage_pct": 100.0}}) == {
        "n": 10,
        "coverage_pct": 80.0,
    }
    assert pooled({}) is None


def test_the_90_percent_intervals_cover_85_percent_of_each_chips_held_out_transfer_cases():
    # the stored transfer predictions of the held-out cases (never in q): 92.7% on the A100 PCIe
    # (all-reduce, GEMM, vector: 385 cases) and 90.7% on the H200 (its 97 development cases)
    from archsim.commands.validate import pooled

    result = transfer.stored()
    assert result is not None
    by_chip = transfer.transfer_coverage(result, transfer.bands(result, 90))
    assert set(by_chip) == {"a100_pcie", "h200"}
    for chip, by_kind in by_chip.items():
        total = pooled(by_kind)
        assert total is not None and total["coverage_pct"] >= 85.0, (chip, total)


def test_validate_all_reports_the_coverage_per_chip(tmp_path):
    out = tmp_path / "all.json"
    assert main(["validate", "all", "--kind", "copy", "--interval", "90", "--quiet", "--json", str(out)]) == 0
    by_chip = json.loads(out.read_text())["coverage_by_chip"]
    # the H200's 4 held-out copies, own fit and transfer
    assert by_chip["h200"]["n"] == 4 and 0 <= by_chip["h200"]["coverage_pct"] <= 100
    assert by_chip["h200"]["transfer_coverage_pct"] is not None
