"""Sweeps end to end: the CLI, resuming after kill -9, a local Dask cluster, `archsim pareto`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from archsim.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# 6 points: 1 ruled out by a constraint, 1 whose objective divides by zero (failed), 4 simulated
SPEC = """\
name: small
hardware: h200
workload: llama3_8b
set:
  hardware.power.max_clock: 2.2 GHz   # H200-like silicon whose voltage curve reaches the clocks swept
  workload.scenario.prompt_tokens: 32
  workload.scenario.output_tokens: 2
kv_stride: 1024
parameters:
  units:
    path: hardware.cores.matrix_units.count
    values: [1, 2, 4]
  clock_ghz:
    path: hardware.clock
    values: [1.5, 2.0]
    unit: GHz
derived:
  macs:
    expr: 132 * units * 512
constraints:
  - units < 4 or clock_ghz < 2
objectives:
  tps: decode_tokens_per_s
  ttft_ms: ttft_s * 1000
  odd: {expr: "1 / (units - 1) if clock_ghz > 1.8 else 0", goal: maximize}
"""

KILL_SPEC = """\
name: killed
hardware: h200
workload: llama3_8b
set:
  hardware.power.max_clock: 2.2 GHz   # H200-like silicon whose voltage curve reaches the clocks swept
  workload.scenario.prompt_tokens: 32
  workload.scenario.output_tokens: 2
kv_stride: 1024
parameters:
  clock_ghz:
    path: hardware.clock
    range: [1.2, 2.2]
    steps: 24
    unit: GHz
objectives:
  tps: decode_tokens_per_s
"""


def parts(out: Path) -> list[dict]:
    return [row for p in sorted(out.glob("points/part-*.parquet")) for row in pq.read_table(p).to_pylist()]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small sweep run once in this process: (spec path, results folder, exit code, output)."""
    d = tmp_path_factory.mktemp("sweep")
    spec = d / "small.yaml"
    spec.write_text(SPEC)
    code = main(["sweep", str(spec), "--out", str(d / "out"), "--workers", "1", "--quiet"])
    return spec, d / "out", code


def test_sweep_records_every_point_once_with_its_status(small):
    _spec, out, code = small
    assert code == 1  # a point failed: recorded, the others went on, and the exit code says so
    rows = parts(out)
    assert len(rows) == 6 and len({r["config_hash"] for r in rows}) == 6
    by = {(r["units"], r["clock_ghz"]): r for r in rows}
    assert by[(4, 2.0)]["status"] == "infeasible"
    assert by[(4, 2.0)]["error"] == "constraint not met: units < 4 or clock_ghz < 2 (clock_ghz = 2, units = 4)"
    assert by[(1, 2.0)]["status"] == "failed" and by[(1, 2.0)]["error"].startswith("ZeroDivisionError")
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 4 and all(r["tps"] > 0 and r["ttft_ms"] > 0 and r["error"] is None for r in ok)
    assert by[(2, 1.5)]["macs"] == 132 * 2 * 512
    assert by[(2, 2.0)]["ttft_ms"] < by[(2, 1.5)]["ttft_ms"]  # a faster clock, a shorter prefill
    schema = pq.read_schema(next(out.glob("points/part-*.parquet")))
    assert schema.names == [
        "config_hash",
        "status",
        "error",
        "fidelity",
        "units",
        "clock_ghz",
        "macs",
        "tps",
        "ttft_ms",
        "odd",
    ]
    assert str(schema.field("units").type) == "int64" and str(schema.field("tps").type) == "double"
    summary = json.loads((out / "summary.json").read_text())
    assert {
        k: summary[k]
        for k in (
            "points_total",
            "points_done",
            "points_failed",
            "points_ok",
            "points_infeasible",
            "points_remaining",
            "complete",
        )
    } == {
        "points_total": 6,
        "points_done": 6,
        "points_failed": 1,
        "points_ok": 4,
        "points_infeasible": 1,
        "points_remaining": 0,
        "complete": True,
    }


def test_rerun_skips_what_is_done(small, capsys):
    spec, out, _ = small
    before = sorted(p.name for p in out.glob("points/part-*.parquet"))
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet"]) == 1
    assert "0 run now" in capsys.readouterr().out
    assert sorted(p.name for p in out.glob("points/part-*.parquet")) == before
    assert json.loads((out / "summary.json").read_text())["last_run"]["points"] == 0


