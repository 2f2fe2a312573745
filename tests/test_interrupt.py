"""Ctrl-C: `archsim run` stops with exit code 130 and no traceback, and an interrupt during the
decode loop still prints (and writes as JSON) what was simulated so far.

A child may also end killed by SIGINT (return code -2, which a shell reports as 130): CPython
does that when the interrupt landed inside an import of a C extension, even though archsim
caught it and said so."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archsim import stopping
from archsim.cli import _CtrlC, main

ROOT = Path(__file__).resolve().parents[1]
# about 6 s of CPU on a fast host, three times the 2 s the test waits (4,096 generated tokens
# took 1.9 s once the decode loop got faster, and the run could end before the signal)
LONG_RUN = ["run", "--batch", "16", "--prompt", "8192", "--generate", "24576", "--kv-stride", "1", "--quiet"]
INTERRUPTED = (130, -signal.SIGINT)
LONG_DECODE = ["run", "--batch", "8", "--prompt", "256", "--generate", "16384", "--kv-stride", "1", "--quiet"]

# `archsim run` in a child that presses Ctrl-C on itself (a real SIGINT) at its 50th decode
# attention sample: in Python code, so the interrupt always lands in the decode loop. (Sent from
# outside at a random moment it can land inside a Numba kernel; see the robustness report.)
IN_DECODE = """
import os, signal, sys
import archsim.runner.generation as generation
from archsim.cli import main
sample = generation._attention_time
calls = []
def pressing_ctrl_c(*args, **kwargs):
    calls.append(1)
    if len(calls) == 50:
        os.kill(os.getpid(), signal.SIGINT)
    return sample(*args, **kwargs)
generation._attention_time = pressing_ctrl_c
sys.exit(main(sys.argv[1:]))
"""


def _child(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_ctrl_c_two_seconds_in_exits_130_without_traceback():
    proc = _child([sys.executable, "-m", "archsim", *LONG_RUN])
    time.sleep(2.0)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in INTERRUPTED, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "interrupted" in out + err


def test_ctrl_c_in_the_decode_loop_summarises_what_was_simulated(tmp_path):
    out_json = tmp_path / "partial.json"
    proc = _child([sys.executable, "-c", IN_DECODE, *LONG_DECODE, "--json", str(out_json)])
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "interrupted" in out and "49 decode steps simulated" in out
    data = json.loads(out_json.read_text())
    assert data["interrupted"] is True and data["ttft_s"] > 0
    assert len(data["decode_steps"]["time_s"]) == 49


def test_ctrl_c_inside_a_numba_kernel_is_an_interrupt_not_a_bug(monkeypatch, capsys):
    """Numba reports a KeyboardInterrupt that arrived inside a compiled kernel as SystemError."""
    import archsim.commands.list as listing

    def interrupted_in_kernel(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ctrl_c:
            raise SystemError("CPUDispatcher(simulate_phase) returned a result with an exception set") from ctrl_c

    monkeypatch.setattr(listing, "run", interrupted_in_kernel)
    assert main(["list"]) == 130
    assert capsys.readouterr().err == "archsim: interrupted\n"


# A KeyboardInterrupt raised in a finalizer is ignored by Python and reported to the unraisable
# hook; archsim delivers it again to the main thread, which must then stop. Delivered from the
# hook itself it ran the handler inside the hook, whose exceptions are ignored too: lost again.
SWALLOWED = """
import time

import pytest
from archsim.cli import _CtrlC
_CtrlC().install()
class Finalizer:
    def __del__(self):
        raise KeyboardInterrupt
try:
    Finalizer()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sum(range(1000))
    print("lost")
except KeyboardInterrupt:
    print("delivered")
