"""tools/calibrate.py keeps fits physical: only a value its chip file tags [CAL] is fitted, each such
line declares its physical range, and a fit (or, with --check, a file) whose value leaves it is
refused, naming the mechanism the data suggest is missing."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from archsim.config.loader import load_system
from archsim.units import Dim

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("calibrate", ROOT / "tools" / "calibrate.py")
calibrate = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
sys.modules["calibrate"] = calibrate  # its dataclasses look their module up
_spec.loader.exec_module(calibrate)

# The values the NVIDIA files hold outside their declared ranges: none (the H200's latencies, once
# fitted at about three and four times what an unloaded access takes, are its measured ones). A
# new one fails here.
OUTSIDE: dict[str, set[str]] = {"h200": set(), "h100": set(), "a100_pcie": set(), "a100": set()}


def test_a_range_is_read_in_the_unit_it_is_written_in():
    # "range 0.5-4 us": 0.5e-6 to 4e-6 s; "range 4.8-33.4 TB/s": 4.8e12 to 33.4e12 B/s; a count bare
    assert calibrate.declared_range("x [CAL] fitted on s, range 0.5-4 us", Dim.SECONDS) == (0.5e-6, 4e-6)
    assert calibrate.declared_range("[CAL] range 4.8-33.4 TB/s: why", Dim.BYTES_PER_S) == (4.8e12, 33.4e12)
    assert calibrate.declared_range("[CAL] fitted on s, range 32-1024: why", None) == (32.0, 1024.0)
    assert calibrate.declared_range("[CAL] fitted on s", Dim.SECONDS) is None


def test_every_fitted_parameter_has_a_line_and_a_missing_mechanism_each_way():
    for p in calibrate.CHIP_PARAMS:
        fitted = calibrate.MISSING[p.path]
        assert fitted.below and fitted.above, p.path
    lines = calibrate.chip_lines("h200")
    assert lines["cores.max_requests"].startswith(" memory requests")
    assert "[MB]" in lines["hbm.latency"] and "[CAL]" not in lines["hbm.latency"]  # measured, not fitted
    assert "range 80-300 ns" in calibrate.chip_lines("a100_pcie")["l2.latency"]


@pytest.mark.parametrize("chip", sorted(OUTSIDE))
def test_every_cal_value_of_the_nvidia_files_declares_a_range_and_the_known_ones_leave_it(chip):
    system = load_system(chip)[0]
    ranges = calibrate.fitted_ranges(chip, calibrate.CHIP_PARAMS)
    assert "chip.overheads.kernel_s" in ranges
    assert "chip.hbm.latency_s" not in ranges, "the DRAM latency is measured"
    assert ("chip.l2.latency_s" in ranges) == chip.startswith("a100"), "the Hopper files' L2 latency is measured"
    outside = {line.split(" = ")[0] for line in calibrate.unphysical(system, system, ranges)}
    assert outside == OUTSIDE[chip]


def test_a_value_outside_its_range_names_the_missing_mechanism():
    base = load_system("a100_pcie")[0]
    ranges = calibrate.fitted_ranges("a100_pcie", calibrate.CHIP_PARAMS)
    requests = next(p for p in calibrate.CHIP_PARAMS if p.path == "chip.core.max_requests")
    # 20 requests per SM, under the 32 declared: 20 x 32 lanes x 2 B = 1.25 KiB in flight for a
    # scalar kernel; the fit starves the cores, standing in for a feed limit the model lacks
    (line,) = calibrate.unphysical(requests.put(base, 20), base, ranges)
    assert line.startswith("chip.core.max_requests = 20 is under its physical range 32-1024: missing the rate a core")
    mac = next(p for p in calibrate.CHIP_PARAMS if p.path == "mac_scale")
    # a MAC energy 2.5x the file's 2.32 pJ, past the 2.1-2.8 pJ its line declares (a factor of
    # 2.1 / 2.32 = 0.9052 to 2.8 / 2.32 = 1.207): the power limit would hold the clock low
    (line,) = calibrate.unphysical(mac.put(base, 2.5), base, ranges)
    assert (
        line == "mac_scale = 2.5 is over its physical range 0.9052-1.207: missing a clock held lower than it explains"
    )
    assert calibrate.unphysical(base, base, ranges) == []


def test_a_value_given_from_a_source_is_never_fitted(tmp_path):
    # hbm.data_rate-style lines carry [DS]; a parameter whose line has no [CAL] is left out of a fit
    # its measured DRAM latency [MB], its [EST] launch and the attention prologue it takes from the
    # H200 (its set times no attention)
    assert calibrate.measured("a100_pcie", calibrate.CHIP_PARAMS) == [
        "chip.hbm.latency_s",
        "chip.overheads.launch_s",
        "chip.overheads.attention_setup_cycles",
    ]
    # a per-warp load limit and a flush's dirty share (its cases are never timed after a flush) the
    # A100 files leave off are not fitted either, and naming one says so
    assert calibrate.unstated("a100_pcie", calibrate.CHIP_PARAMS) == ["chip.core.loads_per_warp", "chip.l2.flush_dirty"]
    named = _calibrate("--chip", "a100_pcie", "--params", "chip.core.loads_per_warp")
    assert named.returncode == 2 and "chip.core.loads_per_warp: not stated in hw_configs/a100_pcie.yaml" in named.stderr
    with pytest.raises(SystemExit) as refused:
        calibrate.refuse_unphysical(
            load_system("h200")[0], load_system("h200")[0], {"chip.l2.latency_s": (80e-9, 1.5e-7)}
        )
    assert refused.value.code == 3


def _calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "calibrate.py"), *args], capture_output=True, text=True, timeout=600
    )


def test_check_refuses_a_file_whose_value_leaves_its_range_and_a_sourced_value_is_never_fitted():
    got = _calibrate("--chip", "h200", "--check")
    assert got.returncode == 0 and "h200: every fitted value within its declared range" in got.stdout
    measured = _calibrate("--chip", "h200", "--params", "chip.hbm.latency_s")
    assert measured.returncode == 2
    assert measured.stderr.strip() == "chip.hbm.latency_s: given from a source in its chip file, never fitted"
    assert _calibrate("--chip", "a100_pcie", "--check").returncode == 0
    named = _calibrate("--chip", "a100_pcie", "--params", "chip.overheads.launch_s")
    assert named.returncode == 2
    assert named.stderr.strip() == "chip.overheads.launch_s: given from a source in its chip file, never fitted"


def test_a_systems_protocol_efficiencies_are_checked_against_their_ranges():
    # a100x8.yaml's LL128 and Simple payload efficiencies are [CAL], "range 0.3-0.95", nested three
    # deep (interconnect.protocols.<name>.efficiency): each read by its whole path
    lines = calibrate.chip_lines("a100x8")
    assert "range 0.3-0.95" in lines["interconnect.protocols.simple.efficiency"]
    ranges = calibrate.fitted_ranges("a100x8", calibrate.NCCL_EFFICIENCIES)
    assert ranges == {"protocol.ll128.efficiency": (0.3, 0.95), "protocol.simple.efficiency": (0.3, 0.95)}
    base = load_system("a100x8")[0]
    assert calibrate.unphysical(base, base, ranges) == []
    simple = next(p for p in calibrate.NCCL_EFFICIENCIES if p.path == "protocol.simple.efficiency")
    # Simple at 25% of the line rate: a fit slowing every large all-reduce for a cost it lacks
    (line,) = calibrate.unphysical(simple.put(base, 0.25), base, ranges)
    assert line.startswith("protocol.simple.efficiency = 0.25 is under its physical range 0.3-0.95: missing a per-")
    got = _calibrate("--chip", "a100x8", "--check")
    assert got.returncode == 0 and "a100x8: every fitted value within its declared range (2)" in got.stdout