def test_standard_tools_read_the_points(small):
    """`DIR/points` is one Parquet dataset: pyarrow.dataset, pandas.read_parquet and
    archsim.load_sweep see the same 6 rows as the parts do."""
    import pyarrow.dataset as ds

    import archsim

    _, out, _ = small
    hashes = sorted(r["config_hash"] for r in parts(out))
    assert sorted(ds.dataset(out / "points", format="parquet").to_table().column("config_hash").to_pylist()) == hashes
    results = archsim.load_sweep(out)
    assert len(results) == 6 and sorted(r["config_hash"] for r in results.rows()) == hashes
    assert results.summary["points_total"] == 6 and results.settings["kv_stride"] == 1024
    front = results.pareto(maximize=["tps"], minimize=["macs"])
    assert front and all(r["status"] == "ok" for r in front)
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_parquet(out / "points")
    assert sorted(frame.config_hash) == hashes
    assert sorted(results.to_pandas().config_hash) == hashes


def test_a_folder_of_the_old_layout_moves_its_parts(small, tmp_path, capsys):
    """Parts written beside the JSON files (before points/) are moved in and not run again."""
    import shutil

    spec, out, _ = small
    old = tmp_path / "old"
    shutil.copytree(out, old)
    for part in (old / "points").glob("part-*.parquet"):
        part.rename(old / part.name)
    (old / "points").rmdir()
    assert main(["sweep", str(spec), "--out", str(old), "--workers", "1", "--quiet"]) == 1
    assert "0 run now" in capsys.readouterr().out
    assert not list(old.glob("part-*.parquet")) and len(parts(old)) == 6


def test_a_folder_holds_one_setting_and_one_writer(small, tmp_path, capsys):
    from archsim.sweep.spec import load_spec
    from archsim.sweep.store import ResultStore, StoreError

    spec, out, _ = small
    other = tmp_path / "other.yaml"
    other.write_text(SPEC.replace("kv_stride: 1024", "kv_stride: 512"))
    assert main(["sweep", str(other), "--out", str(out), "--workers", "1"]) == 2
    assert (
        "holds results of a sweep with other settings (different kv_stride): use another --out"
        in capsys.readouterr().err
    )
    s = load_spec(spec)
    with ResultStore(out, s.settings(), s.columns()), pytest.raises(StoreError, match="another sweep is writing to"):
        ResultStore(out, s.settings(), s.columns()).open()
    # the same spec run by another archsim (another version, or its sources edited): its rows
    # would be another model's, so the folder is not resumed with this one's
    elsewhere = tmp_path / "elsewhere"
    with ResultStore(elsewhere, {**s.settings(), "archsim": "0.0.1-0123456789abcdef"}, s.columns()):
        pass
    assert main(["sweep", str(spec), "--out", str(elsewhere), "--workers", "1"]) == 2
    assert "other settings (different archsim): use another --out" in capsys.readouterr().err


