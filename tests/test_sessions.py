"""Multi-turn sessions in serving: closed-loop arrivals (a turn arrives its think and tool time
after the last one's last token), context reuse through the prefix cache, the session metrics,
the generator and the session trace format. Expectations are derived by hand in the comments;
the two-layer model keeps the steps cheap."""

import json
from dataclasses import replace

import numpy as np
import pytest
from test_serving import TINY

from archsim.cli import main
from archsim.errors import ConfigError
from archsim.runner.steps import StepModel
from archsim.serving.arrivals import parse_length
from archsim.serving.engine import simulate_instance
from archsim.serving.instance import Instance
from archsim.serving.requests import load_trace, make_requests, session_requests
from archsim.serving.scheduler import Policy, SchedulerConfig
from archsim.serving.session_gen import GapDist, GapKind, SessionSpec, generate_sessions, parse_gap
from archsim.serving.sessions import Turn
from archsim.serving.setup import ServeSetup, ServeSetupError
from archsim.serving.simulate import serve

# A chat of two turns: 40 new prompt tokens and 9 out, then, 2 s after its last token, 8 new
# tokens and 4 out. Turn 1's prompt is the whole context: 40 + 9 + 8 = 57 tokens, of which the
# first 40 + 9 = 49 are turn 0's (its prefix).
TWO_TURNS = [[Turn(40, 9), Turn(8, 4, think_s=2.0)]]


def _two_turns(h200, think_s: float = 2.0, caching: bool = True):
    reqs = session_requests([0.0], [[Turn(40, 9), Turn(8, 4, think_s=think_s)]])
    setup = ServeSetup(TINY, h200, resolution=0)
    if not caching:
        setup = replace(setup, scheduler=replace(setup.scheduler, prefix_caching=False))
    return reqs, serve(reqs, setup)


def test_a_turn_states_the_whole_context_as_its_prompt_and_prefix():
    reqs = session_requests([0.0], TWO_TURNS)
    assert reqs.prompt_tokens.tolist() == [40, 57]
    assert reqs.prefix_id.tolist() == [0, 0] and reqs.prefix_tokens.tolist() == [0, 49]


def test_the_second_turn_arrives_think_time_after_the_first_ends_and_finds_its_context(h200):
    _, res = _two_turns(h200)
    t = res.times
    # closed loop: turn 1 arrives at turn 0's last token + 2 s, to the bit
    assert t.arrival_s[0] == 0.0 and t.arrival_s[1] == t.finish_s[0] + 2.0
    exact = StepModel(TINY, h200, resolution=0)
    # turn 0 computes its 40 prompt tokens, then 8 decodes: KV of 40 + 8 = 48 tokens, three full
    # blocks of 16 keyed (0, 0..2) (its 9th token is emitted, never computed). Turn 1 finds
    # min(49, 57 - 1) // 16 = 3 blocks, 48 tokens, and computes the other 57 - 48 = 9
    assert t.ttft_s[0] == pytest.approx(exact.step_s(0, 0, 0, [(40, 0)]), rel=1e-12)
    assert t.ttft_s[1] == pytest.approx(exact.step_s(0, 0, 0, [(9, 48)]), rel=1e-12)
    sm = res.session_metrics()
    assert sm is not None and (sm.sessions, sm.turns) == (1, 2)
    assert sm.context_tokens == 49 and sm.reused_tokens == 48 and sm.context_hit_rate == pytest.approx(48 / 49)
    assert res.metrics().cached_tokens == 48
    assert sm.duration_s.mean == t.finish_s[1] - 0.0 and sm.think_s == 2.0 and sm.tool_s == 0.0
    assert [b.turn for b in sm.ttft_by_turn] == [0, 1]
    assert sm.ttft_by_turn[1].ttft_s.p50 == pytest.approx(t.ttft_s[1], rel=1e-12)


