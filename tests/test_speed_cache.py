"""What `archsim run` and sweep workers keep in the on-disk op cache (archsim/opcache.py), and
what a command-line process leaves out of its start-up."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_serving import TINY

from archsim import opcache
from archsim.choose import time_op
from archsim.engine.timing import Bound, OpTiming
from archsim.graph.model import Scenario
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.memo import clear_all
from archsim.runner import generation

ROOT = Path(__file__).resolve().parents[1]
SMALL = replace(TINY, scenario=Scenario(2, 96, 40))  # 39 decode steps


def test_a_timing_goes_to_disk_and_back_unchanged(cache_dir, h200):
    timed = time_op(Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED), h200.chip)
    t = timed.timing
    line = json.dumps(opcache.timed_value(t, timed.energy, timed.kernel_power_w))  # as the file holds it
    back, energy, power_w = opcache.timed_from_value(json.loads(line), h200.chip)
    assert back == t and back.bound is t.bound
    assert energy == timed.energy and energy.total_j > 0 and power_w == timed.kernel_power_w
    # every field of the same Python type: an integer count stays an integer, a float a float
    assert all(type(getattr(back, f)) is type(getattr(t, f)) for f in opcache.TIMING_FIELDS)


def test_an_entry_of_another_shape_is_no_timing(cache_dir, h200):
    good = opcache.timing_value(OpTiming(1, 1e-9, 1, 0, 0, 1.0, 2.0, 0.0, 0.0, 2.0, 0.0, 1, 1, Bound.COMPUTE))
    assert opcache.timing_from_value(good) is not None
    assert opcache.timing_from_value(1.5) is None  # a step model's part, not an op's timing
    assert opcache.timing_from_value(good[:-1]) is None  # a field short
    assert opcache.timing_from_value([*good[:13], "spin", *good[14:]]) is None  # no such bound
    assert opcache.timing_from_value([None, *good[1:]]) is None
    assert opcache.timed_from_value(good, h200.chip) is None  # a timing without its energy
    assert opcache.timed_from_value([good, [0.0] * 3, 1.0], h200.chip) is None  # an energy split short


def test_a_later_run_reads_every_op_from_disk(cache_dir, h200, monkeypatch):
    from archsim.runner.energy import run_energy

    first = generation.run_generation(SMALL, h200, kv_stride=8)
    first_energy = run_energy(first, SMALL, h200, 8)
    path = opcache.cache_for_chip(h200.chip).path
    assert path.exists() and path.parent.name == opcache.code_version()

    def no_simulation(op, chip, *args):
        raise AssertionError(f"simulated {op.name}, which the cache holds")

    clear_all()
    opcache._open.cache_clear()  # a fresh process: the file is read again
    monkeypatch.setattr(generation, "time_op", no_simulation)
    later = generation.run_generation(SMALL, h200, kv_stride=8)
    assert later.ttft_s == first.ttft_s and later.tpot_s == first.tpot_s
    np.testing.assert_array_equal(later.decode_step_s, first.decode_step_s)
    assert [r.timing for r in later.prefill.ops] == [r.timing for r in first.prefill.ops]
    later_energy = run_energy(later, SMALL, h200, 8)
    assert later_energy is not None and first_energy is not None
    assert later_energy.energy == first_energy.energy and later_energy.peak_power_w == first_energy.peak_power_w


def test_lines_put_in_a_batch_are_the_lines_put_one_at_a_time(cache_dir, h200, monkeypatch):
    """Inside `batched_writes` a put is read back at once and reaches the file at the block's
    end, one write(2) for all: the same bytes as three puts one at a time. A file that would
    pass MAX_FILE_BYTES takes the lines that keep it within the bound, in order, and no more:
    each line here is {"k":"a","v":1.0} and a newline, 18 bytes, so a bound of 40 takes two."""
    one_by_one = opcache.cache_for_chip(h200.chip)
    for key, value in (("a", 1.0), ("b", [2.0, 3]), ("c", 4)):
        one_by_one.put(key, value)
    expected = one_by_one.path.read_bytes()
    one_by_one.path.unlink()
    opcache._open.cache_clear()
    cache = opcache.cache_for_chip(h200.chip)
    writes = []
    real_write = os.write
    monkeypatch.setattr(opcache.os, "write", lambda fd, data: writes.append(data) or real_write(fd, data))
    with opcache.batched_writes():
        for key, value in (("a", 1.0), ("b", [2.0, 3]), ("c", 4)):
            cache.put(key, value)
        assert cache.get("b") == [2.0, 3] and not cache.path.exists()
    assert cache.path.read_bytes() == expected and len(writes) == 1
    cache.path.unlink()
    opcache._open.cache_clear()
    monkeypatch.setattr(opcache, "MAX_FILE_BYTES", 40)
    full = opcache.cache_for_chip(h200.chip)
    with opcache.batched_writes():
        for key in "abc":
            full.put(key, 1.0)
    assert full.path.read_bytes() == b'{"k":"a","v":1.0}\n{"k":"b","v":1.0}\n' and not full.writable
    assert full.get("c") == 1.0  # kept in memory


def test_an_op_cost_reader_reads_and_writes_the_chips_cache_as_each_call_does(cache_dir, h200, monkeypatch):
    """`op_cost_reader` looks the chip's cache up once: what it gives is `cached_op_cost`'s, put
    where `cached_op_cost` reads it (a fresh process simulates nothing again), and the cache off
    it simulates."""
    op = Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED)
    read = generation.op_cost_reader(h200.chip)
    first = read(op, h200.chip)
    clear_all()
    opcache._open.cache_clear()  # a fresh process: the file is read again

    def no_simulation(op, chip, *args):
        raise AssertionError("simulated an op the cache holds")

    monkeypatch.setattr(generation, "op_cost", no_simulation)
    assert generation.cached_op_cost(op, h200.chip) == first
    opcache.set_enabled(False)
    with pytest.raises(AssertionError, match="simulated"):
        generation.op_cost_reader(h200.chip)(op, h200.chip)


def test_the_cache_is_per_chip_and_per_engine(cache_dir, h200, monkeypatch):
    slower = replace(h200.chip, clock_hz=h200.chip.clock_hz / 2)
    assert opcache.cache_for_chip(slower).path != opcache.cache_for_chip(h200.chip).path
    opcache.code_version.cache_clear()
    compiled = opcache.code_version()
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")  # the kernels as Python never read what Numba computed
    opcache.code_version.cache_clear()
    assert opcache.code_version() != compiled
    monkeypatch.delenv("NUMBA_DISABLE_JIT")
    opcache.code_version.cache_clear()


def test_no_cache_on_run_neither_reads_nor_writes(cache_dir):
    from archsim.cli import main

    try:
        assert main(["run", "--prompt", "64", "--generate", "2", "--no-cache", "--format", "json"]) == 0
        assert not cache_dir.exists()
    finally:
        opcache.set_enabled(True)


def test_sweep_workers_follow_the_sweeps_cache_setting(cache_dir):
    from archsim.sweep.evaluate import Evaluation, evaluate_chunk

    try:
        opcache.set_enabled(False)  # `archsim sweep --no-cache`
        ev = Evaluation((), (), 64, use_cache=opcache.enabled())
        opcache.set_enabled(True)  # a worker process starts with the cache on
        assert evaluate_chunk([], ev)[0] == []
        assert not opcache.enabled()
    finally:
        opcache.set_enabled(True)


def test_a_worker_of_another_archsim_computes_none_of_a_sweeps_points():
    """A Dask worker installed apart may run another archsim; its rows would be another model's
    recorded as this one's, so the chunk fails naming both versions (the sweep then reports it
    lost: rerun to finish), while a worker of the same archsim computes it."""
    from archsim.sweep.evaluate import Evaluation, evaluate_chunk

    ours = opcache.code_version()
    assert evaluate_chunk([], Evaluation((), (), 64, version=ours))[0] == []
    with pytest.raises(RuntimeError, match=f"this worker runs archsim {ours} and the sweep 0.0.1-0123456789abcdef"):
        evaluate_chunk([], Evaluation((), (), 64, version="0.0.1-0123456789abcdef"))


def test_no_cache_is_a_flag_of_run_and_sweep():
    from archsim.cli import build_parser

    for argv in (["run", "--no-cache"], ["sweep", "s.yaml", "--out", "o", "--no-cache"]):
        assert build_parser(argv[0]).parse_args(argv).no_cache


START_UP = """
import json, sys
from archsim import jit
if sys.argv[1] == "cli":
    jit.for_command_line()
