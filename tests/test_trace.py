"""Chrome trace-event files: fields, one span at a time per track, the step as long as simulated."""

import itertools
import json
from collections import defaultdict

import pytest

from archsim.choose import simulate_op
from archsim.cli import main
from archsim.config.loader import load_system
from archsim.graph.builder import Step
from archsim.graph.model import Phase
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.report.counters import piecewise_rate
from archsim.report.replay import replay_op
from archsim.report.trace import TraceBuilder
from archsim.runner.generation import simulate_step

TOL_US = 2e-3  # timestamps are rounded to 1e-3 us


def check_events(doc: dict) -> list[dict]:
    """Every event has the trace-event fields; spans on one track never overlap. Returns the spans."""
    events = doc["traceEvents"]
    assert events
    for e in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(e), e
        assert e["ph"] in ("X", "C", "M")
        if e["ph"] == "X":
            assert e["dur"] >= 0
    spans = [e for e in events if e["ph"] == "X"]
    by_track = defaultdict(list)
    for e in spans:
        by_track[(e["pid"], e["tid"])].append(e)
    for track in by_track.values():
        track.sort(key=lambda e: e["ts"])
        for a, b in itertools.pairwise(track):
            assert a["ts"] + a["dur"] <= b["ts"] + TOL_US, (a, b)
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all(len(e["args"]) == 1 and min(e["args"].values()) >= 0 for e in counters)
    return spans


def test_run_trace_steps_match_the_simulation(tmp_path):
    trace, result = tmp_path / "t.json", tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--prompt",
                "128",
                "--generate",
                "4",
                "--quiet",
                "--json",
                str(result),
                "--trace-out",
                str(trace),
                "--trace-step",
                "prefill",
                "--trace-step",
                "decode:2",
            ]
        )
        == 0
    )
    doc, run = json.loads(trace.read_text()), json.loads(result.read_text())
    spans = check_events(doc)
    steps = {e["pid"]: e for e in spans if e["tid"] == 1}
    assert len(steps) == 2
    prefill, decode = steps[1], steps[2]
    assert prefill["ts"] == 0 and prefill["dur"] == pytest.approx(run["prefill"]["time_s"] * 1e6, abs=TOL_US)
    # decode:2 starts after the prefill and the first decode step, as in the run
    start_us = (run["ttft_s"] + run["decode_steps"]["time_s"][0]) * 1e6
    assert decode["ts"] == pytest.approx(start_us, abs=TOL_US)
    assert decode["dur"] == pytest.approx(doc["otherData"]["steps"][1]["simulated_time_us"], abs=TOL_US)
    # op spans tile the step exactly: one layer drawn, the other 31 repeats as one span
    ops = sorted((e for e in spans if e["pid"] == 1 and e["tid"] == 2), key=lambda e: e["ts"])
    assert ops[-1]["ts"] + ops[-1]["dur"] == pytest.approx(prefill["dur"], abs=TOL_US * len(ops))
    assert any(e["name"] == "layers 2-32 (as layer 1)" for e in ops)
    assert [e["name"] for e in ops[:3]] == ["embedding", "attn_norm", "qkv"]
    assert any("drawn for one layer" in note for note in doc["otherData"]["notes"])
    # tiles of identical cores are drawn once, labelled with their group
    groups = {e["args"]["cores"] for e in spans if e["tid"] >= 10}
    assert any("identical" in g for g in groups)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"step", "ops", "kernels", "core 0 compute", "core 0 DMA"} <= names
    counters = {(e["name"], *e["args"]) for e in doc["traceEvents"] if e["ph"] == "C"}
    assert {("HBM read", "GB/s"), ("HBM write", "GB/s"), ("matrix units busy", "% of cores")} <= counters
    # counters stay within the chip: HBM reads and writes each under peak, busy cores under 100%,
    # power under the limit to the power manager's estimate of it (choose.play_held sets a
    # kernel's clock from its time estimated at that clock: gate_up here draws 726 W at 1.56 GHz)
    chip = load_system("h200")[0].chip
    peak_gb_s = chip.hbm.peak_bandwidth_bytes_per_s / 1e9
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            unit = next(iter(e["args"]))
            limit = {"GB/s": peak_gb_s, "W": chip.power.limit_w * 1.05}.get(unit, 100.0)
            assert max(e["args"].values()) <= limit * (1 + 1e-6), e


