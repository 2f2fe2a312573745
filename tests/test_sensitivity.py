"""The stated ranges of [EST] and [CAL] parameters in an interval (archsim/runner/sensitivity.py):
read from the chip file's lines, counted or left out per chip, swung one at a time, and combined
with the transfer error root-sum-square."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from archsim import api
from archsim.cli import main
from archsim.commands.intervals import parameter_swings
from archsim.errors import ConfigError
from archsim.runner import sensitivity, transfer

HW = Path(__file__).resolve().parents[1] / "hw_configs"


def chip_file(tmp_path: Path, body: str) -> Path:
    """A chip file extending the H200 by `body` (its own lines, with their comments)."""
    path = tmp_path / "chip.yaml"
    path.write_text("extends: h200\n" + body)
    return path


def test_every_shipped_file_states_its_ranges_well():
    for path in sorted(HW.glob("*.yaml")):
        ranged, _ = sensitivity.stated(api.load_system(str(path))._doc)
        for r in ranged:
            assert r.tag in ("EST", "CAL") and r.line > 0, (path.name, r)


def test_a_gemv_of_hbm_bytes_over_bandwidth_swings_as_its_pin_rate_by_hand(tmp_path):
    # t = bytes / (pins x rate / 8): the rate's range 4.8-8 Gbps around 6.4 Gbps gives
    # t_lo / p = 6.4 / 4.8 (slower: up = 1 - 4.8 / 6.4 = 0.25) and t_hi / p = 6.4 / 8 (faster:
    # down = 8 / 6.4 - 1 = 0.25)
    path = chip_file(tmp_path, "hbm:\n  data_rate: 6.4 Gbps   # a guess [EST: 4.8-8 Gbps]\n")
    hw = api.load_system(str(path))
    gemv_bytes = 8192 * 8192 * 2

    def gemv(h) -> dict[str, float]:
        return {"time_s": gemv_bytes / h.system.chip.hbm.peak_bandwidth_bytes_per_s}

    swings, parts = parameter_swings(hw, gemv, keys=lambda k: k == "hbm.data_rate")
    assert [p["key"] for p in parts["parameters"]] == ["hbm.data_rate"]
    assert parts["parameters"][0]["range"] == ["4.8 Gbps", "8 Gbps"] and parts["parameters"][0]["tag"] == "EST"
    p = gemv(hw)["time_s"]
    (s,) = swings
    up, down = sensitivity.swing(p, s.low_s["time_s"], s.high_s["time_s"])
    assert up == pytest.approx(0.25) and down == pytest.approx(0.25)
    # alone (no transfer error): exactly the times at the ends
    low, high = sensitivity.bounds(p, *sensitivity.combined(0.0, [(up, down)]))
    assert low == pytest.approx(gemv_bytes / (6144 * 8e9 / 8)) and high == pytest.approx(p * 6.4 / 4.8)


def test_a_kernels_fixed_cost_moves_the_simulated_op_by_its_range_by_hand(tmp_path):
    # the fixed cost per kernel adds to an op's time: at 0.5 and 4 us around 1.85 us the GEMV's
    # time p moves by -1.35 and +2.15 us, so up = 1 - p / (p + 2.15 us), down = p / (p - 1.35 us) - 1
    from archsim.choose import Condition, simulate_op
    from archsim.graph.single_op import build_op

    path = chip_file(tmp_path, "overheads:\n  kernel: 1.85 us   # a guess [EST: 0.5-4 us]\n")
    hw, op = api.load_system(str(path)), build_op("gemm", M=1, K=8192, N=8192)

    def time(h) -> dict[str, float]:
        return {"time_s": simulate_op(op, h.system.chip, Condition.GRAPH).time_s}

    swings, _ = parameter_swings(hw, time, keys=lambda k: k == "overheads.kernel")
    p = time(hw)["time_s"]
    up, down = sensitivity.swing(p, swings[0].low_s["time_s"], swings[0].high_s["time_s"])
    assert up == pytest.approx(1 - p / (p + 2.15e-6), rel=1e-9)
    assert down == pytest.approx(p / (p - 1.35e-6) - 1, rel=1e-9)


def test_the_swings_and_the_transfer_error_combine_root_sum_square():
    # q 0.1 with swings (up 0.05, down 0.02) and (up 0, down 0.1):
    # q_low = sqrt(0.01 + 0.0004 + 0.01) = 0.142829, q_high = sqrt(0.01 + 0.0025) = 0.111803
    q_low, q_high = sensitivity.combined(0.1, [(0.05, 0.02), (0.0, 0.1)])
    assert q_low == pytest.approx(0.142829, rel=1e-5) and q_high == pytest.approx(0.111803, rel=1e-5)
    low, high = sensitivity.bounds(1.0, q_low, q_high)
    assert low == pytest.approx(1 / 1.142829, rel=1e-5) and high == pytest.approx(1 / 0.888197, rel=1e-5)
    assert sensitivity.bounds(1.0, 0.1, 1.0)[1] == math.inf, "no upper end once q_high reaches 1"
    # a case 15% slow in prediction (e = +0.15) lies outside q 0.1 with a down swing of 0.1
    # (q_low = 0.1414) and inside with one of 0.12 (q_low = 0.1562)
    band = transfer.Band(0.1, 10)
    assert not transfer.inside(15.0, band, [(0.0, 0.1)]) and transfer.inside(15.0, band, [(0.0, 0.12)])
    assert transfer.inside(-10.0, band) and not transfer.inside(-10.5, band), "both q alone: |e| <= q"


def test_the_interval_record_names_its_parts():
    gemm = transfer.stored_bands(90.0)["gemm"]
    swings = [
        sensitivity.Swing(
            sensitivity.StatedRange("hbm.latency", "f.yaml", 3, "EST", (), "300 ns", "600 ns", "340 ns"),
            {"time_s": 1.1},
            {"time_s": 0.95},
        )
    ]
    parts = {"parameters": [{"key": "hbm.latency"}], "left_out": [], "unranged": ["noc.hops"]}
    record = transfer.interval("gemm", 90.0, {"time_s": 1.0}, swings, parts)
    assert record is not None
    # up = 1 - 1 / 1.1 = 0.0909, down = 1 / 0.95 - 1 = 0.05263
    (param,) = record["parameters"]
    assert param["swing"]["time_s"] == pytest.approx({"up": 1 - 1 / 1.1, "down": 1 / 0.95 - 1})
    q_low, q_high = math.hypot(gemm.q, 1 / 0.95 - 1), math.hypot(gemm.q, 1 - 1 / 1.1)
    assert record["q_low_high"]["time_s"] == pytest.approx([q_low, q_high])
    assert record["time_s"] == pytest.approx([1 / (1 + q_low), 1 / (1 - q_high)])
    assert record["unranged"] == ["noc.hops"]


def test_a_chip_with_no_ranged_parameter_gets_the_transfer_interval(tmp_path):
    out = tmp_path / "op.json"
    assert main(["op", "gemm", "--hw", "scalesim_ws_128x128", "--M", "128", "--K", "4096", "--N", "4096", "--interval", "90",
                 "--json", str(out)]) == 0  # fmt: skip
    data = json.loads(out.read_text())
    q, t = transfer.stored_bands(90.0)["gemm"].q, data["time_s"]
    assert data["interval"]["parameters"] == []
    assert data["interval"]["time_s"] == pytest.approx([t / (1 + q), t / (1 - q)], rel=1e-12)


def test_own_fits_and_shared_constants_are_left_out_and_inherited_fits_count():
    def counted(name: str, given: frozenset[str] = frozenset()) -> tuple[set[str], dict[str, str]]:
        _, parts = parameter_swings(api.load_system(name), lambda h: {}, given)
        return {p["key"] for p in parts["parameters"]}, {d["key"]: d["why"] for d in parts["left_out"]}

    # the H200's [CAL] values were fitted on its own sets: only its [EST] energies count
    keys, dropped = counted("h200")
    assert keys == {"power.energy.lane_op", "power.energy.special_op", "power.energy.l2", "power.energy.hbm"}
    assert dropped["hbm.refresh_time"].startswith("fitted on this chip's own set")
    # the H100 carries the H200's fits: they count, but for the shared software constants, whose
    # error taken from another chip's fit the transfer error measures
    keys, dropped = counted("h100")
    assert {"hbm.refresh_time", "cores.dma.max_requests", "power.energy.mac"} <= keys
    assert dropped["overheads.kernel"].startswith("a shared constant") and "overheads.kernel" not in keys
    # a value the user sets is theirs
    keys, dropped = counted("h100", frozenset({"hbm.refresh_time"}))
    assert "hbm.refresh_time" not in keys and dropped["hbm.refresh_time"] == "set by --set"
    # the DGX A100's bulk protocols' payload efficiencies were fitted on its own all-reduce cases;
    # NCCL's latency constants are published, without a range
    _, parts = parameter_swings(api.load_system("a100x8"), lambda h: {}, keys=lambda k: k.startswith("interconnect."))
    assert parts["parameters"] == [] and len(parts["left_out"]) == 2


def test_every_shared_transfer_constant_is_a_chip_file_key():
    keys = sensitivity.shared_keys(transfer.stored())
    assert "overheads.kernel" in keys and "interconnect.protocols.ll.overhead" in keys
    doc = api.load_system("a100x8")._doc
    for key in keys:
        assert tuple(key.split(".")) in doc.lines, key


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("[EST: 4-2 us]", "overheads.kernel: range 4-2 us: its low end is above its high end"),
        ("[CAL] fitted on h200_calibration, range 0.5 us", "overheads.kernel: a stated range needs both ends"),
        ("[CAL] fitted on h200_calibration", "overheads.kernel: a [CAL] value fitted on a set declares no range"),
    ],
)
def test_a_malformed_range_is_a_config_error_at_its_line(tmp_path, comment, message):
    path = chip_file(tmp_path, f"overheads:\n  kernel: 1.85 us   # {comment}\n")
    with pytest.raises(ConfigError) as err:
        sensitivity.stated(api.load_system(str(path))._doc)
    assert str(err.value) == f"{path}:3: {message}" or str(err.value).startswith(f"{path}:3: {message}")
    # and on the command line: exit 2 with the located message, no traceback
    assert main(["op", "gemm", "--hw", str(path), "--M", "8", "--K", "8", "--N", "8", "--interval", "90"]) == 2


def test_a_range_end_the_files_checks_refuse_is_located_at_the_range(tmp_path):
    path = chip_file(tmp_path, "overheads:\n  kernel: 1.85 us   # [EST: 0.5-4 GB]\n")
    with pytest.raises(ConfigError) as err:
        parameter_swings(api.load_system(str(path)), lambda h: {})
    assert str(err.value).startswith(f"{path}:3: overheads.kernel: range end 0.5 GB: ")


def test_validate_widens_each_cases_interval_by_its_own_swings(tmp_path):
    # the H200's copies predicted on the H100's file: the H200 fits it inherits count, per case
    out = tmp_path / "v.json"
    args = ["validate", "h200_holdout", "--hw", "h100", "--kind", "copy", "--interval", "90", "--quiet"]
    assert main([*args, "--json", str(out)]) in (0, 2)
    data = json.loads(out.read_text())
    (parts,) = data["interval_parameters"].values()
    assert "hbm.refresh_time" in {p["key"] for p in parts["parameters"]}
    q = transfer.stored_bands(90.0)["copy"].q
    widened = 0
    for row in data["cases"]:
        swings = list(row.get("swing_pct", {}).values())
        q_low = math.hypot(q, *(d / 100 for _, d in swings))
        q_high = math.hypot(q, *(u / 100 for u, _ in swings))
        p = row["predicted_ms"]
        assert row["interval_ms"] == pytest.approx([p / (1 + q_low), p / (1 - q_high)])
        widened += bool(swings)
    assert widened, "a copy streams HBM: refresh and turnaround move it"


def test_a_single_estimate_is_unranged_and_a_word_after_a_range_is_no_unit(tmp_path):
    path = chip_file(
        tmp_path,
        "overheads:\n  kernel: 1.85 us   # [EST: 2 us at most]\n"
        "cores:\n  dma:\n    max_requests: 50   # [CAL] fitted on h200_calibration, range 32-1024 requests\n",
    )
    ranged, unranged = sensitivity.stated(api.load_system(str(path))._doc)
    assert "overheads.kernel" in unranged
    (requests,) = [r for r in ranged if r.key == "cores.dma.max_requests"]
    assert (requests.low, requests.high, requests.at(requests.high)) == ("32", "1024", 1024)


def test_a_run_leaves_out_what_set_gives(tmp_path):
    out = tmp_path / "run.json"
    small = ["--batch", "1", "--prompt", "128", "--generate", "4", "--interval", "90", "--quiet"]
    assert main(["run", *small, "--set", "hardware.power.energy.l2=6 pJ/B", "--json", str(out)]) == 0
    record = json.loads(out.read_text())["interval"]
    assert "power.energy.l2" not in {p["key"] for p in record["parameters"]}
    assert {"key": "power.energy.l2", "tag": "EST", "why": "set by --set"} in record["left_out"]


def test_a_range_in_a_unit_with_a_digit_keeps_its_unit(tmp_path):
    """An area range in mm2 (the unit ends in a digit) reads as 60 mm2 to 160 mm2, not as bare
    numbers, which the file's checks would refuse for want of a unit."""
    path = chip_file(tmp_path, "area:\n  core_logic: 83 mm2   # [EST: 60-160 mm2]\n")
    ranged, _ = sensitivity.stated(api.load_system(str(path))._doc)
    (r,) = [r for r in ranged if r.key == "area.core_logic"]
    assert (r.low, r.high, r.tag) == ("60 mm2", "160 mm2", "EST")


