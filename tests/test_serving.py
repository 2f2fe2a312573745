"""Serving simulation: the checks of the serving issue. At low load a request sees exactly the
steps of `archsim run`; every token is accounted for; Little's law holds on the engine's own
state; KV blocks never exceed the pool; a seed gives one result. Scheduler behaviour runs on a
two-layer model so that it is fast; comparisons with `archsim run` use Llama-3-8B."""

from dataclasses import replace

import numpy as np
import pytest

from archsim.config.loader import load_system, load_workload
from archsim.errors import DoesNotFitError
from archsim.graph.builder import Step, build_step
from archsim.graph.mixed import MixedBatch, PrefillChunk, build_mixed_step, token_ops
from archsim.graph.model import DTypes, ModelSpec, Phase, Scenario, Workload
from archsim.graph.parallel import Parallelism, shard_model
from archsim.runner.generation import ops_time_s, run_generation
from archsim.runner.steps import StepModel, mixed_step_time_s, step_model
from archsim.serving.arrivals import generate_requests, parse_length
from archsim.serving.capacity import find_capacity
from archsim.serving.disaggregated import kv_transfer_s
from archsim.serving.engine import simulate_instance
from archsim.serving.host import PROFILES
from archsim.serving.instance import Instance
from archsim.serving.metrics import Slo
from archsim.serving.requests import make_requests
from archsim.serving.scheduler import Policy, SchedulerConfig
from archsim.serving.setup import Disaggregation, LinkMissingError, ServeSetup, ServeSetupError
from archsim.serving.simulate import serve

TINY = Workload(
    ModelSpec("tiny", layers=2, hidden=512, heads=8, kv_heads=2, head_dim=64, ffn=1024, vocab=1000),
    DTypes(),
    Scenario(1, 128, 16),
)
POOL_BLOCKS = 120  # 1,920 tokens: the busy workload below must preempt


def busy(seed=3, n=300):
    """Far more requests than the pool holds at once (the tiny model's steps take ~0.1 ms)."""
    return generate_requests(20000.0, n, parse_length("uniform:16:256"), parse_length("uniform:1:64"), seed=seed)


def setup(h200, policy, **kw):
    budget = 512 if policy is Policy.SARATHI else 2048
    return ServeSetup(TINY, h200, SchedulerConfig(policy, budget, 64), kv_blocks=POOL_BLOCKS, **kw)


@pytest.fixture(scope="module", params=list(Policy), ids=lambda p: p.value)
def busy_run(request, h200):
    return request.param, busy(), serve(busy(), setup(h200, request.param))


def test_every_request_and_token_is_accounted_for(busy_run):
    policy, reqs, res = busy_run
    t, run = res.times, res.instances[0].result
    assert res.rejected == 0 and len(t.arrival_s) == len(reqs)
    assert (run.generated == reqs.output_tokens).all()
    assert np.all(t.arrival_s <= t.first_scheduled_s) and np.all(t.first_scheduled_s < t.first_token_s)
    assert np.all(t.first_token_s <= t.finish_s)
    assert res.itl.count == (reqs.output_tokens - 1).sum()  # one gap per token after the first
    if policy is not Policy.STATIC:  # static pads prompts and keeps finished sequences
        kv = (reqs.prompt_tokens + reqs.output_tokens - 1).sum()
        assert run.cached_tokens == 0  # no request states a prefix
        assert run.computed_tokens - run.recomputed_tokens == kv


def test_kv_blocks_never_exceed_the_pool(busy_run):
    policy, _, res = busy_run
    tl = res.instances[0].result.timeline
    assert tl.kv_blocks.max() <= POOL_BLOCKS
    if policy in (Policy.VLLM, Policy.SARATHI):
        assert tl.kv_blocks.max() == POOL_BLOCKS and res.preemptions.sum() > 0  # the limit was reached
    else:
        assert res.preemptions.sum() == 0