def test_without_the_prefix_cache_a_turn_computes_its_whole_context(h200):
    _, res = _two_turns(h200, caching=False)
    exact = StepModel(TINY, h200, resolution=0)
    assert res.times.ttft_s[1] == pytest.approx(exact.step_s(0, 0, 0, [(57, 0)]), rel=1e-12)
    assert res.session_metrics().context_hit_rate == 0.0


def test_a_longer_think_time_delays_the_next_turn_and_leaves_its_compute_alone(h200):
    _, quick = _two_turns(h200, 2.0)
    _, slow = _two_turns(h200, 7.0)
    # turn 0 is the same run; turn 1 arrives 5 s later and, alone either way, takes as long
    assert slow.times.finish_s[0] == quick.times.finish_s[0]
    assert slow.times.arrival_s[1] == quick.times.finish_s[0] + 7.0
    assert slow.times.arrival_s[1] - quick.times.arrival_s[1] == pytest.approx(5.0, rel=1e-12)
    assert slow.times.ttft_s[1] == pytest.approx(quick.times.ttft_s[1], rel=1e-9)
    assert slow.times.e2e_s[1] == pytest.approx(quick.times.e2e_s[1], rel=1e-9)
    a, b = quick.instances[0].result, slow.instances[0].result
    assert a.computed_tokens == b.computed_tokens and a.steps == b.steps
    assert slow.session_metrics().duration_s.mean == pytest.approx(quick.session_metrics().duration_s.mean + 5.0)


def test_the_pool_evicts_a_thinking_sessions_cached_context_when_another_needs_it(h200):
    # pool of 8 blocks. Session A's turn 0 leaves its 3 keyed blocks cached, unreferenced, so
    # counted free. Session B (arriving at 1 s, while A thinks) holds 100 + 2 - 1 = 101 tokens:
    # 7 blocks, of which 8 - 3 = 5 are empty: 2 cached ones are evicted, A's tail first (its
    # blocks were released tail first: (0, 2), then (0, 1)). A's turn 1 finds (0, 0) alone:
    # 16 tokens, and computes 57 - 16 = 41
    reqs = session_requests([0.0, 1.0], [TWO_TURNS[0], [Turn(100, 2)]])
    inst = Instance(StepModel(TINY, h200, resolution=0), SchedulerConfig(), 8)
    r = simulate_instance(reqs, inst)
    exact = StepModel(TINY, h200, resolution=0)
    turn1 = int(np.flatnonzero((reqs.sessions.session == 0) & (reqs.sessions.turn == 1))[0])
    assert r.cached_tokens == 16
    assert r.first_token_s[turn1] - r.arrival_s[turn1] == pytest.approx(exact.step_s(0, 0, 0, [(41, 16)]), rel=1e-12)
    # with room for all (64 blocks) it finds its 48
    roomy = simulate_instance(reqs, replace(inst, pool_blocks=64))
    assert roomy.cached_tokens == 48
    # during A's turn 1 the pool holds its 3 + 1 blocks (57 tokens, then 60 of KV: 4 blocks)
    tl = r.timeline
    during = (tl.start_s >= r.arrival_s[turn1]) & (tl.steps > 0)
    assert tl.kv_blocks[during].max() == 4


def test_generated_sessions_arrive_closed_loop_on_each_instance(h200):
    spec = SessionSpec(
        6, parse_length("uniform:1:4"), parse_length("64"), parse_length("16"), parse_length("8"),
        parse_gap("exponential:1s"), 0.5, parse_gap("500ms"),
    )  # fmt: skip
    reqs = generate_sessions(2.0, spec, seed=3)
    assert reqs.digest() == generate_sessions(2.0, spec, seed=3).digest()
    res = serve(reqs, ServeSetup(TINY, h200, instances=2))
    turns, t = reqs.sessions.take(res.served), res.times
    where = {(s, k): i for i, (s, k) in enumerate(zip(turns.session.tolist(), turns.turn.tolist()))}
    later = 0
    for i, (s, k) in enumerate(zip(turns.session.tolist(), turns.turn.tolist())):
        if k:
            prev = where[(s, k - 1)]
            assert t.arrival_s[i] == t.finish_s[prev] + turns.think_s[i] + turns.tool_s[i]
            assert (turns.think_s[i] == 0) != (turns.tool_s[i] == 0)  # a think time or a tool call
            later += 1
    assert later > 0
    # each session on one instance: its turns find their context there
    assert res.session_metrics().context_hit_rate > 0.5


