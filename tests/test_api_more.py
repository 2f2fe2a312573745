"""The command line's other commands in Python: op, compare, scale, find_capacity, explain and
the plots; each the same computation as its command (the same numbers), each printing short."""

import json

import pytest

import archsim
from archsim.cli import main

SMALL = archsim.load_workload("llama3_8b", scenario={"prompt_tokens": 64, "output_tokens": 2})


def _json(capsys, argv) -> dict:
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_functions_stay_functions_once_their_modules_are_loaded():
    import archsim.api.explanation
    import archsim.api.ops
    import archsim.api.scaling  # a submodule import sets a name on its package

    for name in ("op", "explain", "compare", "scale", "find_capacity", "plot_roofline"):
        assert callable(getattr(archsim, name)) and callable(getattr(archsim.api, name)), name


def test_op_is_archsim_op(capsys):
    report = archsim.op("gemm", "h200", M=1, K=8192, N=28672)
    doc = _json(capsys, ["op", "gemm", "--M", "1", "--K", "8192", "--N", "28672"])
    assert report.time_s == doc["time_s"] and report.bound == "memory"
    assert repr(report).startswith("OpReport(gemm on NVIDIA H200 SXM") and len(repr(report)) < 2000
    assert archsim.explain(report).parts[0].best().resource == "HBM bandwidth"
    with pytest.raises(ValueError, match=r"op gemm needs its sizes: M, K, N \(missing K\)"):
        archsim.op("gemm", "h200", M=1, N=8)
    with pytest.raises(ValueError, match="hot: applies to vector ops and copies, not gemm"):
        archsim.op("gemm", "h200", M=1, K=8, N=8, hot=True)


def test_compare_is_archsim_compare_with_rows_named_by_chip_and_layout(capsys):
    report = archsim.compare(["h200", "h200x8"], SMALL, tp=2)
    doc = _json(capsys, ["compare", "h200", "h200x8", "--tp", "2", "--prompt", "64", "--generate", "2"])
    assert [r.label for r in report.rows] == ["h200 as h200x8 TP 2", "h200x8 TP 2"]
    assert [c["tpot_s"] for c in report.to_dict()["chips"]] == [c["tpot_s"] for c in doc["chips"]]
    assert len(repr(report)) < 2000 and "<table>" in report._repr_html_()
    too_big = archsim.compare(["tpu_v5e"], "llama3_70b")
    assert too_big.rows[0].error == "does not fit"


def test_scale_is_archsim_scale(capsys):
    report = archsim.scale("h200x8", "llama3_70b", tp=[1, 2])
    doc = _json(capsys, ["scale", "--tp", "1,2"])
    assert report.to_dict()["points"] == doc["points"]
    assert repr(report).startswith("ScaleReport(Llama-3-70B") and len(repr(report)) < 2000


def test_find_capacity_is_the_serve_search(capsys):
    report = archsim.find_capacity(
        "h200", "llama3_8b", slo_ttft_s="200ms", slo_tpot_s="8ms", requests=40, prompt_tokens=256, output_tokens=16
    )
    argv = ["serve", "--requests", "40", "--prompt", "256", "--generate", "16"]
    doc = _json(capsys, [*argv, "--slo-ttft", "200ms", "--slo-tpot", "8ms", "--find-capacity"])
    assert report.rate_per_s == doc["capacity"]["rate_per_s"] and 0 < report.rate_per_s < 1e5
    assert repr(report).startswith("CapacityReport(") and len(repr(report)) < 2000
    with pytest.raises(archsim.ConfigError, match="slo_ttft_s: needs slo_ttft_s and/or slo_tpot_s"):
        archsim.find_capacity("h200", "llama3_8b")


def test_plots_from_python(tmp_path):
    pytest.importorskip("matplotlib")
    run = archsim.run("h200", SMALL)
    paths = [
        archsim.plot_roofline(run, tmp_path / "roofline.png"),
        archsim.plot_breakdown(run, tmp_path / "breakdown.png"),
        archsim.plot_decode_kv(run, tmp_path / "decode.png"),
        archsim.plot_memory([run], tmp_path / "memory.png"),
        *archsim.plot_compare(archsim.compare(["h200", "a100"], SMALL), tmp_path),
    ]
    assert all(p.stat().st_size > 1000 for p in paths)
