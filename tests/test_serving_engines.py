"""Serving as engines run it: host overhead, the schedulers' reservations, watermark and swap,
prefix caching and its host tier, speculative decoding. Each expectation is derived by hand
in its comment; the two-layer model keeps the steps cheap."""

from dataclasses import replace

import numpy as np
import pytest
from test_serving import POOL_BLOCKS, TINY, busy

from archsim.runner.steps import StepModel
from archsim.serving.engine import simulate_instance
from archsim.serving.host import PROFILES, HostProfile
from archsim.serving.instance import Instance
from archsim.serving.prefix import BlockCache, HostTier
from archsim.serving.request_fields import RequestFields
from archsim.serving.requests import make_requests
from archsim.serving.scheduler import Policy, Preemption, SchedulerConfig
from archsim.serving.setup import ServeSetup, ServeSetupError
from archsim.serving.simulate import serve
from archsim.serving.speculative import Speculation, expected_tokens, mtp_module

BLOCK_BYTES = 16 * 2 * 2 * 2 * 64 * 2  # 16 tokens x K and V x 2 layers x 2 KV heads x 64 x bf16 = 16,384 B


def alone(prompt: int, output: int, n: int = 1, gap_s: float = 10.0, **fields):
    """`n` requests `gap_s` apart (each runs alone), optionally stating fields."""
    reqs = make_requests([gap_s * i for i in range(n)], [prompt] * n, [output] * n)
    if not fields:
        return reqs
    f = RequestFields.unstated(n)
    for name, values in fields.items():
        getattr(f, name)[:] = values
    return replace(reqs, fields=f)


# --- host and framework overhead ---


def test_host_overhead_adds_exactly_its_cost_per_step_at_batch_1(h200):
    reqs = alone(100, 20)
    bare = serve(reqs, ServeSetup(TINY, h200)).metrics()
    host = HostProfile("test", step_s=1e-3, per_request_s=50e-6, per_token_s=0.0, overlap=False)
    hosted = serve(reqs, ServeSetup(TINY, h200, host=host)).metrics()
    # batch 1: every step (the prefill and each of the 19 decodes) has one sequence: + 1.05 ms each
    assert hosted.ttft_s.mean == pytest.approx(bare.ttft_s.mean + 1.05e-3, rel=1e-9)
    assert hosted.tpot_s.mean == pytest.approx(bare.tpot_s.mean + 1.05e-3, rel=1e-9)
    # share of the time between tokens: 20 steps x 1.05 ms over the request's whole time
    assert hosted.host_share == pytest.approx(20 * 1.05e-3 / (bare.e2e_s.mean + 20 * 1.05e-3), rel=1e-9)
    assert bare.host_share == 0.0


def test_overlapped_host_work_hides_the_gpu_step_when_longer(h200):
    reqs = alone(100, 20)
    bare = serve(reqs, ServeSetup(TINY, h200)).metrics()
    assert bare.tpot_s.mean < 1e-3  # the tiny model's decode step is shorter than the host's work
    host = HostProfile("test", 1e-3, 50e-6, 0.0, overlap=True, exposed_s=0.1e-3)
    hosted = serve(reqs, ServeSetup(TINY, h200, host=host)).metrics()
    # each step: max(GPU, 1.05 ms) + 0.1 ms exposed = 1.15 ms
    assert hosted.tpot_s.mean == pytest.approx(1.15e-3, rel=1e-9)


def test_the_vllm_profile_follows_its_sources():
    vllm = PROFILES["vllm"]
    # 1.5 ms a step; at batch 256, 1.5 ms + 256 x 16 us = 5.6 ms: the 5-6 ms gap of vLLM issue 10634
    assert vllm.host_s(256, 256) == pytest.approx(5.596e-3)
    assert vllm.wall_s(5e-3, 1, 1) == pytest.approx(5e-3 + 1.516e-3)  # added, not overlapped
    assert PROFILES["vllm_async"].wall_s(5e-3, 1, 1) == pytest.approx(5e-3 + 0.16e-3)  # host work hidden


# --- schedulers ---


