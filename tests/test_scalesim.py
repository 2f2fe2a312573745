"""SCALE-Sim parity: on the scalesim_* configs, a GEMM's cycles equal SCALE-Sim's compute cycles."""

import json

import pytest

from archsim.cli import main
from archsim.hardware import Dataflow
from archsim.hardware.systolic import scalesim_cycles


@pytest.mark.parametrize(
    "hw,m,k,n,expected",
    [
        ("scalesim_ws_32x32", 256, 256, 256, 22399),
        ("scalesim_os_32x32", 256, 256, 256, 20351),
        ("scalesim_is_32x32", 256, 256, 256, 22399),
        ("scalesim_ws_128x128", 128, 4096, 4096, 522239),
    ],
)
def test_pinned_cycles(tmp_path, hw, m, k, n, expected):
    out = tmp_path / "op.json"
    assert main(["op", "gemm", "--hw", hw, "--M", str(m), "--K", str(k), "--N", str(n), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["cycles"] == data["compute_cycles"] == expected
    assert data["stall_cycles"] == 0


@pytest.mark.parametrize("df", ["ws", "os", "is"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (33, 65, 17), (100, 37, 300), (64, 512, 96)])
def test_odd_shapes_match_the_formula(tmp_path, df, m, k, n):
    out = tmp_path / "op.json"
    assert (
        main(
            [
                "op",
                "gemm",
                "--hw",
                f"scalesim_{df}_32x32",
                "--M",
                str(m),
                "--K",
                str(k),
                "--N",
                str(n),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["cycles"] == scalesim_cycles(m, k, n, 32, 32, Dataflow(df))