"""


def test_an_interrupt_a_finalizer_swallowed_reaches_the_main_thread():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SWALLOWED], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == "delivered", out.stderr


def test_an_interrupt_owed_to_a_run_that_ended_is_not_delivered_to_its_caller():
    # the finalizer's interrupt is owed, then the run ends (restore) before it is delivered: the
    # caller (a Python session, a test) must not receive it
    code = (
        SWALLOWED.replace("_CtrlC().install()", "c = _CtrlC().install()")
        .replace("    Finalizer()\n", "    Finalizer()\n    c.restore()\n")
        .replace("+ 20", "+ 2")
    )  # long past the 10 ms the delivery waits
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == "lost", out.stderr


def test_a_kernel_stopped_early_is_an_interrupt_once():
    # the flag set (a kernel may have returned early): KeyboardInterrupt, and the flag cleared so
    # that what the run computes on its way out (its summary) runs in full
    stopping.request()
    with pytest.raises(KeyboardInterrupt):
        stopping.check()
    assert not stopping.requested()
    stopping.check()  # nothing asked: nothing raised


def test_the_handler_clears_the_flag_the_watchdog_set():
    ctrl_c = _CtrlC()
    stopping.request()
    with pytest.raises(KeyboardInterrupt):
        ctrl_c.on_signal(signal.SIGTERM, None)
    assert not stopping.requested() and ctrl_c.handled.is_set() and ctrl_c.exit_code() == 143


# A signal that lands while a compiled kernel runs reaches Python only when the kernel returns.
# The command line's watchdog thread (cli._CtrlC.watchdog), woken by the signal, asks the long
# kernels to return (archsim/stopping.py), so the command stops as it does between kernels: its
# one-line summary, the signal's exit code, within a second. (Where a kernel did not return, the
# watchdog would end the process STOP_WITHIN_S later with "(inside a compiled kernel)".)
#
# Each child is the command line (`console_main`, as the `archsim` script runs it) with the
# command's first call of one kernel made hostile-but-valid: the kernel is first called on a
# small input (its compiled code loaded), the child makes an input that keeps it busy for many
# seconds, says "inside", calls it on that, and writes the moment it returned to a file. The parent sends
# the signal once the child is inside that call.
KERNEL_CHILD = """
import os, sys, time
import numpy as np
{setup}
RETURNED = sys.argv.pop(1)  # where the moment the long call returned is written
real = getattr(home, NAME)
calls = []
def hostile(*args):
    calls.append(1)
    if len(calls) != AT:
        return real(*args)
    if loaded is not None:
        real(*loaded(args))
    big = long(args)
    os.write(1, b"inside\\n")
    try:
        return real(*big)
    finally:
        with open(RETURNED, "w") as f:
            f.write(repr(time.monotonic()))
setattr(home, NAME, hostile)
from archsim.cli import console_main
sys.exit(console_main())
"""

# the L2 walk of 300,000 waves of fresh panels (one A and one B of 1 B each) with room for half
# of them: each wave after the first half sums its stack distances back 150,000 waves, 2.2e10
# additions (about 20 s), in the size check of the 32 x 32 systolic array
L2_WALK = """
import archsim.compiler.l2reuse as home
NAME, AT = "_walk_waves", 1
def walk(n, stop):
    t = np.arange(n, dtype=np.int64)
    one = np.ones(n, np.int64)
    return t, n + t, one, one, one, t, n, 2 * n, np.array([1.0, 1.0, 1.0, 1.0, n]), stop
def loaded(args):
    return walk(3000, args[-1])
def long(args):
    return walk(300_000, args[-1])
"""
L2_WALK_COMMAND = [
    "run",
    "--hw",
    "scalesim_os_32x32",
    "--workload",
    "llama3_8b",
    "--batch",
    "64",
    "--prompt",
    "1024",
    "--quiet",
]

# the event loop over 1,024 cores of 4,000 entries each (their flows shared at every event:
# about 1 us an entry, 4 s and more), on the memory of the chip of a GEMM
EVENT_LOOP = """
import archsim.engine.simulate as home
from archsim.program import Phase
NAME, AT = "simulate_phase", 1
def phase(n, cores, args):
    z = np.zeros(n * cores)
    starts = np.arange(cores + 1, dtype=np.int64) * n
    cycles = np.full(n * cores, 100, np.int64)
    p = Phase(starts, np.ones(cores, np.int64), z + 4096.0, z, cycles, z, z, z + 1.0, 4)
    return starts, p.core_weight, home.phase_entries(p), cycles, 4, args[5], False, args[-1]
def loaded(args):
    return phase(1000, 4, args)
def long(args):
    return phase(4000, 1024, args)
"""
EVENT_LOOP_COMMAND = ["op", "gemm", "--hw", "scalesim_ws_32x32", "--M", "1024", "--K", "1024", "--N", "1024"]

# the serving loop of a trace of 200,000 requests, at its 30th step: the serving kernels are
# called once a step, each over the running requests (at most MAX_BATCH, milliseconds), so the
# loop returns to Python between them and polls nothing; the signal lands in one or between two
SERVING = """
import archsim.serving.stepping as home
NAME, AT, loaded = "apply_tokens", 30, None
def long(args):
    return args
