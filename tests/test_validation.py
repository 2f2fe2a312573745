"""How `archsim validate` models the timer of a case file: a profiler that reports each kernel's
whole microseconds (`meta.resolution`), and the per-kernel durations it reads."""

import json
import math

import pytest

from archsim.choose import Condition, kernel_durations_s, simulate_op
from archsim.config.loader import load_system
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import DType
from archsim.runner.validation import CaseError, CaseFile, case_ops, predict_ms, truncate


@pytest.fixture(scope="module")
def a100():
    return load_system("a100_pcie")[0]


def test_truncate_keeps_whole_multiples_of_the_resolution():
    # a 2.7 us kernel reads 2 us on a 1 us timer (integer division of its nanoseconds by 1000);
    # 3 us less a rounding error reads 3; a 0.4 us one reads 0; an exact timer changes nothing
    assert truncate(2.7e-6, 1e-6) == pytest.approx(2e-6)
    assert truncate(3e-6 * (1 - 1e-12), 1e-6) == pytest.approx(3e-6)
    assert truncate(0.4e-6, 1e-6) == 0.0
    assert truncate(2.7e-6, 0.0) == 2.7e-6


def test_meta_resolution_is_a_time_with_its_unit():
    assert CaseFile.from_meta({"resolution": "1 us"}).resolution_s == pytest.approx(1e-6)
    assert CaseFile.from_meta({}).resolution_s == 0.0
    for bad, why in (("1", "a unit is required"), ("1 MB", "is bytes"), ("0 us", "greater than zero")):
        with pytest.raises(CaseError, match=f"meta.resolution.*{why}"):
            CaseFile.from_meta({"resolution": bad})


def test_kernel_durations_add_up_to_the_kernel_timed_op(a100):
    chip = a100.chip
    # Llama-3-8B's down projection for 64 tokens: the A100 runs it split-K, then reduces
    gemm = Op(OpKind.GEMM, DType.FP16, m=64, k=14336, n=4096, out_dtype=DType.BF16, scaling=Scaling.FIXED)
    rms = Op(
        OpKind.VECTOR, DType.FP16, m=4096, n=4096, vop=VectorOp.RMSNORM, per_row=True, hot=True, scaling=Scaling.FIXED
    )
    for op in (gemm, rms):
        timing = simulate_op(op, chip, Condition.KERNEL, first=False)
        durations = kernel_durations_s(op, chip)
        assert len(durations) == timing.kernels
        # the op's total is rounded to a whole cycle, the durations are not
        assert abs(sum(durations) - timing.time_s) <= 1 / chip.clock_hz
    split = kernel_durations_s(gemm, chip)
    assert len(split) == 2, "the split-K GEMM and its reduction"
    # each kernel carries its own overhead; the matrix prologue is the first kernel's alone
    o = chip.overheads
    assert split[0] > o.kernel_s + o.matrix_setup_s and o.kernel_s < split[1] < split[0]


def test_a_kernel_timed_case_is_predicted_as_its_timer_reads_it(a100):
    case = {"id": "c", "kind": "gemm", "M": 64, "K": 14336, "N": 4096, "dtype": "fp16", "measured_ms": 0.088}
    exact = CaseFile(Condition.KERNEL)
    timer = CaseFile(Condition.KERNEL, resolution_s=1e-6)
    (op,) = case_ops(case, timer)
    durations_us = [d * 1e6 for d in kernel_durations_s(op, a100.chip)]
    assert len(durations_us) == 2
    # each kernel's whole microseconds, summed: at most a microsecond less than it per kernel
    us = predict_ms(case, a100, timer) * 1e3
    assert us == pytest.approx(sum(math.floor(d) for d in durations_us))
    assert 0 < predict_ms(case, a100, exact) * 1e3 - us < len(durations_us)


def test_validate_keeps_the_simulated_time_beside_the_timers_reading(a100, tmp_path):
    from archsim.cli import main

    case = {"id": "c", "kind": "gemm", "M": 64, "K": 14336, "N": 4096, "dtype": "fp16", "measured_ms": 0.088}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"meta": {"timing": "kernel", "resolution": "1 us"}, "cases": [case]}))
    out = tmp_path / "o.json"
    assert main(["validate", str(path), "--hw", "a100_pcie", "--quiet", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["cases"]
    exact = predict_ms(case, a100, CaseFile(Condition.KERNEL))
    # the reading drops each kernel's fraction of a microsecond; the simulated time is the model's
    assert row["simulated_ms"] == pytest.approx(exact)
    assert row["predicted_ms"] * 1e3 == pytest.approx(round(row["predicted_ms"] * 1e3))
    assert row["predicted_ms"] < row["simulated_ms"]


def test_the_floor_is_the_least_error_of_predictions_that_never_fall_as_a_case_grows():
    from archsim.runner.floor import chain_floor, floor_by_kind

    # measured 2, 1, 2 at sizes 1, 2, 3: predictions p1 <= p2 <= p3. (1, 1, 2) errs |1 - 2| / 2 =
    # 0.5 on the first alone; (2, 2, 2) errs 1 on the second; anything between errs more than 0.5
    # (the first case's error falls at half the rate the second's grows): the floor is 0.5
    assert chain_floor([1, 2, 3], [2.0, 1.0, 2.0]) == pytest.approx(0.5)
    # two cases of one size get one prediction v: |v - 1| / 1 + |v - 2| / 2 is least at v = 1
    assert chain_floor([4, 4], [1.0, 2.0]) == pytest.approx(0.5)
    assert chain_floor([1, 2, 3], [1.0, 2.0, 3.0]) == 0.0, "measurements that grow with size cost nothing"

    def gemm(i, m, n, ms):
        return {"id": f"g{i}", "kind": "gemm", "dtype": "bf16", "M": m, "K": 64, "N": n, "measured_ms": ms}

    step = {"id": "s", "kind": "model_step", "dtype": "bf16", "measured_ms": 1.0}
    cases = [gemm(0, 1, 8, 2.0), gemm(1, 2, 8, 1.0), gemm(2, 1, 16, 1.0), step]
    # the N = 8 pair is one chain (0.5, as above), the N = 16 case a chain of its own (0): a mean
    # of 0.5 / 3 over the GEMMs; a model step has no size axis
    assert floor_by_kind(cases) == pytest.approx({"gemm": 100 * 0.5 / 3, "model_step": 0.0})


def test_an_error_within_one_step_of_the_timer_is_not_beyond_its_resolution():
    from archsim.runner.validation import CaseResult

    # on a 1 us timer a kernel of 1.99 us reads 1 and one of 2.0 us reads 2: a reading of 1 us
    # predicted as 2 us is +100% but within one step; 3 us against 1 is 1 us beyond it, +100%
    assert CaseResult("a", "vector", 0.001, 0.002, 0.002).beyond_resolution_pct(0.001) == 0.0
    assert CaseResult("b", "vector", 0.001, 0.003, 0.003).beyond_resolution_pct(0.001) == pytest.approx(100.0)
    # 10 us predicted as 8.5 us is 1.5 us off, 0.5 us beyond the step: 5% of the reading
    assert CaseResult("c", "gemm", 0.010, 0.0085, 0.0085).beyond_resolution_pct(0.001) == pytest.approx(5.0)
    # an exact timer: the whole error
    assert CaseResult("d", "gemm", 0.010, 0.0085, 0.0085).beyond_resolution_pct(0.0) == pytest.approx(15.0)