def test_replay_reproduces_the_chosen_program(h200, llama8b):
    """The traced program of each op plays in the cycles simulate_op charged for it."""
    chip = h200.chip
    for op in {r.op for r in simulate_step(llama8b, h200, Step(Phase.PREFILL, 1, 256, 0)).ops}:
        t, rep = simulate_op(op, chip), replay_op(op, chip)
        assert op.kernels * rep.played_cycles + t.overhead_cycles == t.cycles, op.name


def test_large_steps_merge_tiles_and_say_so(h200, llama8b):
    step = simulate_step(llama8b, h200, Step(Phase.PREFILL, 1, 256, 0))
    full = TraceBuilder(h200.chip)
    full.add_step(step, "prefill")
    small = TraceBuilder(h200.chip, event_budget=200)
    small.add_step(step, "prefill")
    doc_full, doc_small = full.document(), small.document()
    assert doc_full["otherData"]["tiles_merged"] == 1
    assert doc_small["otherData"]["tiles_merged"] > 1
    assert any(note.startswith("tiles merged") for note in doc_small["otherData"]["notes"])
    spans_full, spans_small = check_events(doc_full), check_events(doc_small)
    assert len(spans_small) < len(spans_full) / 2
    step_spans = [e for e in spans_small if e["tid"] == 1]
    assert step_spans[0]["dur"] == pytest.approx(step.time_s * 1e6, abs=TOL_US)


def test_op_trace(tmp_path):
    path = tmp_path / "op.json"
    assert (
        main(["op", "gemm", "--M", "512", "--K", "4096", "--N", "4096", "--standalone", "--trace-out", str(path)]) == 0
    )
    doc = json.loads(path.read_text())
    spans = check_events(doc)
    op = next(e for e in spans if e["tid"] == 2)
    kernels = [e for e in spans if e["tid"] == 3]
    assert kernels[0]["name"] == "launch (standalone)"
    assert kernels[-1]["ts"] + kernels[-1]["dur"] == pytest.approx(op["ts"] + op["dur"], abs=TOL_US * len(kernels))
    assert op["dur"] == pytest.approx(op["args"]["time (us)"], abs=TOL_US)


def test_piecewise_rate_by_hand():
    x, v = piecewise_rate([0.0, 5.0], [10.0, 20.0], [1.0, 2.0], 20.0)
    assert x.tolist() == [0.0, 5.0, 10.0, 20.0] and v.tolist() == [1.0, 3.0, 2.0, 0.0]
    x, v = piecewise_rate([0.0, 5.0], [10.0, 20.0], [1.0, 2.0], 20.0, max_points=2)  # binned: same bytes
    assert x.tolist() == [0.0, 10.0, 20.0] and v.tolist() == [2.0, 2.0, 0.0]


def test_bad_trace_step_exits_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["run", "--trace-out", "t.json", "--trace-step", "decode"])
    assert err.value.code == 2
    assert "--trace-step: expected prefill or decode:N" in capsys.readouterr().err
    assert main(["run", "--generate", "3", "--trace-out", "t.json", "--trace-step", "decode:5"]) == 2
    assert "decode:5 is past the last decode step" in capsys.readouterr().err


def test_counters_are_the_engines_rates_and_hold_every_byte(h200):
    """The HBM read counter of a played phase is the engine's shared rate at each event: its
    area is the bytes the phase read from HBM (to the part of a cycle an event is rounded up
    by, under 1%), and it never exceeds the achievable bandwidth."""
    import numpy as np

    from archsim.report.counters import phase_counters

    op = Op(OpKind.GEMM, m=128, k=4096, n=6144, scaling=Scaling.FIXED)
    r = replay_op(op, h200.chip)
    (phase,), (tl,) = r.program.phases, r.timelines
    x, v = phase_counters(phase, tl, h200.chip, True, points=10**6)["HBM read (GB/s)"]
    area = np.sum(v[:-1] * np.diff(x)) / h200.chip.clock_hz * 1e9
    weights = np.repeat(phase.core_weight, np.diff(phase.core_start))
    assert area == pytest.approx(float(np.sum(phase.hbm_bytes * weights)), rel=1e-2)
    assert v.max() <= h200.chip.hbm.peak_bandwidth_bytes_per_s / 1e9
