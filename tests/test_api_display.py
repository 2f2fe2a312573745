"""The API's results at a glance (a short repr, HTML for notebooks) and the command line's
syntax in Python: "200ms" durations and paths with or without their `hardware.` root."""

import pytest

import archsim

H200 = archsim.load_system("h200")
SMALL = archsim.load_workload("llama3_8b", scenario={"batch": 2, "prompt_tokens": 64, "output_tokens": 2})


def test_a_run_report_prints_in_one_short_line_and_as_html():
    report = archsim.run(H200, SMALL)
    text = repr(report)
    assert len(text) < 2000 and "\n" not in text
    assert text.startswith("RunReport(Llama-3-8B on NVIDIA H200 SXM: batch 2") and "TTFT" in text and "TPOT" in text
    html = report._repr_html_()
    assert "<table>" in html and "TTFT (prefill)" in html and report.config_hash in html


def test_a_serve_report_prints_short_and_takes_durations_as_text():
    reqs = archsim.generate_requests(2, 10, 64, 8)
    report = archsim.serve(H200, SMALL, reqs, slo_ttft_s="200ms", slo_tpot_s="50 ms")
    assert (report.slo.ttft_s, report.slo.tpot_s) == (pytest.approx(0.2), pytest.approx(0.05))
    assert len(repr(report)) < 2000 and repr(report).startswith("ServeReport(10 requests")
    assert "<table>" in report._repr_html_()
    with pytest.raises(archsim.ConfigError, match="serve: slo_ttft_s: a duration needs its unit"):
        archsim.serve(H200, SMALL, reqs, slo_ttft_s="200")


def test_paths_take_their_root_or_not():
    with_root = archsim.with_params(H200, {"hardware.hbm.data_rate": "8 Gbps"})
    assert with_root == archsim.with_params(H200, {"hbm.data_rate": "8 Gbps"})
    assert with_root.system.chip.hbm.data_rate_bits_per_s == 8e9
    wl = archsim.load_workload("llama3_8b", {"workload.scenario.batch": 3})
    assert wl.workload.scenario.batch == 3
