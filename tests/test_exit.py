"""How an `archsim` process ends (`cli.exit_now`): without the interpreter's teardown, but with
everything a normal exit does that a user can see: its exit code, its output to the last byte,
its files, the `atexit` handlers; and a normal exit wherever another thread still runs."""

import json
import os
import subprocess
import sys
import threading

from archsim.cli import exit_now

# A command line process that registers an atexit handler (as a library would) before archsim
# runs, then ends as the console script does ("now") or through the interpreter's own exit.
CHILD = """
import atexit, sys
from archsim.cli import console_main, main
mark, how = sys.argv[1:3]
atexit.register(lambda: open(mark, "w").write("handler ran"))
sys.argv = ["archsim", *sys.argv[3:]]
raise SystemExit(console_main() if how == "now" else main())
"""


def _child(tmp_path, *argv: str, how: str = "now") -> subprocess.CompletedProcess:
    env = {**os.environ, "ARCHSIM_NO_CACHE": "1"}
    args = [sys.executable, "-c", CHILD, str(tmp_path / f"atexit-{how}.txt"), how, *argv]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)


def test_a_command_keeps_its_output_files_and_atexit_handlers(tmp_path):
    """Standard output is a pipe here, so its buffer holds the table until the flush at exit:
    the output must be that of the interpreter's own exit to the byte, the JSON file whole."""
    out = tmp_path / "op.json"
    gemm = ("op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--json", str(out))
    res, normal = _child(tmp_path, *gemm), _child(tmp_path, *gemm, how="exit")
    assert res.returncode == normal.returncode == 0, res.stderr
    assert res.stdout == normal.stdout and res.stdout.endswith("cores active\n")
    assert json.loads(out.read_text())["cycles"] > 0
    assert (tmp_path / "atexit-now.txt").read_text() == "handler ran"
    assert res.stderr == ""


def test_a_bad_input_still_exits_2_after_the_handlers(tmp_path):
    res = _child(tmp_path, "op", "gemm", "--hw", "h201", "--M", "64", "--K", "64", "--N", "64")
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "h201" in res.stderr
    assert (tmp_path / "atexit-now.txt").read_text() == "handler ran"


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`archsim list | head -1`: the reader closes the pipe after one line."""
    archsim = subprocess.Popen(
        [sys.executable, "-m", "archsim", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert archsim.stdout is not None and archsim.stderr is not None
    archsim.stdout.readline()
    archsim.stdout.close()
    err = archsim.stderr.read().decode()
    assert archsim.wait(timeout=120) in (0, 1)
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_running_thread_gets_the_interpreters_own_exit():
    """A thread that is not a daemon (a user's hook, a Dask client) would be cut off by
    os._exit: the code goes back to the interpreter's exit, which waits for the thread."""
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        assert exit_now(3) == 3
    finally:
        release.set()
        worker.join()


def test_a_daemon_thread_does_not_hold_the_process():
    """Daemon threads (a progress bar's refresher) end with the process either way."""
    code = "import threading, time; from archsim.cli import exit_now\n"
    code += "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    code += "exit_now(4)\nprint('not reached')"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 4 and res.stdout == ""


def test_a_profiled_command_still_reports_its_profile():
    """`python -m cProfile -m archsim ...` prints its statistics after the command returns:
    a process under a profiler ends through the interpreter's own exit."""
    args = [sys.executable, "-m", "cProfile", "-m", "archsim", "op", "gemm", "--M", "64", "--K", "64", "--N", "64"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "function calls" in res.stdout