# what the SRAM-only chips leave without a range: a shape, a peak's split, a unitless mapping a
# range cannot scale, a voltage curve whose two ends one range would scale together (only their
# ratio moves a time or an energy), the die's area
MODELLING_CHOICES = {
    "cores.matrix_units.k_per_cycle", "cores.matrix_units.rows", "memory.banks", "power.voltage",
    "interconnect.topology", "area.node", "area.link_phy", "area.uncore",
}  # fmt: skip


@pytest.mark.parametrize("chip", ["lpu", "wafer"])
def test_the_sram_only_chips_gemv_intervals_carry_their_stated_ranges(tmp_path, chip):
    out = tmp_path / "op.json"
    gemv = ["op", "gemm", "--hw", chip, "--M", "1", "--K", "8192", "--N", "8192", "--interval", "90"]
    assert main([*gemv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    record, p = data["interval"], data["time_s"]
    assert set(record["unranged"]) <= MODELLING_CHOICES, "every estimate that can move a time states its range"
    swings = {q["key"]: q["swing"]["time_s"] for q in record["parameters"]}
    q_high = record["q_low_high"]["time_s"][1]
    assert q_high > record["q"] and record["time_s"][1] > p / (1 - record["q"]), "wider than the transfer error"
    if chip == "lpu":
        # the MXM installs the 8192 x 8192 x 2 B = 134,217,728 B of weights at 88,889 B a cycle
        # (1,510 cycles, 1.68 us at 900 MHz) or at the range's 20,480 B (6,554 cycles, 7.28 us):
        # p = 2.47 us gains 5.60 us, up = 1 - 2.47 / 8.07 = 0.694; the top end is the file's own
        install = swings["cores.sram.bandwidth"]
        assert install["up"] == pytest.approx(0.694, abs=0.01) and install["down"] == 0.0
        assert max(swings, key=lambda k: swings[k]["up"]) == "cores.sram.bandwidth"
    else:
        # the clock's range 0.9-1.1 GHz tops at the file's clock: at 0.9 GHz a time counted in
        # cycles grows by 1.1 / 0.9, up = 1 - 0.9 / 1.1 = 0.182, less where latencies in ns don't
        clock = swings["clock"]
        assert 0.15 < clock["up"] <= 1 - 0.9 / 1.1 + 1e-12 and clock["down"] == 0.0
        assert max(swings, key=lambda k: swings[k]["up"]) == "clock"