def reserving(h200, policy, **kw):
    budget = 2048
    return ServeSetup(TINY, h200, SchedulerConfig(policy, budget, 64), kv_blocks=40, **kw)


@pytest.mark.parametrize("policy", [Policy.ORCA, Policy.TRTLLM])
def test_reserving_max_tokens_admits_fewer_requests_than_vllm(h200, policy):
    # ten requests at once: prompt 32, output 16, each stating max_tokens 256; a pool of 40 blocks
    reqs = replace(
        make_requests([0.0] * 10, [32] * 10, [16] * 10),
        fields=RequestFields(np.full(10, 256), np.full(10, -1), np.zeros(10, np.int64), np.full(10, np.nan)),
    )
    reserved = serve(reqs, reserving(h200, policy))
    paged = serve(reqs, reserving(h200, Policy.VLLM))
    # orca and trtllm reserve 32 + 256 - 1 = 287 tokens = 18 blocks: two of them at once (36 of 40);
    # vllm takes the prompt's 2 blocks (watermark int(0.4) = 0): all ten, 30 blocks at most at the end
    assert reserved.instances[0].result.timeline.running.max() == 2
    assert paged.instances[0].result.timeline.running.max() == 10
    assert paged.preemptions.sum() == reserved.preemptions.sum() == 0
    assert reserved.metrics().queue_s.mean > paged.metrics().queue_s.mean
    # the setup's max_tokens stands for the requests that state none: the same reservation
    unstated = make_requests([0.0] * 10, [32] * 10, [16] * 10)
    again = serve(unstated, reserving(h200, policy, max_tokens=256))
    assert again.instances[0].result.timeline.running.max() == 2
    # knowing the true output (max_tokens 16): 32 + 16 - 1 = 47 tokens = 3 blocks, 13 would fit
    knows = serve(unstated, reserving(h200, policy, max_tokens=16))
    assert knows.instances[0].result.timeline.running.max() == 10


def test_a_request_states_no_limit_reserves_what_the_context_window_leaves(h200):
    reqs = make_requests([0.0] * 4, [32, 32, 32, 32], [16, 16, 16, 16])
    # max_model_len 400: a request may generate 400 - 32 = 368 tokens; reserve 32 + 368 - 1 = 399
    # tokens = 25 blocks: one at a time in 40 blocks
    res = serve(reqs, reserving(h200, Policy.ORCA, max_model_len=400))
    assert res.instances[0].result.timeline.running.max() == 1
    # a 500-token prompt exceeds the window: refused before the run, and counted against the SLOs
    longer = serve(make_requests([0.0, 1.0], [500, 32], [4, 16]), reserving(h200, Policy.VLLM, max_model_len=400))
    assert longer.rejected == 1 and longer.served.tolist() == [1]


def test_the_watermark_keeps_vllm_from_admitting_what_it_would_preempt(h200):
    # two requests at once: prompt 160 (10 blocks), output 8; a pool of 20 blocks. Both prompts fit
    # (10 + 10), but their first decode needs 11 blocks each: without a watermark vllm admits both
    # and preempts one; a watermark of 2 blocks (10%) lets the second in only when the first is done
    reqs = make_requests([0.0, 0.0], [160, 160], [8, 8])
    cfg = SchedulerConfig(Policy.VLLM, 2048, 64, watermark=0.0)
    loose = serve(reqs, ServeSetup(TINY, h200, cfg, kv_blocks=20))
    kept = serve(reqs, ServeSetup(TINY, h200, replace(cfg, watermark=0.1), kv_blocks=20))
    assert loose.preemptions.sum() >= 1 and loose.instances[0].result.timeline.running.max() == 2
    assert kept.preemptions.sum() == 0 and kept.instances[0].result.timeline.running.max() == 1


def test_trtllm_never_preempts_and_serves_everything(h200):
    reqs = busy()
    res = serve(reqs, ServeSetup(TINY, h200, SchedulerConfig(Policy.TRTLLM, 2048, 64), kv_blocks=POOL_BLOCKS))
    tl = res.instances[0].result.timeline
    assert res.preemptions.sum() == 0 and tl.kv_blocks.max() <= POOL_BLOCKS
    assert (res.instances[0].result.generated == reqs.output_tokens).all()