def test_pareto_table_plot_and_json(small, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    _, out, _ = small
    png, js = tmp_path / "front.png", tmp_path / "front.json"
    assert (
        main(["pareto", str(out), "--maximize", "tps", "--minimize", "macs", "--plot", str(png), "--json", str(js)])
        == 0
    )
    text = capsys.readouterr().out
    assert "Pareto front" in text and "units" in text and "clock_ghz" in text
    assert png.stat().st_size > 10_000
    front = json.loads(js.read_text())
    rows = parts(out)
    ok = [r for r in rows if r["status"] == "ok"]
    for r in front["front"]:  # nothing ok beats a front design on both objectives
        assert not any(
            o["tps"] >= r["tps"] and o["macs"] <= r["macs"] and (o["tps"] > r["tps"] or o["macs"] < r["macs"])
            for o in ok
        )
    assert front["designs"] == 4 and 1 <= len(front["front"]) <= 4
    assert main(["pareto", str(out), "--maximize", "tsp", "--minimize", "macs", "--no-plot"]) == 2
    assert "'tsp' is not a numeric column" in capsys.readouterr().err


def _live_pids_in_group(pgid: int) -> list[int]:
    """Processes (not zombies) of a process group, from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


@pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and process groups")
def test_kill_9_mid_sweep_then_resume_records_every_point_exactly_once(tmp_path):
    spec = tmp_path / "killed.yaml"
    spec.write_text(KILL_SPEC)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "archsim", "sweep", str(spec), "--out", str(out), "--chunk-size", "2", "--quiet"]
    cmd += ["--fidelity", "full"]  # every point run once
    proc = subprocess.Popen(
        cmd + ["--workers", "2"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not list(out.glob("points/part-*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # the sweep itself, as `kill -9 PID` would
        proc.wait()
        done_at_kill = len(parts(out))
        assert 1 <= done_at_kill < 24, "the sweep must be killed mid-way"
        deadline = time.monotonic() + 15  # its workers notice and exit on their own
        while _live_pids_in_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _live_pids_in_group(proc.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    resumed = subprocess.run(cmd + ["--workers", "1"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{24 - done_at_kill} run now" in resumed.stdout
    rows = parts(out)
    counts = Counter(r["config_hash"] for r in rows)
    assert len(counts) == 24 and set(counts.values()) == {1}
    assert sorted(r["clock_ghz"] for r in rows) == pytest.approx([1.2 + i / 23 for i in range(24)])
    assert json.loads((out / "summary.json").read_text())["points_done"] == 24


def test_sweep_on_a_local_dask_cluster_matches_the_local_run(small, tmp_path):
    pytest.importorskip("distributed")
    spec, serial_out, _ = small
    out = tmp_path / "dask"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archsim",
            "sweep",
            str(spec),
            "--out",
            str(out),
            "--dask-local",
            "2",
            "--chunk-size",
            "2",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the one failing point, as in the local run
    assert "dask local cluster (2 workers)" in proc.stdout and "workers) (2" not in proc.stdout
    local = {r["config_hash"]: r for r in parts(serial_out)}
    remote = {r["config_hash"]: r for r in parts(out)}
    assert remote == local  # identical rows, whichever executor ran them


def test_ctrl_c_inside_a_compiled_kernel_stops_the_sweep_and_fails_no_point(tmp_path, monkeypatch, capsys):
    """Numba reports a Ctrl-C that landed inside a compiled kernel as a SystemError caused by the
    KeyboardInterrupt: the sweep must stop with exit 130 as for any Ctrl-C, not record the point
    as failed and go on with the others."""
    import archsim.runner.generation as generation

    def interrupted_in_kernel(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ctrl_c:
            raise SystemError("CPUDispatcher(simulate_phase) returned a result with an exception set") from ctrl_c

    monkeypatch.setattr(generation, "run_generation", interrupted_in_kernel)
    spec = tmp_path / "small.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not [row for row in parts(out) if row["status"] == "failed"]


def test_pool_workers_load_numba_without_blas():
    """The process a pool's workers fork from imports archsim.sweep.warm: Numba is not loaded
    there (a sweep whose ops are all cached never needs it), and once a worker loads it, scipy's
    BLAS stays out, as on the command line."""
    code = (
        "import sys, archsim.sweep.warm; from archsim import jit; print(jit.loaded()); "
        "jit.load(); print(jit.loaded(), 'scipy.linalg' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "False"], done.stderr


def test_stopping_a_pool_whose_workers_are_gone_is_no_error():
    """A signal sent to the whole process group stops the workers too, and the pool's own thread
    may reap them first: asking after a worker already reaped (ChildProcessError) stops nothing
    more and raises nothing."""
    from archsim.sweep.executors import _stop

    class Gone:
        def is_alive(self):
            raise ChildProcessError(10, "No child processes")

        def terminate(self):
            raise AssertionError("a reaped worker is not terminated")

        def join(self, timeout=None):
            raise ChildProcessError(10, "No child processes")

    class Pool:
        _processes = {1: Gone(), 2: Gone()}

        def shutdown(self, wait, cancel_futures):
            assert not wait and cancel_futures

    _stop(Pool())


def test_the_documented_dask_worker_config_is_the_local_clusters():
    """docs/dask-workers.yaml, which docs/sweeps.md starts remote workers with, sets every setting
    a local cluster's workers start with (LOCAL_DASK_WORKERS) to the same value."""
    import yaml

    from archsim.sweep.executors import LOCAL_DASK_WORKERS

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "docs" / "dask-workers.yaml").read_text())
    for key, value in LOCAL_DASK_WORKERS.items():
        node = doc
        for part in key.split("."):
            node = node[part]
        assert node == value, key


def test_a_local_dask_cluster_starts_its_workers_as_the_pools_run(monkeypatch):
    """Dask's workers sample the running task's stack every 10 ms by default, about 3 ms of CPU
    a point of h200_halton_1000; its nannies start them with MALLOC_TRIM_THRESHOLD_=65536, which
    turns glibc's adaptive mmap threshold off (3 ms of a point's 41); their event loops wake every
    20 ms and 0.5 s to check themselves (about 1 ms). A local cluster's workers are started with
    the profiler off, the variable unset (None: Dask sets nothing) and the checks every 1 and 5 s."""
    distributed = pytest.importorskip("distributed")
    import dask

    from archsim.sweep.evaluate import Evaluation
    from archsim.sweep.executors import DaskExecutor, ExecutorUnavailable

    seen = []
    keys = (
        "distributed.worker.profile.enabled",
        "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_",
        "distributed.admin.tick.interval",
        "distributed.admin.system-monitor.interval",
    )

    def cluster(**_kw):
        seen.append(tuple(dask.config.get(k) for k in keys))
        raise RuntimeError("not started here")

    monkeypatch.setattr(distributed, "LocalCluster", cluster)
    before = tuple(dask.config.get(k) for k in keys)
    with pytest.raises(ExecutorUnavailable):
        list(DaskExecutor(local_workers=2).run([], Evaluation((), (), 64)))
    assert seen == [(False, None, "1s", "5s")]
    assert tuple(dask.config.get(k) for k in keys) == before  # only while it starts