if sys.argv[3] == "numba":
    jit.load()  # as a process whose first kernel call was a large one
from archsim.cli import main
main(["op", "gemm", "--M", sys.argv[2], "--K", "4096", "--N", "4096", "--format", "json"])
LATE = ("numba", "scipy.linalg", "archsim.commands.sweep", "rich.progress", "rich.table",
        "archsim.config.workload_schema", "archsim.runner.generation")  # fmt: skip
print(json.dumps(sorted(m for m in LATE if m in sys.modules)))
"""


def _start_up(mode: str, m: int, numba: bool = False) -> tuple[dict, list[str]]:
    """The op's JSON and the late modules a process loaded, on Numba's JIT alone (the kernels
    compiled ahead of time: tests/test_aot.py)."""
    env = {**os.environ, "ARCHSIM_NO_CACHE": "1", "ARCHSIM_AOT": "0"}
    args = [sys.executable, "-c", START_UP, mode, str(m), "numba" if numba else "-"]
    res = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    lines = res.stdout.strip().splitlines()  # the op's JSON document, then the modules loaded
    return json.loads("\n".join(lines[:-1])), json.loads(lines[-1])


def test_a_command_line_process_loads_only_what_its_command_uses():
    """The command line's numba is loaded without scipy.linalg (BLAS, which no kernel calls);
    the op command builds only its own parser, shows no progress into a pipe, and imports
    neither the workload schema, the run's machinery nor rich's tables (0.1 s of its start-up). The op's
    cycles are those of a process that loaded everything. An 8192 x 4096 x 4096 GEMM's kernels
    take far more than jit.INTERPRETED_ELEMENTS elements, so both processes load Numba (the
    kernels compiled ahead of time left out: tests/test_aot.py)."""
    pytest.importorskip("scipy")
    cli_doc, cli_loaded = _start_up("cli", 8192)
    api_doc, api_loaded = _start_up("api", 8192)
    assert cli_doc["cycles"] == api_doc["cycles"] > 0
    assert cli_loaded == ["numba"]
    assert api_loaded == ["numba", "scipy.linalg"]  # numba's own start-up, left alone outside the command line


def test_a_small_op_runs_its_kernels_as_python_to_the_same_cycles():
    """A 64 x 4096 x 4096 GEMM's kernels take fewer elements than jit.INTERPRETED_ELEMENTS: the
    process never loads Numba (0.4-0.5 s of its start-up), and its cycles, stalls and bytes are
    those of a process that had Numba loaded before its first kernel call."""
    python_doc, python_loaded = _start_up("cli", 64)
    numba_doc, numba_loaded = _start_up("cli", 64, numba=True)
    assert python_loaded == [] and numba_loaded == ["numba"]
    assert python_doc == numba_doc and python_doc["cycles"] > 0


def test_the_size_check_ranks_no_raster_and_the_compiler_works_the_shortlist_out_once(cache_dir, h200):
    """The run's size check bounds the entries of every tiling the compiler will try from the
    analytic ranking alone (no L2 walk: the shortlist is not worked out); the choice works it
    out once, and a later process reads it from disk."""
    from archsim.choose import cached_tilings, choose
    from archsim.compiler.gemm import shortlist, shortlist_size
    from archsim.runner.size import gemm_entries

    op = Op(OpKind.GEMM, m=96, k=2048, n=3072, scaling=Scaling.FIXED)
    clear_all()
    gemm_entries(op, h200.chip)
    assert shortlist.cache_info().misses == 0
    programs = choose(op, h200.chip).candidates
    assert shortlist.cache_info().misses == 1
    tilings = cached_tilings(op, h200.chip)
    # and the pick's 96 tiles of 96 x 32 (one wave of the 132 SMs) dealt over 66: pick.py `fills_one_wave`
    assert programs == len(tilings) + 1 >= 3
    tilings.clear()
    shortlist.cache_clear()
    opcache._open.cache_clear()  # a fresh process
    again = cached_tilings(op, h200.chip)
    assert shortlist.cache_info().misses == 0 and again == list(shortlist(op, h200.chip, shortlist_size(op)))


CACHED_RUN = """
import json, sys
from archsim.config import memo
memo.for_command_line()  # as the console script does
from archsim.cli import main
main(["run", "--workload", "llama3_8b", "--batch", "2", "--prompt", "64", "--generate", "4", "--quiet", "--json", sys.argv[1]])
print(json.dumps(["numba" in sys.modules, "pydantic" in sys.modules]))
"""


def test_numba_loads_only_when_a_kernel_runs(tmp_path):
    """A run whose every op is in the op cache calls no kernel, so it never loads Numba; the one
    that filled the cache did, and both report the same result. Its chip and workload were
    validated by the first run (archsim/config/memo.py), so it imports no pydantic either."""
    env = {**os.environ, "ARCHSIM_CACHE_DIR": str(tmp_path / "cache"), "ARCHSIM_AOT": "0"}  # Numba's JIT
    env.pop("ARCHSIM_NO_CACHE", None)
    loaded, docs = [], []
    for i in range(2):
        out = tmp_path / f"run{i}.json"
        res = subprocess.run([sys.executable, "-c", CACHED_RUN, str(out)], env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        loaded.append(json.loads(res.stdout.strip().splitlines()[-1]))
        docs.append(json.loads(out.read_text()))
    assert loaded == [[True, True], [False, False]]
    assert docs[0] == docs[1]


def test_the_kernel_cache_follows_every_file_a_kernel_is_built_from(tmp_path):
    """Numba checks a cached kernel against its own file only; archsim's kernel cache folder is
    named by a digest of the kernel modules and what they import. A change to the fair share
    (engine/sharing.py, called by the event loop in engine/kernels.py) or to the histogram's
    constants (read by serving/kernels.py) must change it; a report module must not."""
    import shutil

    from archsim import kernel_sources

    root = tmp_path / "archsim"
    shutil.copytree(Path(kernel_sources.__file__).resolve().parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    before = kernel_sources.kernel_sources_digest(root)
    assert kernel_sources.kernel_sources_digest(root) == before
    seen = {before}
    for changed, moves in (("engine/sharing.py", True), ("serving/histogram.py", True), ("report/tables.py", False)):
        with open(root / changed, "a") as f:
            f.write("\n# changed\n")
        digest = kernel_sources.kernel_sources_digest(root)
        assert (digest not in seen) is moves, changed
        seen.add(digest)


def test_numba_caches_in_the_kernel_folder_unless_told_otherwise(tmp_path):
    """Without NUMBA_CACHE_DIR, loading Numba points it at $XDG_CACHE_HOME/archsim/numba/<digest>;
    a NUMBA_CACHE_DIR the user set is left as it is."""
    show = "from archsim import jit; jit.load(); import os; print(os.environ['NUMBA_CACHE_DIR'])"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    from archsim import kernel_sources

    got = subprocess.run([sys.executable, "-c", show], env={**env, "XDG_CACHE_HOME": str(tmp_path)},
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert got == str(tmp_path / "archsim" / "numba" / kernel_sources.kernel_sources_digest())
    mine = str(tmp_path / "mine")
    got = subprocess.run([sys.executable, "-c", show], env={**env, "NUMBA_CACHE_DIR": mine},
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert got == mine


def test_keys_and_lines_are_what_repr_and_json_make():
    """Single ops' keys are kept, and lines made by one encoder, with what the plain way makes: a
    key is the digest of the op's repr (`name` and `repeat` take no part in an op's equality but
    show in its repr, and 64 == 64.0 == np.int64(64) and 1 == True while their reprs differ, so
    each is a key of its own); a line is json.dumps's; a timing's NumPy scalars are written as the
    Python numbers they hold, its bound by its name."""
    op = Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED)
    like = [op, op.named("up"), op.named("", repeat=2), replace(op, m=64.0), replace(op, m=np.int64(64))]
    like += [replace(op, hot=True), replace(op, hot=1)]  # 1 == True, but the reprs differ
    for o in like * 2:  # the second time from what is kept
        assert opcache.ops_key((o,), "t") == opcache.digest("t|" + repr((o,)))
    assert len({opcache.ops_key((o,), "t") for o in like}) == len(like)
    assert opcache.ops_key((op,), "u") != opcache.ops_key((op,), "t")
    assert opcache.ops_key((op, op), "t") == opcache.digest("t|" + repr((op, op)))
    value = [[1, 0.1, -0.0, 2.5e-300, "memory"], [3.0], 1e16]
    want = json.dumps({"k": "k", "v": value}, separators=(",", ":"), allow_nan=False)
    assert opcache._LINE.encode({"k": "k", "v": value}) == want
    with pytest.raises(ValueError):
        opcache._LINE.encode({"k": "k", "v": [float("nan")]})
    t = OpTiming(1, 1e-9, 1, 0, 0, 1.0, 2.0, 0.0, 0.0, 2.0, 0.0, 1, 1, Bound.COMPUTE)
    kinds = replace(t, cycles=np.int64(1), time_s=np.float64(1e-9))  # NumPy scalars kept as Python numbers
    plain = opcache.timing_value(t)
    assert plain[:2] == [1, 1e-9] and plain[opcache.TIMING_FIELDS.index("bound")] == "compute"
    assert opcache.timing_value(kinds) == plain
    assert [type(v) for v in opcache.timing_value(kinds)] == [type(v) for v in plain]