def test_swap_preemption_moves_kv_over_the_host_link_instead_of_recomputing(h200):
    reqs = busy()
    cfg = SchedulerConfig(Policy.VLLM, 2048, 64, preemption=Preemption.SWAP)
    res = serve(reqs, ServeSetup(TINY, h200, cfg, kv_blocks=POOL_BLOCKS))
    run = res.instances[0].result
    assert res.preemptions.sum() > 0 and run.swaps == res.preemptions.sum()  # 4 GiB of swap: room for all
    assert run.recomputed_tokens == 0
    kv = (reqs.prompt_tokens + reqs.output_tokens - 1).sum()
    assert run.computed_tokens == kv  # nothing computed twice
    assert (run.generated == reqs.output_tokens).all()
    with pytest.raises(ServeSetupError, match="has no host_link section"):
        serve(reqs, ServeSetup(TINY, replace(h200, host_link=None), cfg, kv_blocks=POOL_BLOCKS))


def test_a_transfer_over_the_host_link_takes_latency_plus_bytes_over_bandwidth(h200):
    inst = Instance(StepModel(TINY, h200), SchedulerConfig(), 10, BLOCK_BYTES, host_link=h200.host_link)
    # two blocks of the tiny model, 32,768 B, at 55 GB/s after 10 us
    assert inst.transfer_s(2 * BLOCK_BYTES) == pytest.approx(10e-6 + 32768 / 55e9)
    assert inst.transfer_s(0.0) == 0.0


# --- prefix caching ---


def test_a_fully_shared_prefix_skips_its_prefill(h200):
    # two requests far apart, the same 512-token prompt (group 0, prefix 512): the second finds 31 of
    # its 32 blocks cached (its last token must be computed for its logits: min(512, 511) // 16 = 31)
    reqs = alone(512, 4, n=2, prefix_id=0, prefix_tokens=512)
    setup = ServeSetup(TINY, h200, resolution=0)
    res = serve(reqs, setup)
    exact = StepModel(TINY, h200, resolution=0)
    first, second = res.times.ttft_s
    assert first == pytest.approx(exact.step_s(0, 0, 0, [(512, 0)]), rel=1e-12)
    assert second == pytest.approx(exact.step_s(0, 0, 0, [(16, 496)]), rel=1e-12)  # 16 new tokens after 496
    m = res.metrics()
    assert m.cached_tokens == 496 and m.prefix_hit_rate == pytest.approx(496 / 1024)
    off = serve(reqs, replace(setup, scheduler=replace(setup.scheduler, prefix_caching=False))).metrics()
    assert off.cached_tokens == 0 and off.ttft_s.p50 == pytest.approx(first, rel=1e-12)


def test_requests_without_a_prefix_group_share_nothing(h200):
    res = serve(alone(512, 4, n=2), ServeSetup(TINY, h200)).metrics()
    assert res.cached_tokens == 0 and res.prefix_hit_rate == 0.0


def test_the_cache_evicts_the_least_recently_freed_block_first():
    cache = BlockCache(HostTier(2))
    for i in range(3):
        assert cache.insert((0, i))
    assert not cache.insert((0, 1))  # keyed once
    for i in (2, 0, 1):
        assert cache.release((0, i))  # nobody holds them: free, in this order
    assert cache.evictable == 3 and cache.lookup(0, 3) == (3, 3, 0)
    assert cache.acquire((0, 0)) and cache.evictable == 2  # referenced again: not evictable
    cache.evict(1)  # (0, 2) was freed first
    assert (0, 2) not in cache.ref and list(cache.host.keys) == [(0, 2)]
    assert cache.lookup(0, 3) == (2, 1, 1)  # (0, 0) and (0, 1) on the device, (0, 2) in host memory


