"""Serving inputs and formulas, no simulation: traces, generated arrivals, lengths, the KV pool,
the step-time grid and the metrics as vLLM's benchmark defines them."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ConfigError
from archsim.runner.steps import bracket, grid_points, grid_step
from archsim.serving.arrivals import ArrivalProcess, LengthKind, generate_requests, parse_length, unit_arrivals
from archsim.serving.histogram import GapHistogram
from archsim.serving.kvpool import blocks_for, size_pool
from archsim.serving.metrics import RequestTimes, Slo, request_metrics, stats, weighted_percentiles
from archsim.serving.requests import load_trace, make_requests


def test_azure_conversation_trace_loads():
    r = load_trace("azure_llm_2023_conv")
    assert len(r) == 19366
    assert r.arrival_s[0] == 0.0 and np.all(np.diff(r.arrival_s) >= 0)
    assert r.rate_per_s == pytest.approx(5.53, abs=0.01)
    assert r.prompt_tokens.mean() == pytest.approx(1155, abs=1) and r.output_tokens.mean() == pytest.approx(211, abs=1)
    assert r.arrival_s[1] == pytest.approx(50.9951690 - 46.6805900)  # 100 ns digits kept


def test_plain_csv_and_jsonl_traces(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("prompt_tokens,output_tokens,arrival_s\n10,3,0.5\n20,4,0.25\n")
    r = load_trace(str(csv))
    assert r.arrival_s.tolist() == [0.25, 0.5] and r.prompt_tokens.tolist() == [20, 10]
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n\n'
        '{"arrival_s": 1.5, "prompt_tokens": 6, "output_tokens": 2}\n'
    )
    r = load_trace(str(jl))
    assert r.output_tokens.tolist() == [1, 2] and r.arrival_s.tolist() == [0.0, 1.5]


def test_bad_trace_lines_are_all_reported(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,3\n-1,10,3\n1,ten,0\n")
    with pytest.raises(ConfigError) as err:
        load_trace(str(bad))
    msgs = [str(p) for p in err.value.problems]
    assert f"{bad}:3: arrival_s: expected seconds from 0 to 1,000,000,000 (got '-1')" in msgs
    assert f"{bad}:4: prompt_tokens: expected a whole number from 1 to 16,777,216 (got 'ten')" in msgs
    assert f"{bad}:4: output_tokens: expected a whole number from 1 to 16,777,216 (got '0')" in msgs
    azure = tmp_path / "az.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,3,4\nyesterday,3,4\n")
    with pytest.raises(ConfigError, match=r"az.csv:3: TIMESTAMP: not a timestamp \(got 'yesterday'\)"):
        load_trace(str(azure))
    header = tmp_path / "h.csv"
    header.write_text("when,prompt\n1,2\n")
    with pytest.raises(ConfigError) as err:
        load_trace(str(header))
    assert str(err.value) == (
        f"{header}:1: not a trace header: expected the columns arrival_s,prompt_tokens,output_tokens or the "
        "Azure TIMESTAMP,ContextTokens,GeneratedTokens; missing arrival_s, prompt_tokens, output_tokens "
        "(did you mean 'prompt' for 'prompt_tokens'?)"
    )


def test_unknown_trace_name_suggests_a_shipped_one():
    with pytest.raises(ConfigError, match="did you mean 'azure_llm_2023_conv'"):
        load_trace("azure_llm_2023_cnv")


def test_time_scale_and_head():
    r = make_requests([0.0, 2.0, 4.0], [1, 2, 3], [1, 1, 1])
    assert r.scaled(0.5).arrival_s.tolist() == [0.0, 1.0, 2.0]
    assert r.head(2).prompt_tokens.tolist() == [1, 2]
    assert r.rate_per_s == pytest.approx(0.5)


def test_length_specs():
    assert parse_length("512").kind is LengthKind.FIXED
    assert str(parse_length("uniform:128:1024")) == "uniform:128:1024"
    rng = np.random.default_rng(0)
    x = parse_length("uniform:3:5").draw(rng, 2000)
    assert set(x.tolist()) == {3, 4, 5}
    x = parse_length("lognormal:1000:1.5").draw(rng, 200000)
    assert x.mean() == pytest.approx(1000, rel=0.03) and x.std() / x.mean() == pytest.approx(1.5, rel=0.1)
    assert parse_length("exponential:50").draw(rng, 100000).mean() == pytest.approx(50.5, rel=0.03)
    for bad, why in (
        ("0", "whole number from 1 to 16,777,216"),
        ("16777217", "whole number from 1 to 16,777,216"),
        ("uniform:9:3", "1 <= LO <= HI"),
        ("uniform:1:1e300", "at most 16,777,216 tokens"),
        ("exponential:nan", "must be finite"),
        ("lognormal:1000:1e300", "cv must be at most 100"),
        ("zipf:2", "unknown distribution"),
        ("lognormal:100", "takes 2 number"),
        ("many", "expected N"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_length(bad)


def test_arrival_processes_have_the_asked_rate_and_variability():
    rng = np.random.default_rng(1)
    gaps = np.diff(unit_arrivals(rng, 100001, ArrivalProcess.POISSON))
    assert gaps.mean() == pytest.approx(1.0, rel=0.02) and gaps.std() == pytest.approx(1.0, rel=0.02)
    gaps = np.diff(unit_arrivals(rng, 100001, ArrivalProcess.GAMMA, cv=3.0))
    assert gaps.mean() == pytest.approx(1.0, rel=0.05) and gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.05)
    r = generate_requests(4.0, 1000, parse_length("100"), parse_length("10"), seed=7)
    assert r.arrival_s[0] == 0.0 and r.rate_per_s == pytest.approx(4.0, rel=0.1)


def test_same_seed_same_requests_and_rate_only_rescales():
    a = generate_requests(2.0, 50, parse_length("uniform:1:100"), parse_length("uniform:1:9"), seed=3)
    b = generate_requests(2.0, 50, parse_length("uniform:1:100"), parse_length("uniform:1:9"), seed=3)
    c = generate_requests(4.0, 50, parse_length("uniform:1:100"), parse_length("uniform:1:9"), seed=3)
    d = generate_requests(2.0, 50, parse_length("uniform:1:100"), parse_length("uniform:1:9"), seed=4)
    assert a.digest() == b.digest() != d.digest()
    assert np.allclose(c.arrival_s * 2, a.arrival_s) and (c.prompt_tokens == a.prompt_tokens).all()


def test_blocks_and_pool_sizing(h200, llama8b):
    assert [blocks_for(t, 16) for t in (1, 16, 17, 32, 33)] == [1, 1, 2, 2, 3]
    pool = size_pool(llama8b, h200, 16, 0.9, 8192, 256)
    kv_per_token = 2 * 32 * 8 * 128 * 2  # K and V, layers, KV heads x head_dim, bf16: 131072 bytes
    assert pool.block_bytes == 16 * kv_per_token
    # vLLM's rule: 90% of the 143,771 MiB (150,754,820,096 B) the device reports, less 16,060,522,496 B
    # of bf16 weights, less the activations of one step of 8192 tokens over 256 sequences:
    # 8192 x (2 x 14336 + 2 x 4096) x 2 B + 256 x 128256 x 4 B = 735,313,920 B;
    # 118,883,501,670 B / 2,097,152 B a block = 56,688.3
    assert pool.activations_bytes == 735_313_920
    assert pool.blocks == 56_688
    assert size_pool(llama8b, h200, 16, 0.9, 8192, 256, blocks_override=7).blocks == 7


def test_grid_brackets():
    assert [grid_step(n, 2) for n in (1, 3, 4, 7, 8, 1000, 2048)] == [1, 1, 2, 2, 4, 256, 1024]
    assert bracket(300, 2) == (256, 384) and bracket(256, 2) == (256, 256)
    assert bracket(300, 2, knots=True) == (257, 384) and bracket(257, 2, knots=True) == (257, 257)
    assert bracket(7, 2, knots=True) == (7, 7)  # spacing 2: g and g + 1 cover everything
    assert bracket(300, 0) == (300, 300)
    assert grid_points(100, 300, 2) == [96, 128, 192, 256, 384]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100, allow_nan=False), st.integers(0, 5)), min_size=1, max_size=30))
def test_weighted_percentiles_equal_percentiles_of_repeats(pairs):
    values = np.array([p[0] for p in pairs])
    weights = np.array([p[1] for p in pairs])
    if weights.sum() == 0:
        return
    expanded = np.repeat(values, weights)
    assert weighted_percentiles(values, weights) == pytest.approx(list(np.percentile(expanded, [50, 90, 99])))


def test_metrics_by_hand():
    # two requests: arrival 0 and 1; first tokens at 0.5 and 1.2; last tokens at 2.5 and 1.2
    t = RequestTimes(
        np.array([0.0, 1.0]),
        np.array([0.1, 1.0]),
        np.array([0.5, 1.2]),
        np.array([2.5, 1.2]),
        np.array([10, 20]),
        np.array([5, 1]),
    )
    gaps = GapHistogram()
    gaps.add(0.5, 2)
    gaps.add(0.25, 2)
    m = request_metrics(t, gaps, Slo(ttft_s=0.3), rejected=1, preemptions=0, in_system_s=None)
    assert t.tpot_s[0] == pytest.approx((2.5 - 0.5) / 4) and np.isnan(t.tpot_s[1])
    assert m.ttft_s.mean == pytest.approx(0.35) and m.tpot_s.p50 == pytest.approx(0.5)
    assert m.e2e_s.mean == pytest.approx((2.5 + 0.2) / 2) and m.queue_s.mean == pytest.approx(0.05)
    assert m.itl_s.mean == pytest.approx(0.375) and m.duration_s == 2.5
    assert m.throughput_tokens_per_s == pytest.approx(6 / 2.5) and m.requests_per_s == pytest.approx(2 / 2.5)
    assert m.goodput_requests_per_s == pytest.approx(1 / 2.5)  # only the second meets TTFT <= 0.3 s
    assert m.slo_attainment == pytest.approx(1 / 3)  # the refused request misses
    assert m.ttft_attainment == pytest.approx(1 / 3) and m.tpot_attainment is None  # no TPOT SLO
    assert m.littles_law_in_system == pytest.approx(2 / 2.5 * 1.35)
    assert stats(np.array([])).mean != stats(np.array([])).mean  # NaN when empty
    json.dumps(m.as_dict(), default=float)
