"""Decode attention at every KV length: the default run simulates each decode step at its own
KV length, cheaply, because how the attention items land on the cores is worked out once per
KV block count."""

from dataclasses import replace

import numpy as np
import pytest
from attention_ops import gqa_attention
from test_serving import TINY

from archsim import opcache
from archsim.compiler.attention import _decode_layout, compile_attention, core_groups
from archsim.config.loader import load_workload, shipped_dir
from archsim.graph.builder import Step
from archsim.graph.mixed import (
    built_decode_attention_ops,
    decode_attention_ops,
    decode_attention_template,
    prefill_attention_ops,
    step_ops,
)
from archsim.graph.model import Fusion, Phase, Scenario
from archsim.graph.ops import Op, Scaling
from archsim.graph.parallel import Parallelism, ParallelismError
from archsim.runner.generation import run_generation, simulate_step


@pytest.fixture(autouse=True)
def no_disk_cache():
    opcache.set_enabled(False)
    yield
    opcache.set_enabled(True)


def decode(kv_len: int) -> Op:
    return gqa_attention(1, kv_len, batch=64)


def test_lengths_in_one_kv_block_differ_only_in_the_last_blocks_bytes(h200):
    """2,049 and 2,100 keys both take 17 blocks of 128 (2,048 + 1 and 2,048 + 52 keys). A key of
    one KV head caches K and V rows of 128 bf16 each: 512 B; the last block holds 1 key (512 B)
    and 52 keys (26,624 B). Every other number of the two programs is the same."""
    core_groups.cache_clear()
    _decode_layout.cache_clear()
    a, b = compile_attention(decode(2049), h200.chip), compile_attention(decode(2100), h200.chip)
    assert core_groups.cache_info().misses == 1  # one deal for the block count
    assert _decode_layout.cache_info().hits == 1  # the second length took the first one's layout
    (pa,), (pb,) = a.phases, b.phases
    for name in ("core_start", "core_weight", "compute_cycles", "store_bytes", "store_l2_bytes"):
        np.testing.assert_array_equal(getattr(pa, name), getattr(pb, name))
    moved_a, moved_b = pa.hbm_bytes + pa.l2_bytes, pb.hbm_bytes + pb.l2_bytes
    differs = moved_a != moved_b
    assert differs.any()
    assert set((moved_b[differs] - moved_a[differs]).tolist()) == {26624.0 - 512.0}


@pytest.mark.parametrize("kv_len", [1, 128, 129, 2049, 2100, 4096])
def test_a_decode_from_its_block_counts_layout_is_the_decode_compiled_anew(h200, kv_len):
    """Each length's kernels come from its block count's layout with the last blocks' bytes
    added in; compiled anew (the general path) they hold the same numbers, bit for bit."""
    import math

    from archsim.compiler import attention

    op = decode(kv_len)
    kv_row = op.kv_row_elements * op.kv_format.bytes
    bk = attention.item_shape(replace(op, kv_len=0), h200.chip)[2]
    blocks = math.ceil(kv_len / bk)
    last = float((kv_len - (blocks - 1) * bk) * kv_row)
    fits = float(op.batch * op.kv_heads * kv_len * kv_row) <= attention.reuse_capacity_bytes(h200.chip)
    anew, _run = attention._flash_phases(op, h200.chip, blocks, last, fits)
    laid = compile_attention(op, h200.chip).phases
    assert len(laid) == len(anew)
    for x, y in zip(laid, anew, strict=True):
        for name in ("core_start", "core_weight", "hbm_bytes", "l2_bytes", "compute_cycles", "store_bytes"):
            assert getattr(x, name).tobytes() == getattr(y, name).tobytes()
        assert (x.stages, x.label, x.inflight_bytes) == (y.stages, y.label, y.inflight_bytes)


def test_another_block_count_deals_again(h200):
    core_groups.cache_clear()
    _decode_layout.cache_clear()
    compile_attention(decode(2048), h200.chip)  # 16 blocks
    compile_attention(decode(2049), h200.chip)  # 17
    assert core_groups.cache_info().misses == 2


