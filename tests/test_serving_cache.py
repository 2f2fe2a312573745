"""The on-disk op-result cache (archsim/opcache.py), the trace's optional request fields, the
inter-token gap histogram and the chip file's host link."""

import json
import multiprocessing
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_serving import TINY

from archsim import opcache
from archsim.config.loader import load_system
from archsim.errors import ConfigError
from archsim.runner import steps
from archsim.serving.histogram import GapHistogram
from archsim.serving.requests import load_trace


def test_entries_are_kept_and_read_back(cache_dir, h200):
    cache = opcache.cache_for(h200)
    cache.put("a", 1.5)
    cache.put("b", [1, 2])
    again = opcache.OpCache(cache.path)  # another process reading the file
    assert again.get("a") == 1.5 and again.get("b") == [1, 2] and again.get("c") is None
    assert cache.path.parent.name == opcache.code_version() and cache.path.parent.parent == cache_dir


def test_a_line_cut_short_by_a_dying_writer_is_skipped(cache_dir, h200):
    cache = opcache.cache_for(h200)
    cache.put("a", 2.0)
    with open(cache.path, "a") as f:
        f.write('{"k": "b", "v": 3')  # killed mid-line
    assert opcache.OpCache(cache.path).values == {"a": 2.0}


def _writer(path: str, start: int) -> None:
    cache = opcache.OpCache(__import__("pathlib").Path(path))
    for i in range(start, start + 300):
        cache.put(f"k{i}", float(i))


def test_concurrent_writers_lose_nothing(cache_dir, h200):
    path = opcache.cache_for(h200).path
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), 1000 * w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    values = opcache.OpCache(path).values
    assert len(values) == 900 and all(values[f"k{i}"] == float(i) for i in (0, 299, 1000, 2299))
    assert all(json.loads(line) for line in path.read_text().splitlines())  # every line whole


def test_the_key_names_the_chip_and_the_source(cache_dir, h200, monkeypatch, tmp_path):
    other = replace(h200, chip=replace(h200.chip, clock_hz=1e9))
    assert opcache.system_digest(h200) != opcache.system_digest(other)
    assert opcache.system_digest(h200) == opcache.system_digest(replace(h200, source="elsewhere.yaml"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(opcache, "SOURCE_ROOT", tmp_path / "src")
    opcache.code_version.cache_clear()
    first = opcache.code_version()
    (tmp_path / "src" / "m.py").write_text("x = 2\n")  # the model changed: its old results go unread
    opcache.code_version.cache_clear()
    assert opcache.code_version() != first
    opcache.code_version.cache_clear()


def test_the_step_model_reads_parts_simulated_by_an_earlier_process(cache_dir, h200, monkeypatch):
    first = steps.StepModel(TINY, h200)
    expected = first.step_s(3, 3 * 100, 120, [(40, 0)])
    cache = opcache.cache_for(h200)
    assert cache.values  # the parts went to disk

    def no_simulation(ops, system):
        raise AssertionError("simulated a part the cache holds")

    monkeypatch.setattr(steps, "ops_time_s", no_simulation)
    later = steps.StepModel(TINY, h200)  # a fresh memo, as in a new process
    assert later.step_s(3, 3 * 100, 120, [(40, 0)]) == expected


def test_no_cache_neither_reads_nor_writes(cache_dir, h200):
    opcache.set_enabled(False)
    assert opcache.cache_for(h200) is None
    steps.StepModel(TINY, h200).step_s(2, 200, 100)
    assert not cache_dir.exists()


# --- request fields of a trace ---


def test_a_trace_states_limits_prefixes_and_acceptance(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text(
        "arrival_s,prompt_tokens,output_tokens,max_tokens,prefix_id,prefix_tokens,acceptance\n"
        "0.5,100,10,64,3,80,0.7\n"
        "0.25,50,5,,,,\n"
    )
    r = load_trace(str(csv))  # sorted by arrival: the second line first
    assert r.max_tokens.tolist() == [0, 64] and r.prefix_id.tolist() == [-1, 3]
    assert r.prefix_tokens.tolist() == [0, 80] and np.isnan(r.acceptance[0]) and r.acceptance[1] == 0.7
    assert r.acceptance_or(0.5).tolist() == [0.5, 0.7]
    plain = tmp_path / "p.csv"
    plain.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,100,10\n0.25,50,5\n")
    assert load_trace(str(plain)).fields is None  # nothing stated: the digest of before
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"arrival_s": 0, "prompt_tokens": 9, "output_tokens": 2, "prefix_id": 1, "prefix_tokens": 9}\n')
    assert load_trace(str(jl)).prefix_tokens.tolist() == [9]


def test_bad_request_fields_are_all_reported(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "arrival_s,prompt_tokens,output_tokens,max_tokens,prefix_id,prefix_tokens,acceptance\n"
        "0,100,10,5,,,\n"
        "1,100,10,,2,,\n"
        "2,100,10,,2,101,1.5\n"
    )
    with pytest.raises(ConfigError) as err:
        load_trace(str(bad))
    msgs = [str(p) for p in err.value.problems]
    assert f"{bad}:2: max_tokens: expected a whole number >= output_tokens (10) (got '5')" in msgs
    assert f"{bad}:3: prefix_tokens: give prefix_id and prefix_tokens together" in msgs
    assert f"{bad}:4: prefix_tokens: expected a whole number from 0 to prompt_tokens (100) (got '101')" in msgs
    assert f"{bad}:4: acceptance: expected a rate from 0 to 1 (got '1.5')" in msgs


# --- the gap histogram ---


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e-5, 10.0, allow_nan=False), min_size=1, max_size=300))
def test_histogram_percentiles_are_within_half_a_bin(gaps):
    h = GapHistogram()
    for g in gaps:
        h.add(g)
    exact = np.percentile(gaps, [50, 90, 99])
    got = h.percentiles([50, 90, 99])
    # a bin is 10^(1/5000): 0.046%; interpolating between two ranks stays within it too
    assert got == pytest.approx(list(exact), rel=4.7e-4)
    assert h.mean_s == pytest.approx(np.mean(gaps), rel=1e-12) and h.count == len(gaps)