def test_durations_parse_with_units_and_bare_numbers_are_refused():
    assert parse_gap("5s") == GapDist(GapKind.FIXED, 5.0)
    assert parse_gap("exponential:200ms") == GapDist(GapKind.EXPONENTIAL, 0.2)
    assert parse_gap("uniform:1s:3s") == GapDist(GapKind.UNIFORM, 1.0, 3.0)
    for bad in ("5", "uniform:3s:1s", "gamma:1s", "exponential:1s:2s", "2days"):
        with pytest.raises(ValueError):
            parse_gap(bad)


def test_sessions_are_not_batched_statically_nor_disaggregated(h200):
    reqs = session_requests([0.0], TWO_TURNS)
    setup = ServeSetup(TINY, h200)
    with pytest.raises(ServeSetupError, match="continuous batching"):
        serve(reqs, replace(setup, scheduler=replace(setup.scheduler, policy=Policy.STATIC)))


def test_requests_without_sessions_report_none(h200):
    res = serve(make_requests([0.0, 1.0], [32, 32], [4, 4]), ServeSetup(TINY, h200))
    assert res.sessions is None and res.session_metrics() is None


# --- the trace format ---


def _write(tmp_path, lines: list[str]) -> str:
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_session_trace_reads_interleaved_sessions(tmp_path):
    path = _write(
        tmp_path,
        [
            '{"session": 7, "turn": 0, "start_s": 0.5, "new_tokens": 900, "output_tokens": 120}',
            '{"session": 3, "turn": 0, "start_s": 0, "new_tokens": 100, "output_tokens": 20}',
            '{"session": 7, "turn": 1, "think_s": 4.0, "new_tokens": 60, "output_tokens": 200}',
            '{"session": 7, "turn": 2, "tool_s": 1.5, "new_tokens": 400, "output_tokens": 80}',
        ],
    )
    reqs = load_trace(path)
    # sessions in order of their starts: 3 (at 0) is session 0, 7 (at 0.5) session 1; session 7's
    # prompts: 900, 900 + 120 + 60 = 1,080, 1,080 + 200 + 400 = 1,680
    assert reqs.sessions.session.tolist() == [0, 1, 1, 1] and reqs.sessions.turn.tolist() == [0, 0, 1, 2]
    assert reqs.prompt_tokens.tolist() == [100, 900, 1080, 1680]
    assert reqs.prefix_tokens.tolist() == [0, 0, 1020, 1280]
    assert reqs.sessions.gap_s.tolist() == [0.0, 0.0, 4.0, 1.5]
    assert len(load_trace(path, limit=2)) == 2
    assert reqs.rate_per_s == pytest.approx(1 / 0.5)  # sessions per second, by their starts


