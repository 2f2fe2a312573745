"""`archsim compare` and `archsim list`: chips side by side, readable in 80 columns."""

import json

import pytest
from rich.console import Console

from archsim.cli import main
from archsim.commands.list import _num, chips_table, workloads_table
from archsim.config.loader import load_system
from archsim.hardware import DType


def test_compare_two_chips(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["compare", "h200", "a100", "--prompt", "64", "--generate", "4", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "h200" in text and "a100" in text and "TTFT" in text
    data = json.loads(out.read_text())
    h200, a100 = data["chips"]
    assert h200["chip"] == "NVIDIA H200 SXM" and a100["chip"].startswith("NVIDIA A100")
    for chip in (h200, a100):
        assert chip["ttft_s"] > 0 and chip["tpot_s"] > 0 and chip["bound"] in ("memory", "compute", "overhead")
        run_s = chip["ttft_s"] + 3 * chip["tpot_s"]  # 4 tokens: prefill and 3 decode steps
        assert sum(chip["time_by_bound_s"].values()) == pytest.approx(run_s, rel=1e-9)
    assert h200["tpot_s"] < a100["tpot_s"]  # more HBM bandwidth, memory-bound decode
    assert data["workload"]["scenario"] == {"batch": 1, "prompt_tokens": 64, "output_tokens": 4}


def test_compare_multi_chip_systems_under_one_layout(tmp_path, capsys):
    """--tp spreads the model over each system's chips; a lone chip runs on the shipped system of
    that chip (h200: h200x8); a chip without one is reported, the others still run."""
    out = tmp_path / "c.json"
    args = [
        "compare",
        "h200",
        "dataflow_2stack",
        "--workload",
        "llama3_70b",
        "--tp",
        "4",
        "--batch",
        "2",
        "--prompt",
        "64",
        "--generate",
        "2",
        "--json",
        str(out),
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "note: h200: 4 chips for the layout: h200x8" in captured.out + captured.err
    assert "TP 4 needs 4 chips" in captured.err
    eight, one = json.loads(out.read_text())["chips"]
    assert eight["hw"] == "h200x8"
    assert eight["tpot_s"] > 0 and "communication" in eight["time_by_bound_s"]
    assert one["error"] == "layout does not apply"


def test_compare_keeps_going_when_one_chip_does_not_fit(tmp_path, capsys):
    out, plots = tmp_path / "c.json", tmp_path / "plots"
    args = [
        "compare",
        "tpu_v5e",
        "h100",
        "--workload",
        "llama3_70b",
        "--prompt",
        "64",
        "--generate",
        "2",
        "--json",
        str(out),
    ]
    assert main(args) == 2  # neither fits: 70B in bf16 (141 GB) is more than one 16 GB or 80 GB chip holds
    assert "does not fit" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    assert (
        main(
            [
                "compare",
                "tpu_v5e",
                "h200",
                "--prompt",
                "64",
                "--generate",
                "2",
                "--json",
                str(out),
                "--plots",
                str(plots),
            ]
        )
        == 0
    )
    tpu, h200 = json.loads(out.read_text())["chips"]
    assert tpu["error"] == "does not fit" and h200["ttft_s"] > 0
    for name in ("compare_summary.png", "compare_bounds.png", "compare_decode_kv.png", "compare_memory.png"):
        assert (plots / name).stat().st_size > 5000


def test_compare_bad_chip_exits_2(capsys):
    assert main(["compare", "h200", "h201"]) == 2
    assert "did you mean 'h200'" in capsys.readouterr().err


def test_list_fits_80_columns():
    console = Console(width=80, record=True)
    console.print(chips_table())
    console.print(workloads_table())
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    chip = load_system("h200")[0].chip
    row = next(line for line in text.splitlines() if line.startswith("│ h200 "))
    for value in (
        chip.peak_flops(DType.BF16) / 1e12,
        chip.hbm.peak_bandwidth_bytes_per_s / 1e12,
        chip.hbm.capacity_bytes / 1e9,
    ):
        assert f" {_num(value)} " in row


def test_compare_stops_at_a_run_ended_by_ctrl_c(monkeypatch, capsys):
    """A chip's run cut short by Ctrl-C (its result marked interrupted) ends the comparison with
    exit code 130: the chips after it are not run and no table is printed."""
    from dataclasses import replace

    from archsim import api

    calls = []
    real_run = api.run

    def interrupted_run(hardware, workload, **kwargs):
        calls.append(hardware.name)
        report = real_run(hardware, workload, **kwargs)
        return replace(report, result=replace(report.result, interrupted=True))

    monkeypatch.setattr(api, "run", interrupted_run)
    assert main(["compare", "h200", "a100", "--prompt", "64", "--generate", "4"]) == 130
    assert calls == ["NVIDIA H200 SXM"]
    assert "TTFT" not in capsys.readouterr().out


def test_rows_are_named_by_chip_and_layout(capsys, monkeypatch):
    """h200 under TP 2 runs as h200x8, the shipped system of that chip with enough chips: the two
    rows give the same numbers, and their names say so instead of reading `h200x8` twice."""
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["compare", "h200", "h200x8", "--tp", "2", "--prompt", "64", "--generate", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line.strip("│ ").split(" │")[0].strip() for line in out.splitlines() if " ms " in line]
    assert rows[:2] == ["h200 as h200x8 TP 2", "h200x8 TP 2"]
    # one configuration, so one run: a note says why the two rows read alike
    assert "note: h200 as h200x8 TP 2 = h200x8 TP 2: one configuration, the same run" in out