def test_littles_law_holds_on_the_engine_state(busy_run):
    _, _, res = busy_run
    m = res.metrics()
    assert m.mean_in_system == pytest.approx(m.littles_law_in_system, rel=0.02)
    assert m.mean_in_system > 5  # a loaded run, not a trivial one


def test_same_seed_same_result(h200):
    a = serve(busy(seed=5, n=80), setup(h200, Policy.VLLM)).metrics()
    b = serve(busy(seed=5, n=80), setup(h200, Policy.VLLM)).metrics()
    c = serve(busy(seed=6, n=80), setup(h200, Policy.VLLM)).metrics()
    assert a == b and a != c


@pytest.mark.parametrize("policy", [Policy.VLLM, Policy.ORCA])
def test_runs_of_decode_steps_equal_single_steps(h200, policy):
    reqs = busy(seed=2, n=120)
    inst = Instance(step_model(TINY, h200), SchedulerConfig(policy, 2048, 64), POOL_BLOCKS, host=PROFILES["vllm"])
    fast = simulate_instance(reqs, inst)
    slow = simulate_instance(reqs, inst, decode_runs=False)
    assert fast.steps == slow.steps and (fast.preemptions == slow.preemptions).all()
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9)
    np.testing.assert_allclose(fast.first_token_s, slow.first_token_s, rtol=1e-9)


def test_vllm_preempts_the_newest_running_request(h200):
    # three requests at once, each needing 3 blocks at the end; the pool holds 8
    reqs = make_requests([0.0, 0.0, 0.0], [16, 16, 16], [32, 32, 32])
    res = serve(reqs, replace(setup(h200, Policy.VLLM), kv_blocks=8))
    assert res.preemptions.tolist() == [0, 0, 1]
    assert res.times.finish_s[2] > res.times.finish_s[:2].max()


def test_mixed_step_ops_are_those_of_archsim_run(llama8b):
    prefill = build_mixed_step(llama8b, MixedBatch(prefill_chunks=(PrefillChunk(300, 0),)))
    mixed = list(prefill.tokens) + list(prefill.prefill_attention[0]) + list(prefill.head)
    assert sorted(map(repr, mixed)) == sorted(map(repr, build_step(llama8b, Step(Phase.PREFILL, 1, 300, 0))))
    decode = build_mixed_step(llama8b, MixedBatch(decode_kv_lens=(100, 100, 100)))
    run = [op for op in build_step(llama8b, Step(Phase.DECODE, 3, 1, 99)) if op.name == "attention"]
    assert list(decode.decode_attention) == run and decode.longest_decode[0].batch == 1
    assert build_mixed_step(llama8b, MixedBatch((10, 31), (PrefillChunk(64, 32),))).tokens[1].m == 66


def test_exact_timer_is_the_mixed_step_definition(h200):
    batch = MixedBatch((33, 70, 129), (PrefillChunk(40, 0), PrefillChunk(17, 200)))
    exact = StepModel(TINY, h200, resolution=0)
    kv = batch.decode_kv_lens
    got = exact.step_s(len(kv), sum(kv), max(kv), [(c.new_tokens, c.past) for c in batch.prefill_chunks])
    assert got == pytest.approx(mixed_step_time_s(TINY, h200, batch), rel=1e-12)
    grid = step_model(TINY, h200)
    # on the grid: 64 tokens, 9 sequences, 8 decodes at KV 64, a chunk of 56 new tokens
    assert grid.step_s(8, 8 * 64, 64, [(56, 0)]) == pytest.approx(
        mixed_step_time_s(TINY, h200, MixedBatch((64,) * 8, (PrefillChunk(56, 0),))), rel=1e-12
    )
    run = grid.decode_run_s(3, 3 * 40 + 30, 70, 50)
    one = [grid.step_s(3, 3 * (40 + j) + 30, 70 + j) for j in range(50)]
    np.testing.assert_allclose(run, one, rtol=1e-12)
    np.testing.assert_allclose(grid.decode_steps_s(3, 3 * 40 + 30, 70, 50), one, rtol=1e-12)