def test_histogram_weights_and_merges():
    a, b = GapHistogram(), GapHistogram()
    a.add(0.5, 3)
    b.add_many(np.array([0.25, 2.0]), np.array([1, 0]))
    a.merge(b)
    assert a.count == 4 and a.mean_s == pytest.approx((3 * 0.5 + 0.25) / 4)
    assert a.percentiles([0, 100]) == [0.25, 0.5]


# --- the chip file's host link ---


def test_a_bad_host_link_is_reported_at_its_line(tmp_path):
    with open(load_system("h200")[0].source) as f:
        lines = f.read().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("bandwidth: 55 GB/s"))
    lines[at] = "  bandwidth: 55 GB              # a size, not a rate"
    bad = tmp_path / "h200_bad.yaml"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_system(str(bad))
    msgs = [str(p) for p in err.value.problems]
    assert any(m.startswith(f"{bad}:{at + 1}: host_link.bandwidth: unit 'GB' is bytes") for m in msgs), msgs


def test_serving_gives_the_same_bytes_from_the_cache_and_without_the_jit(tmp_path):
    """A busy stream (preemptions, decode runs, shared prefixes) served three times: simulating the
    step shapes, reading them from the disk cache, and with the serving kernels run as Python."""
    import os
    import subprocess
    import sys

    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(
        "name: tiny\nmodel: {layers: 2, hidden: 512, heads: 8, kv_heads: 2, head_dim: 64, ffn: 1024, vocab: 1000}\n"
        "dtypes: {weights: bf16, activations: bf16, kv_cache: bf16}\nscenario: {batch: 1, prompt_tokens: 128, output_tokens: 16}\n"
    )
    args = ["--workload", str(tiny), "--requests", "200", "--rate", "20000", "--prompt", "uniform:16:256"]
    args += ["--generate", "uniform:1:64", "--kv-blocks", "120", "--shared-prefix", "32", "--prefix-groups", "3"]

    def served(name: str, jit: bool) -> bytes:
        out = tmp_path / f"{name}.json"
        env = {**os.environ, "ARCHSIM_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_DISABLE_JIT": "0" if jit else "1"}
        cmd = [sys.executable, "-m", "archsim", "serve", *args, "--json", str(out), "--quiet"]
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
        return out.read_bytes()

    cold = served("cold", jit=True)
    assert json.loads(cold)["preemptions"] > 0 and json.loads(cold)["cached_tokens"] > 0
    assert served("warm", jit=True) == cold
    assert served("python", jit=False) == cold