"""
SERVING_COMMAND = ["serve", "--requests", "200000", "--rate", "100", "--quiet", "--no-cache"]

KERNELS = {
    "l2-walk": (L2_WALK, L2_WALK_COMMAND),
    "event-loop": (EVENT_LOOP, EVENT_LOOP_COMMAND),
    "serving": (SERVING, SERVING_COMMAND),
}
SUMMARY = {signal.SIGINT: "archsim: interrupted\n", signal.SIGTERM: "archsim: stopped by SIGTERM\n"}


@pytest.fixture(scope="module")
def compiled_ahead():
    """Whether the module compiled ahead of time is there (built now if it was not)."""
    from archsim import aot

    return aot.load(build=True) is not None


@pytest.mark.parametrize(
    "kernel, signum, code, ahead",
    [
        ("l2-walk", signal.SIGINT, 130, True),
        ("l2-walk", signal.SIGTERM, 143, True),
        ("l2-walk", signal.SIGTERM, 143, False),
        ("event-loop", signal.SIGINT, 130, True),
        ("event-loop", signal.SIGTERM, 143, True),
        ("event-loop", signal.SIGINT, 130, False),
        ("serving", signal.SIGINT, 130, True),
        ("serving", signal.SIGTERM, 143, False),
    ],
    ids=[
        "l2-walk-int",
        "l2-walk-term",
        "l2-walk-term-jit",
        "event-loop-int",
        "event-loop-term",
        "event-loop-int-jit",
        "serving-int",
        "serving-term-jit",
    ],
)
def test_a_signal_inside_a_long_compiled_kernel_stops_the_command_within_a_second(
    kernel, signum, code, ahead, compiled_ahead, tmp_path
):
    # the module compiled ahead of time (archsim/aot.py) and Numba's JIT (ARCHSIM_AOT=0) alike
    if ahead and not compiled_ahead:
        pytest.skip("no module compiled ahead of time on this machine (no C compiler)")
    setup, command = KERNELS[kernel]
    returned = tmp_path / "returned"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", ARCHSIM_NO_CACHE="1")
    env["ARCHSIM_AOT"] = "1" if ahead else "0"
    proc = subprocess.Popen(
        [sys.executable, "-c", KERNEL_CHILD.format(setup=setup), str(returned), *command],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline().strip()
        assert line == "inside", proc.communicate(timeout=60)[1]
        time.sleep(0.3)  # well inside the long call (seconds)
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    took = time.monotonic() - sent
    assert proc.returncode == code, err
    assert err == SUMMARY[signum], err  # the command's own summary, not the watchdog's, no traceback
    assert "Traceback" not in out
    kernel_took = float(returned.read_text()) - sent
    assert kernel_took < 1.0, kernel_took  # the kernel's own latency (a few milliseconds)
    assert took < 1.0 + 1.0  # the whole process: slack for a loaded machine


@pytest.mark.parametrize(
    "argv, signum, code",
    [
        ([*LONG_RUN, "--no-cache"], signal.SIGTERM, 143),  # read from the cache, it may end within 1.5 s
        (["serve", "--requests", "100000", "--rate", "100", "--quiet", "--no-cache"], signal.SIGINT, 130),
        (["sweep", "h200_halton_1000", "--workers", "1", "--quiet", "--no-cache"], signal.SIGTERM, 143),
        (["validate", "all", "--quiet"], signal.SIGINT, 130),
    ],
    ids=["run", "serve", "sweep", "validate"],
)
def test_each_long_command_stops_within_a_second(argv, signum, code, tmp_path):
    if argv[0] == "sweep":
        argv = [*argv, "--out", str(tmp_path / "sweep")]
    proc = _child([sys.executable, "-m", "archsim", *argv])
    time.sleep(1.5)  # past the imports, in the work
    assert proc.poll() is None, "the command ended before it could be stopped"
    sent = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err + out
    # the command's own summary (a run in its decode loop tabulates the steps done on stdout), not
    # the watchdog's line
    assert "inside a compiled kernel" not in err and (err == SUMMARY[signum] or "interrupted" in out)
    assert time.monotonic() - sent < 1.0 + 0.5  # slack for a loaded machine