def test_bad_session_lines_are_all_reported(tmp_path):
    path = _write(
        tmp_path,
        [
            '{"session": 7, "turn": 0, "start_s": 0.5, "new_tokens": 900, "output_tokens": 120}',
            '{"session": 7, "turn": 2, "think_s": 4.0, "new_tokens": 60, "output_tokens": 200}',
            '{"session": 8, "turn": 0, "think_s": 4.0, "new_tokens": 60, "output_tokens": 200}',
            '{"session": 9, "turn": 0, "start_s": -1, "new_tokens": 0, "output_tokens": 2.5, "prefix_id": 3}',
            '{"session": 7, "turn": 1, "think_s": "5s", "new_tokens": 60, "output_tokens": 200}',
            '{"session": 7, "turn": 1, "new_tokens": 60}',
            "[1, 2]",
            '{"session": 7, "turn": 1, "think_s": 1e9, "new_tokens": 16777000, "output_tokens": 200}',
        ],
    )
    with pytest.raises(ConfigError) as err:
        load_trace(path)
    got = str(err.value).splitlines()
    assert got == [
        f"{path}:2: turn: turn 2 of session 7 follows turn 0; expected turn 1 (turns are listed in order)",
        f"{path}:3: think_s: a first turn takes start_s, not think_s",
        f"{path}:3: start_s: missing: a first turn gives its session's start",
        f"{path}:4: prefix_id: unknown key; expected session, turn, new_tokens, output_tokens, start_s, think_s, tool_s",
        f"{path}:4: new_tokens: expected a whole number from 1 to 16,777,216 (got 0)",
        f"{path}:4: output_tokens: expected a whole number from 1 to 16,777,216 (got 2.5)",
        f"{path}:4: start_s: expected seconds from 0 to 1,000,000,000 (got -1)",
        f"{path}:5: think_s: expected seconds from 0 to 86,400 (got '5s')",
        f"{path}:6: output_tokens: missing",
        f"{path}:7: expected an object with session, turn, new_tokens, output_tokens",
        f"{path}:8: think_s: expected seconds from 0 to 86,400 (got 1000000000.0)",
    ]


def test_a_context_past_the_token_limit_is_refused(tmp_path):
    path = _write(
        tmp_path,
        [
            '{"session": 1, "turn": 0, "start_s": 0, "new_tokens": 16000000, "output_tokens": 700000}',
            '{"session": 1, "turn": 1, "new_tokens": 100000, "output_tokens": 1}',
        ],
    )
    with pytest.raises(ConfigError, match=r":2: new_tokens: the session's context and this turn pass 16,777,216"):
        load_trace(path)


# --- the command line ---


def test_serve_generates_sessions_and_writes_their_metrics(tmp_path, tiny, capsys):
    out = tmp_path / "s.json"
    args = ["serve", "--workload", tiny, "--sessions", "4", "--turns", "3", "--prompt", "256"]
    args += ["--turn-prompt", "32", "--generate", "16", "--think-time", "1s", "--rate", "2"]
    assert main([*args, "--quiet", "--json", str(out)]) == 0
    assert "sessions / turns served" in capsys.readouterr().out
    s = json.loads(out.read_text())["sessions"]
    assert s["sessions"] == 4 and s["turns"] == 12 and [t["turn"] for t in s["ttft_by_turn"]] == [0, 1, 2]
    # turn k > 0 states the previous context: 256 + 16 (turn 1), then 256 + 16 + 32 + 16 (turn 2)
    assert s["context_tokens"] == 4 * (272 + 320)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--think-time", "2s"], "--think-time shape generated sessions: give --sessions N"),
        (["--sessions", "2", "--requests", "5"], "--requests does not apply to --sessions"),
        (["--sessions", "2", "--policy", "static"], "sessions are served by continuous batching"),
    ],
)
def test_session_flags_that_do_not_apply_are_refused(capsys, tiny, args, message):
    assert main(["serve", "--workload", tiny, *args, "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_a_bare_think_time_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--sessions", "2", "--think-time", "5"])
    assert exc.value.code == 2 and "a duration needs its unit" in capsys.readouterr().err


def test_the_api_report_carries_the_session_metrics(tiny):
    import archsim

    reqs = session_requests([0.0, 0.5], [TWO_TURNS[0], [Turn(64, 8), Turn(16, 8, tool_s=1.0)]])
    report = archsim.serve("h200", tiny, reqs)
    assert report.sessions is not None and report.sessions.turns == 4
    assert report.to_dict()["sessions"]["tool_s"] == 1.0
    plain = archsim.serve("h200", tiny, make_requests([0.0], [32], [4]))
    assert plain.sessions is None and "sessions" not in plain.to_dict()