def test_evicted_prefix_blocks_come_back_from_the_host_tier(h200):
    # pool 40 blocks. A (group 0, 320-token prompt: 20 blocks keyed, and a 21st for its second
    # token) runs alone; then B (no group, 560 tokens: 35 blocks, a 36th for its second token)
    # evicts 16 of A's freed blocks, its tail first; C (group 0, the same 320-token prefix) finds
    # (0, 0)-(0, 3) on the device and (0, 4)-(0, 18) in host memory (19 = min(320, 319) // 16
    # blocks wanted), and computes 320 - 19 x 16 = 16 tokens.
    reqs = make_requests([0.0, 10.0, 20.0], [320, 560, 320], [2, 2, 2])
    reqs = replace(
        reqs,
        fields=RequestFields(np.zeros(3, np.int64), np.array([0, -1, 0]), np.array([320, 0, 320]), np.full(3, np.nan)),
    )
    setup = ServeSetup(TINY, h200, kv_blocks=40, kv_offload_bytes=1e9, resolution=0)
    res = serve(reqs, setup)
    m = res.metrics()
    assert m.cached_tokens == 4 * 16 and m.offload_hit_tokens == 15 * 16
    exact = StepModel(TINY, h200, resolution=0)
    fetch = h200.host_link.latency_s + 15 * BLOCK_BYTES / h200.host_link.bandwidth_bytes_per_s
    assert res.times.ttft_s[2] == pytest.approx(exact.step_s(0, 0, 0, [(16, 304)]) + fetch, rel=1e-12)
    without = serve(reqs, replace(setup, kv_offload_bytes=0.0)).metrics()
    assert without.cached_tokens == 64 and without.offload_hit_tokens == 0


# --- speculative decoding ---


def test_expected_tokens_per_verify():
    assert expected_tokens(1.0, 4) == 5.0  # every proposal accepted, and the target's own token
    assert expected_tokens(0.5, 3) == pytest.approx((1 - 0.5**4) / 0.5)  # 1.875
    assert expected_tokens(0.0, 3) == 1.0  # none accepted: the target's own token only


def test_full_acceptance_divides_the_decode_steps_by_k_plus_1(h200):
    # one request, output 41: 40 tokens after the first. k = 4 at acceptance 1: 40 / 5 = 8 verifies
    reqs = alone(64, 41)
    spec = Speculation(mtp_module(TINY), tokens=4, acceptance=1.0, mtp=True)
    fast = serve(reqs, ServeSetup(TINY, h200, speculation=spec))
    plain = serve(reqs, ServeSetup(TINY, h200))
    assert fast.instances[0].result.steps == 1 + 8 and plain.instances[0].result.steps == 1 + 40
    assert fast.instances[0].result.verifies == 8 and fast.metrics().tokens_per_verify == 5.0
    assert fast.itl.count == 8  # one gap per verify: its five tokens stream together


def test_no_acceptance_pays_the_draft_and_the_verify_for_one_token(h200):
    reqs = alone(64, 41)
    spec = Speculation(TINY, tokens=3, acceptance=0.0)  # the model drafting for itself, never right
    slow = serve(reqs, ServeSetup(TINY, h200, speculation=spec)).metrics()
    plain = serve(reqs, ServeSetup(TINY, h200)).metrics()
    assert slow.tokens_per_verify == 1.0 and slow.tpot_s.mean > plain.tpot_s.mean


def test_a_request_states_its_own_acceptance(h200):
    spec = Speculation(mtp_module(TINY), tokens=4, acceptance=0.0, mtp=True)
    stated = alone(64, 41, acceptance=1.0)  # the request's rate wins over the setup's
    assert serve(stated, ServeSetup(TINY, h200, speculation=spec)).instances[0].result.verifies == 8


def test_runs_of_decodes_equal_single_steps_with_prefix_caching(h200):
    reqs = busy(seed=4, n=150).with_shared_prefix(48, groups=3)
    inst = Instance(StepModel(TINY, h200), SchedulerConfig(Policy.VLLM, 2048, 64), POOL_BLOCKS)
    limit = reqs.output_tokens
    fast = simulate_instance(reqs, inst, limit)
    slow = simulate_instance(reqs, inst, limit, decode_runs=False)
    assert fast.cached_tokens == slow.cached_tokens > 0
    np.testing.assert_allclose(fast.finish_s, slow.finish_s, rtol=1e-9)
