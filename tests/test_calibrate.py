"""tools/calibrate.py on a case file of the user's own (`--cases`): a bad file is one line naming
what is wrong and exit 2; a good one is fitted and its error reported."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "calibrate.py"), "--chip", "h200", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_bad_case_file_is_named_with_what_is_wrong(tmp_path):
    missing = _calibrate("--cases", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and missing.stderr.strip() == f"{tmp_path / 'none.json'}: no such case file"
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"cases": [{"id": "x", "kind": "gemm", "M": 0, "K": 4, "N": 4, "dtype": "bf16", "measured_ms": 1}]})
    )
    got = _calibrate("--cases", str(bad), "--rounds", "1")
    assert got.returncode == 2 and got.stderr.strip() == "x: M must be from 1 to 1,048,576 (got 0)"
    assert "Traceback" not in got.stderr


def test_a_case_file_of_ones_own_is_fitted(tmp_path):
    shipped = json.loads((ROOT / "archsim" / "data" / "h200_calibration.json").read_text())
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps({"meta": shipped["meta"], "cases": [c for c in shipped["cases"] if c["kind"] == "gemm"][:3]})
    )
    got = _calibrate("--cases", str(mine), "--rounds", "1", "--params", "chip.overheads.kernel_s")
    assert got.returncode == 0, got.stderr
    assert "chip.overheads.kernel_s = " in got.stdout and "calibration: gemm " in got.stdout
