"""Serving keeps few GEMM plans (archsim/serving/simulate.py SERVE_PLAN_BYTES, through
compiler/gemm_phases.plans_kept_within): each op of a step shape is chosen once, so its plans are
never asked for again and would only hold memory. The plans are the same, so are the results."""

import numpy as np

from archsim import memo
from archsim.choose.pick import choose
from archsim.compiler import gemm_phases
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.serving import simulate
from archsim.serving.arrivals import generate_requests, parse_length
from archsim.serving.scheduler import Policy, SchedulerConfig
from archsim.serving.setup import ServeSetup
from tests.test_serving import POOL_BLOCKS, TINY


def gemm(m: int) -> Op:
    return Op(OpKind.GEMM, m=m, k=512, n=1024, scaling=Scaling.FIXED)


def test_plans_are_kept_within_a_budget_inside_the_block_only(h200):
    memo.clear_all()
    with gemm_phases.plans_kept_within(0):
        for m in (64, 96):
            choose(gemm(m), h200.chip)
        # every plan is over a budget of 0 bytes; the most recent one is always kept
        assert len(gemm_phases._plans) == 1
    assert gemm_phases._plan_budget[0] == gemm_phases.PLAN_BUDGET_BYTES
    choose(gemm(128), h200.chip)  # under 128 MiB again: the new plans join the one kept
    assert len(gemm_phases._plans) > 1


def test_a_serving_run_is_the_same_whatever_plans_it_keeps(h200, monkeypatch):
    reqs = generate_requests(20000.0, 60, parse_length("uniform:16:256"), parse_length("uniform:1:64"), seed=4)
    setup = ServeSetup(TINY, h200, SchedulerConfig(Policy.VLLM, 2048, 64), kv_blocks=POOL_BLOCKS)
    runs = []
    for budget in (0, 1 << 40):
        monkeypatch.setattr(simulate, "SERVE_PLAN_BYTES", budget)
        memo.clear_all()  # every shape simulated again, its GEMMs planned again
        runs.append(simulate.serve(reqs, setup))
        if budget == 0:
            assert len(gemm_phases._plans) <= 1
    a, b = runs
    assert a.metrics() == b.metrics()
    for name in ("first_token_s", "finish_s"):
        np.testing.assert_array_equal(getattr(a.times, name), getattr(b.times, name))