@pytest.mark.parametrize("name", ["llama3_8b", "gemma2_9b", "deepseek_v3", "gpt_oss_120b", "mixtral_8x7b"])
def test_a_steps_length_dependent_ops_are_built_without_its_ffn(name):
    """Decode and prefill attention are built from the layers' attention blocks alone; they are
    the ops of the whole step (its FFN, embedding and head, collectives in place) that depend on
    the sequences' lengths, the same ops in the same order: dense, windowed, MLA with MTP
    layers, MoE; eager and fused; on one chip and spread by TP, EP and PP."""
    w = load_workload(name)[0]
    pars = [None, Parallelism(tp=2), Parallelism(pp=2)] + ([Parallelism(tp=2, ep=2)] if w.model.experts > 1 else [])
    for fusion in Fusion:
        wf = replace(w, fusion=fusion)
        for par in pars:
            for step, got in (
                (Step(Phase.DECODE, 3, 1, 4999), decode_attention_ops(wf, 3, 5000, par)),
                (Step(Phase.PREFILL, 2, 300, 700), prefill_attention_ops(wf, 300, 700, 2, par)),
            ):
                whole = [op for op in step_ops(wf, step, par) if op.scaling is Scaling.KV_LENGTH]
                assert got == whole and got, (name, fusion, par, step)


def test_decode_attention_from_its_template_is_the_graphs_to_the_field():
    """Decode attention at each KV length is the template's ops with that length, where the
    model has a template: field for field (names and repeats too) the ops the whole step graph
    gives, for every shipped workload, eager and fused, on one chip and under TP and PP, at
    lengths from 1 key on, on both sides of every window (Gemma 2's 4,096, gpt-oss's 128) and
    of a top-k selection (DeepSeek-V3.2's 2,048)."""
    lengths = [1, 2, 3, 127, 128, 129, 2047, 2048, 2049, 4095, 4096, 4097, 4098, 70000]
    for path in sorted(shipped_dir("workloads").glob("*.yaml")):
        w = load_workload(str(path))[0]
        for fusion in Fusion:
            wf = replace(w, fusion=fusion)
            for par in [None, Parallelism(tp=2), Parallelism(pp=2)]:
                try:
                    built_decode_attention_ops(wf, 3, 1, par)
                except ParallelismError:  # a layout the model cannot take: refused either way
                    with pytest.raises(ParallelismError):
                        decode_attention_ops(wf, 3, 1, par)
                    continue
                for kv in lengths:
                    got = decode_attention_ops(wf, 3, kv, par)
                    whole = built_decode_attention_ops(wf, 3, kv, par)
                    assert [op.__getstate__() for op in got] == [op.__getstate__() for op in whole], (path.stem, kv)


def test_only_window_free_attention_has_a_decode_template():
    """Llama-3-8B's decode attention is one attention op over every key (a template); Gemma 2's
    windowed layers see min(KV length, 4,096) keys and DeepSeek-V3's MLA absorbs the latent with
    GEMMs that grow with the KV length: built from the graph at each length."""
    assert decode_attention_template(load_workload("llama3_8b")[0], 64, None) is not None
    assert decode_attention_template(load_workload("gemma2_9b")[0], 64, None) is None
    assert decode_attention_template(load_workload("deepseek_v3")[0], 64, None) is None


def test_a_run_times_every_decode_step_at_its_own_kv_length(h200):
    """The default run's decode steps are the steps simulated whole, one by one (the run adds
    the ops that do not grow with the cache once; the step adds them in its own order). A step
    past P tokens attends over P + 1 keys, the KV length the run records."""
    w = replace(TINY, scenario=Scenario(3, 100, 40))
    result = run_generation(w, h200)
    direct = [simulate_step(w, h200, Step(Phase.DECODE, 3, 1, kv - 1)).time_s for kv in result.decode_kv_lens]
    np.testing.assert_allclose(result.decode_step_s, direct, rtol=1e-12)
    assert len(set(result.decode_step_s.tolist())) > 2  # the cache grows through a KV block boundary


def test_a_stride_is_an_override_that_interpolates(h200):
    """With --kv-stride 16 over 39 steps only the lengths 101, 117, 133 and 139 are simulated;
    the others are read off the lines between, so they differ from the exact times somewhere."""
    w = replace(TINY, scenario=Scenario(3, 100, 40))
    exact, coarse = run_generation(w, h200), run_generation(w, h200, kv_stride=16)
    sampled = np.isin(exact.decode_kv_lens, [101, 117, 133, 139])
    np.testing.assert_array_equal(coarse.decode_step_s[sampled], exact.decode_step_s[sampled])
    assert not np.array_equal(coarse.decode_step_s, exact.decode_step_s)