def test_decode_tables_simulate_only_the_kv_grid_points_around_the_lengths_asked(h200):
    grid = StepModel(TINY, h200)  # 2 KV points per doubling: ..., 64, 96, 128, 192, 256, 384, ...
    assert grid.decode_attention_s(1, 127) > 0.0  # 127 lies between 96 and 128
    assert set(grid._decode.values) == {(1, 96), (1, 128)}  # not 192, which 128-143 would need
    grid.decode_steps_s(1, 300, 300, 4)  # KV 300-303 (batch and longest decode): 256 and 384
    # the lengths held stay one span, 96-384: 192 between is simulated too, once
    assert set(grid._decode.values) == {(1, k) for k in (96, 128, 192, 256, 384)}
    # each value as the line through its two grid points gives it (np.interp, as before)
    v = {k: grid._decode(1, k) for k in (96, 128, 192, 256, 384)}
    assert grid.decode_attention_s(1, 127) == np.interp(127.0, [96.0, 128.0], [v[96], v[128]])
    assert grid.decode_attention_s(1, 200) == np.interp(200.0, [192.0, 256.0], [v[192], v[256]])
    step = grid.decode_fixed_s(1) + np.interp(301.0, [256.0, 384.0], [v[256], v[384]])
    assert grid.decode_steps_s(1, 301, 301, 1)[0] == step
    assert len(grid._decode.values) == 5
    # and below them: 70 lies between 64 and 96, the table's room grown down
    assert grid.decode_attention_s(1, 70) == np.interp(70.0, [64.0, 96.0], [grid._decode(1, 64), v[96]])
    assert len(grid._decode.values) == 6 and grid.decode_attention_s(1, 127) == np.interp(
        127.0, [96.0, 128.0], [v[96], v[128]]
    )


def _alone(prompt, output, n=3):
    """`n` requests far apart: each runs alone."""
    return make_requests([100.0 * i for i in range(n)], [prompt] * n, [output] * n)


@pytest.mark.parametrize("prompt,resolution", [(300, 0), (512, 2)], ids=["off-grid-exact", "on-grid-default"])
def test_low_load_latencies_are_archsim_run_steps(h200, llama8b, prompt, resolution):
    output = 24
    m = serve(_alone(prompt, output), ServeSetup(llama8b, h200, resolution=resolution)).metrics()
    run = run_generation(replace(llama8b, scenario=Scenario(1, prompt, output)), h200)
    assert m.ttft_s.p50 == pytest.approx(run.ttft_s, rel=1e-6 if resolution else 1e-9)
    assert m.tpot_s.mean == pytest.approx(run.tpot_s, rel=0.01)  # run interpolates attention every 64 tokens
    assert m.queue_s.p99 == 0.0


def test_static_batch_is_archsim_run_at_that_batch(h200, llama8b):
    reqs = make_requests([0.0] * 4, [256] * 4, [16] * 4)
    m = serve(reqs, ServeSetup(llama8b, h200, SchedulerConfig(Policy.STATIC), resolution=0)).metrics()
    run = run_generation(replace(llama8b, scenario=Scenario(4, 256, 16)), h200)
    assert m.ttft_s.p50 == pytest.approx(run.ttft_s, rel=1e-9)
    assert m.tpot_s.mean == pytest.approx(run.tpot_s, rel=0.01)


