"""The hostile-input harness judges runs right: each kind of misbehaviour, played by a stand-in
for archsim's main in a forked child, gets its verdict (and good behaviour gets none)."""

import os
import signal
import sys
import time

import pytest
from test_hostile import _load, hostile

hostile_props = _load("hostile_props")

Case, Expect, Prop, Verdict = hostile.Case, hostile.Expect, hostile.Prop, hostile.Verdict


def _hangs(argv):
    time.sleep(60)
    return 0


def _raises(argv):
    raise RuntimeError("boom")


def _internal(argv):
    print("archsim: internal error: ValueError: x (a bug in archsim)", file=sys.stderr)
    return 1


def _allocates(argv):
    blocks = [bytearray(256 << 20) for _ in range(64)]  # 16 GiB, past the case's limit
    return len(blocks)


def _escapes(argv):
    print("chip \x1b]0;owned\x07 name")
    return 0


def _echoes(argv):
    print("x.yaml:1: must be a mapping (got 'root:SECRET-1')", file=sys.stderr)
    return 2


def _runs(argv):
    print("ok")
    return 0


def _refuses_vaguely(argv):
    print("archsim: error: something is wrong", file=sys.stderr)
    return 2


def _refuses_located(argv):
    print("hw.yaml:3: clock: must be at least 1 MHz (got '1 Hz')", file=sys.stderr)
    return 2


def _segfaults(argv):
    os.kill(os.getpid(), signal.SIGSEGV)
    return 0


def _leaves_temp(argv):
    open(".o.json.1234.tmp", "w").close()
    return 0


@pytest.mark.parametrize(
    "case, verdict",
    [
        (Case("t/hang", (), target=_hangs, timeout_s=1), Verdict.HANG),
        (Case("t/traceback", (), target=_raises), Verdict.TRACEBACK),
        (Case("t/internal", (), target=_internal), Verdict.INTERNAL),
        (Case("t/memory", (), target=_allocates, memory_bytes=512 << 20), Verdict.MEMORY),
        (Case("t/escape", (), target=_escapes), Verdict.SECURITY),
        (Case("t/echo", (), target=_echoes, secret="SECRET-1"), Verdict.SECURITY),
        (Case("t/ran-where-refuse", (), target=_runs, expect=Expect.REFUSE), Verdict.WRONG),
        (Case("t/refused-where-run", (), target=_refuses_located, expect=Expect.RUN), Verdict.WRONG),
        (Case("t/unlocated", (), target=_refuses_vaguely, where="hw.yaml"), Verdict.UNLOCATED),
        (Case("t/crash", (), target=_segfaults), Verdict.CRASH),
        (
            Case(
                "t/temp-left",
                (),
                target=_leaves_temp,
                props=(Prop("no temp", hostile_props.no_temp_files(), Verdict.DATA),),
            ),
            Verdict.DATA,
        ),
        (Case("t/located", (), target=_refuses_located, where="hw.yaml", expect=Expect.REFUSE), Verdict.OK),
        (Case("t/runs", (), target=_runs, expect=Expect.RUN), Verdict.OK),
    ],
    ids=lambda v: v.id if isinstance(v, Case) else v.value,
)
def test_each_misbehaviour_gets_its_verdict(case, verdict):
    (result,) = hostile.run_cases([case], workers=1)
    assert result.verdict is verdict, result.why


def _stops_on_ctrl_c(argv):
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        return 130
    return 0


def _ignores_ctrl_c(argv):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(60)
    return 0


def test_a_stop_signal_must_end_the_run_with_its_exit_code():
    stops = Case("t/stops", (), target=_stops_on_ctrl_c, expect=Expect.STOP, send=(0.3, signal.SIGINT), timeout_s=5)
    ignores = Case("t/ignores", (), target=_ignores_ctrl_c, expect=Expect.STOP, send=(0.3, signal.SIGINT), timeout_s=2)
    by_id = {r.case.id: r for r in hostile.run_cases([stops, ignores], workers=2)}
    assert by_id["t/stops"].verdict is Verdict.OK and by_id["t/stops"].outcome.rc == 130
    assert by_id["t/ignores"].verdict is Verdict.HANG
