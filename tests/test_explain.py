"""`archsim explain` and `RunReport.explain()`: an op's or a run's time by named cause, what binds
it, and its elasticity to each resource from what-if simulations; on cases checked by hand."""

import json

import pytest

import archsim
from archsim.api.explanation import Lever, explain_op
from archsim.cli import main
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware import DType

H200 = archsim.load_system("h200")


def _gemm(m: int, k: int, n: int) -> Op:
    return Op(OpKind.GEMM, DType.BF16, m=m, k=k, n=n, scaling=Scaling.FIXED)


def _levers(explanation) -> dict[str, Lever]:
    return {lv.resource: lv for lv in explanation.parts[0].levers}


def test_elasticity_is_the_log_ratio_of_the_times():
    # doubling a rate that halves the time: e = ln(2)/ln(2) = 1; one that saves a quarter:
    # e = ln(4/3)/ln(2) = 0.415; halving a cost that saves nothing: e = 0
    assert Lever("r", "", 2.0, 4.0, 2.0).elasticity == pytest.approx(1.0)
    assert Lever("r", "", 2.0, 4.0, 3.0).elasticity == pytest.approx(0.41504, rel=1e-4)
    assert Lever("c", "", 0.5, 4.0, 4.0).elasticity == 0.0 and Lever("c", "", 0.5, 4.0, 2.0).speedup == 2.0


def test_a_batch_1_decode_gemv_is_hbm_bound_with_bandwidth_elasticity_near_1():
    """1 x 8192 x 28672 in bf16 reads 8192 x 28672 x 2 B = 470 MB of weights and does
    2 x 8192 x 28672 = 0.47 GFLOP: 98 us at 4.8 TB/s, 0.44 us at 1.07 PFLOP/s. HBM binds it;
    doubling the bandwidth nearly halves it, doubling the matrix peak does nothing."""
    e = explain_op(_gemm(1, 8192, 28672), H200)
    part = e.parts[0]
    assert part.bound == "memory" and part.binding_unit == "hbm"
    assert part.by_cause.total_s == pytest.approx(part.time_s, rel=1e-9)  # the terms add up
    assert part.terms()[0][0] == "HBM bandwidth"
    levers = _levers(e)
    assert levers["HBM bandwidth"].elasticity == pytest.approx(1.0, abs=0.1)
    assert abs(levers["the matrix peak"].elasticity) < 0.05
    assert part.best().resource == "HBM bandwidth"
    text = str(e)
    assert "memory-bound" in text and "doubling HBM bandwidth would make it" in text and "elasticity 0.9" in text


def test_a_large_gemm_is_the_reverse_matrix_bound_and_deaf_to_bandwidth():
    """8192^3 in bf16: 2 x 8192^3 = 1.10 TFLOP, 1.03 ms at 1.07 PFLOP/s; its three 134 MB
    operands take 84 us at 4.8 TB/s. Doubling HBM bandwidth does nothing; doubling the matrix
    peak helps, less than 2x as the 700 W limit then holds the clock lower."""
    e = explain_op(_gemm(8192, 8192, 8192), H200)
    part = e.parts[0]
    assert part.bound == "compute" and part.binding_unit == "matrix"
    levers = _levers(e)
    assert abs(levers["HBM bandwidth"].elasticity) < 0.05
    assert levers["the matrix peak"].elasticity > 0.25
    assert levers["the power limit"].elasticity > 0.25  # the power-held clock is a named term
    assert any(word == "the power-held clock" for word, _ in part.terms())


def test_run_report_explains_prefill_and_decode(tmp_path):
    report = archsim.run(H200, archsim.load_workload("llama3_8b", scenario={"prompt_tokens": 256, "output_tokens": 4}))
    e = report.explain()
    prefill, decode = e.parts
    assert prefill.time_s == report.ttft_s and "TTFT" in prefill.name and "TPOT" in decode.name
    assert decode.bound == "memory" and decode.best().resource == "HBM bandwidth"
    # the what-if with nothing changed would give the step's own time: each lever starts from it
    assert all(lv.before_s == decode.time_s for lv in decode.levers)
    assert repr(e).startswith("Explanation(") and "<pre>" in e._repr_html_()


def test_explain_command_for_an_op_and_a_run(capsys, tmp_path):
    assert main(["explain", "op", "gemm", "--M", "1", "--K", "4096", "--N", "4096"]) == 0
    out = capsys.readouterr().out
    assert "memory-bound" in out and "What moves it most: HBM bandwidth" in out
    path = tmp_path / "e.json"
    assert main(["explain", "--prompt", "128", "--generate", "2", "--quiet", "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert len(doc["parts"]) == 2 and doc["parts"][1]["bound"] == "memory"
    assert {lv["resource"] for lv in doc["parts"][1]["levers"]} >= {"HBM bandwidth", "the matrix peak", "the clock"}
    assert main(["explain", "op", "allreduce", "--bytes", "1024"]) == 2