def test_disaggregated_request_pays_prefill_transfer_and_decode(h200, llama8b):
    reqs = _alone(512, 24)
    d = serve(reqs, ServeSetup(llama8b, h200, disaggregation=Disaggregation(h200, h200, 1, 2))).metrics()
    c = serve(reqs, ServeSetup(llama8b, h200)).metrics()
    link = h200.interconnect
    transfer = link.link_latency_s + 512 * 131072 / (link.links_per_chip * link.link_bandwidth_bytes_per_s)
    assert kv_transfer_s(llama8b, h200, h200, np.array([512]))[0] == pytest.approx(transfer)
    assert d.ttft_s.mean == pytest.approx(c.ttft_s.mean)
    assert d.e2e_s.mean == pytest.approx(c.e2e_s.mean + transfer, rel=1e-6)
    lonely = replace(h200, interconnect=None)
    with pytest.raises(LinkMissingError, match="no interconnect"):
        serve(reqs, ServeSetup(llama8b, h200, disaggregation=Disaggregation(h200, lonely)))


def test_instances_share_the_load(h200):
    reqs = busy(seed=9, n=200)
    one = serve(reqs, setup(h200, Policy.VLLM)).metrics()
    two = serve(reqs, setup(h200, Policy.VLLM, instances=2)).metrics()
    assert two.e2e_s.mean < one.e2e_s.mean and two.requests == 200


def test_find_capacity_brackets_the_slo(h200):
    slo = Slo(ttft_s=2e-3)
    cfg = setup(h200, Policy.VLLM)

    def at(rate):
        return generate_requests(rate, 150, parse_length("uniform:16:256"), parse_length("16"), seed=1)

    cap = find_capacity(at, cfg, slo, start_rate_per_s=1000.0, attainment=0.9, tolerance=0.05)
    assert cap.rate_per_s > 0 and cap.attainment >= 0.9
    failing = [p for p in cap.probes if p.attainment < 0.9]
    assert failing and min(p.rate_per_s for p in failing) <= cap.rate_per_s * 1.05 + 1e-9
    assert serve(at(cap.rate_per_s), cfg).metrics(slo).slo_attainment == cap.attainment


def test_requests_that_never_fit_are_refused(h200):
    reqs = make_requests([0.0, 0.1, 0.2], [100, 20, 30], [10, 5, 5])  # need 109, 24 and 34 tokens
    res = serve(reqs, replace(setup(h200, Policy.VLLM), kv_blocks=3))  # 48 tokens
    assert res.rejected == 1 and res.served.tolist() == [1, 2]
    assert res.metrics().slo_attainment == pytest.approx(2 / 3)
    with pytest.raises(DoesNotFitError, match="none of the 3 requests fits a KV cache of 1 blocks"):
        serve(reqs, replace(setup(h200, Policy.VLLM), kv_blocks=1))


def test_a_multi_chip_instance_runs_tensor_parallel():
    """On h200x8 an instance is TP 8: the busiest chip's share of the step plus its all-reduces;
    a layout the model cannot take, or chips without links, are refused with the reason."""
    eight = load_system("h200x8")[0]
    w = load_workload("llama3_70b")[0]
    one_chip, tp = (
        StepModel(w, replace(eight, chips=1, interconnect=None), 0),
        StepModel(w, eight, 0, Parallelism(tp=8)),
    )
    assert tp.step_s(8, 8 * 1024, 1024) < one_chip.step_s(8, 8 * 1024, 1024) / 3  # weights and KV streamed 8 ways
    local = replace(w, model=shard_model(w.model, Parallelism(tp=8)))
    sharded = ops_time_s(token_ops(local, 8), eight)
    assert tp.tokens_s(8) > sharded  # the all-reduces after attention and FFN come on top
    res = serve(busy(n=20), ServeSetup(w, eight))
    assert len(res.served) == 20 and res.metrics().tpot_s.mean > 0
    with pytest.raises(
        ServeSetupError,
        match="an instance of 8 chips runs tiny tensor-parallel over all of them: "
        "TP 8 must divide the 12 attention heads",
    ):
        serve(busy(n=2), ServeSetup(replace(TINY, model=replace(TINY.model, heads=12, kv_heads=2)), eight))
    with pytest.raises(ServeSetupError, match="has no interconnect section"):
        serve(busy(n=2), ServeSetup(TINY, replace(eight, interconnect=None)))
