"""Standard output that cannot be written (archsim/cli.py): closed before the start, a full disk,
a reader that left. The command still writes every file it was asked for, then ends with one
line on stderr and exit 1, never a traceback; each case in a process of its own, as a shell
runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--prompt", "16", "--generate", "3", "--quiet"]


def _archsim(argv: list[str], stdout: str, cwd: Path) -> subprocess.CompletedProcess:
    """`archsim ARGV` with stdout closed (`>&-`), on /dev/full, or a pipe whose reader has left."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "archsim", *argv]
    if stdout == "closed":
        return subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", *cmd], stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, timeout=120
        )
    if stdout == "full":
        with open("/dev/full", "w") as full:
            return subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, timeout=120)
    read, write = os.pipe()
    os.close(read)  # the reader left before the first line
    try:
        return subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env, timeout=120)
    finally:
        os.close(write)


def _ended_in_one_line(done: subprocess.CompletedProcess, how: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("archsim:")]
    assert len(lines) == 1 and lines[0].startswith(f"archsim: error: stdout{how}"), done.stderr


HOW = {"closed": " is closed", "full": ": No space left on device", "pipe": ": its reader left"}
needs_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


@pytest.mark.parametrize("stdout", ["closed", pytest.param("full", marks=needs_full), "pipe"])
def test_run_writes_its_files_whatever_becomes_of_stdout(tmp_path, stdout):
    done = _archsim(["run", *SMALL, "--json", "r.json", "--csv", "r.csv", "--trace-out", "t.json"], stdout, tmp_path)
    _ended_in_one_line(done, HOW[stdout])
    assert json.loads((tmp_path / "r.json").read_text())["ttft_s"] > 0
    assert (tmp_path / "r.csv").read_text().startswith("phase,op,")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


@pytest.mark.parametrize("stdout", ["closed", "pipe"])
def test_a_document_on_stdout_and_its_file(tmp_path, stdout):
    done = _archsim(["run", *SMALL, "--format", "json", "--json", "r.json"], stdout, tmp_path)
    _ended_in_one_line(done, HOW[stdout])
    assert json.loads((tmp_path / "r.json").read_text())["ttft_s"] > 0


@pytest.mark.parametrize("stdout", ["closed", "pipe"])
def test_a_command_without_files_says_so_in_one_line(tmp_path, stdout):
    _ended_in_one_line(_archsim(["list"], stdout, tmp_path), HOW[stdout])


def test_a_refusal_keeps_its_exit_code_and_its_message(tmp_path):
    done = _archsim(["run", "--hw", "no_such_chip"], "closed", tmp_path)
    assert done.returncode == 2 and "no_such_chip" in done.stderr and "Traceback" not in done.stderr


def test_stdout_closed_never_lends_its_descriptor_to_a_file(tmp_path):
    """With descriptor 1 closed, the first file archsim opens would be descriptor 1, and what is
    printed would land in it: the descriptor is held by /dev/null from the start."""
    done = _archsim(["run", *SMALL, "--json", "r.json"], "closed", tmp_path)
    text = (tmp_path / "r.json").read_text()
    assert json.loads(text) and "time to first token" not in text and done.returncode == 1


def test_a_guarded_stream_drops_what_follows_a_failure(capsys):
    """In process: the first failing write is kept, the rest dropped; `main` ends with 1."""
    from archsim import cli

    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

        def fileno(self):
            raise ValueError("no descriptor")

    g = cli._Guarded(Full(), "stdout")
    assert g.write("abc") == 3 and g.failure == "stdout: No space left on device"
    assert g.write("more") == 4 and not g.isatty()
    closed = cli._Guarded(None, "stdout")
    closed.write("x")
    assert closed.failure == "stdout is closed"
    with pytest.raises(OSError):
        closed.fileno()


def test_a_stream_is_cut_fine_enough_to_pipeline_where_sram_is_large():
    from dataclasses import replace

    from archsim.compiler.streaming import STREAM_ENTRY_MIN_BYTES, stream_entry_bytes
    from archsim.config.loader import load_system

    h200 = load_system("h200")[0].chip
    # a GPU: a quarter of its 228 KiB of shared memory, 58,368 B, under the 64 KiB floor, whatever the chunk
    assert stream_entry_bytes(h200, 8 << 20) == stream_entry_bytes(h200, 100e3) == 233472 / 4
    big = replace(h200, core=replace(h200.core, sram=replace(h200.core.sram, capacity_bytes=16 << 20)))
    # 16 MiB of SRAM: an 8 MiB chunk in eighths of 1 MiB (a quarter, 4 MiB, would leave it 2 entries);
    # a 40 GB chunk in quarters of SRAM; a 256 KiB chunk in entries of the 64 KiB floor, not 32 KiB
    assert stream_entry_bytes(big, 8 << 20) == 1 << 20
    assert stream_entry_bytes(big, 40e9) == 4 << 20
    assert stream_entry_bytes(big, 256 << 10) == STREAM_ENTRY_MIN_BYTES == 64 << 10
    assert stream_entry_bytes(big, 0.0) == 4 << 20  # a row-wise kernel, no entry loaded ahead: a quarter
