"""Reproducibility: the same inputs give byte-identical `--json`, run after run, whatever the
hash seed, with the Numba kernels compiled or run as Python; the JSON names its config by hash.
"""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from archsim.config.loader import load_system
from archsim.config.resolved import config_hash

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["run", "--prompt", "128", "--generate", "4", "--quiet"]


def _run_json(out: Path, jit: bool, hash_seed: str, *extra: str) -> bytes:
    env = {**os.environ, "NUMBA_DISABLE_JIT": "0" if jit else "1", "PYTHONHASHSEED": hash_seed}
    subprocess.run(
        [sys.executable, "-m", "archsim", *ARGS, *extra, "--json", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out.read_bytes()


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> bytes:
    return _run_json(tmp_path_factory.mktemp("det") / "a.json", jit=True, hash_seed="1")


def test_same_inputs_same_bytes_across_processes_and_hash_seeds(baseline, tmp_path):
    assert _run_json(tmp_path / "b.json", jit=True, hash_seed="2") == baseline


def test_same_bytes_with_numba_disabled(baseline, tmp_path):
    assert _run_json(tmp_path / "c.json", jit=False, hash_seed="3") == baseline


def test_json_carries_the_hash_of_its_resolved_config(baseline, tmp_path):
    data = json.loads(baseline)
    assert len(data["config_hash"]) == 16 and data["config_hash"] == config_hash(data["config"])
    other = json.loads(_run_json(tmp_path / "d.json", True, "1", "--batch", "2"))
    assert other["config_hash"] != data["config_hash"]


def test_every_option_that_changes_a_result_changes_the_hash(baseline, tmp_path):
    """Two KV sampling strides give other TPOTs (attention is simulated at other KV lengths), so
    they must not share a hash: the default simulates every decode step (stride 1), a stride
    of 2 over the run's 3 decode steps interpolates the middle one."""
    data = json.loads(baseline)
    coarse = json.loads(_run_json(tmp_path / "e.json", True, "1", "--kv-stride", "2"))
    assert data["config"]["options"]["kv_stride"] == 1 and coarse["config"]["options"]["kv_stride"] == 2
    assert coarse["config_hash"] != data["config_hash"]


def test_hash_is_of_the_resolved_values_not_the_text(tmp_path):
    """A shipped name, its path, and a copy with the same values spelt differently hash alike."""
    text = (ROOT / "hw_configs" / "h200.yaml").read_text()
    assert "  capacity: 60 MiB" in text and "  capacity: 143771 MiB" in text
    respelt = tmp_path / "h200.yaml"
    respelt.write_text(
        "# the same chip, other spellings\n"
        + text.replace("  capacity: 60 MiB", "  capacity: 62914560 B").replace(
            "  capacity: 143771 MiB", "  capacity: 150754820096 B"
        )
    )
    hashes = {config_hash(load_system(p)[1]) for p in ("h200", str(ROOT / "hw_configs" / "h200.yaml"), str(respelt))}
    assert len(hashes) == 1


CHILD = """
import pickle, sys
from archsim.config.loader import load_system
from archsim.graph.ops import Op, OpKind, Scaling
op, chip = pickle.loads(open(sys.argv[1], "rb").read())
fresh_op, fresh_chip = Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED).named("qkv"), load_system("h200")[0].chip
print(op == fresh_op and hash(op) == hash(fresh_op) and len({op, fresh_op}) == 1
      and chip == fresh_chip and hash(chip) == hash(fresh_chip))
"""


def test_a_record_hashed_here_is_hashed_afresh_in_another_process(tmp_path):
    """Ops and chips keep their hash once worked out (archsim/hashing.py), but string hashes
    differ between processes: one pickled after being hashed (as a sweep sends it to a worker)
    must equal and hash as a freshly built one in a process of another hash seed."""
    from archsim.graph.ops import Op, OpKind, Scaling

    op, chip = Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED).named("qkv"), load_system("h200")[0].chip
    hash(op), hash(chip)
    (tmp_path / "records.pkl").write_bytes(pickle.dumps((op, chip)))
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "records.pkl")], env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert res.stdout.strip() == "True", res.stderr


def test_a_copy_with_changes_is_the_record_replace_would_make():
    """`copy_with` copies a record without running its __init__ (a graph copies every op of every
    step): equal to dataclasses.replace's, hashing as it does, keeping the cached hash only where
    the changed fields take no part in it (a name, a repeat), and refusing a field the record
    does not have."""
    from dataclasses import replace

    from archsim.graph.ops import Op, OpKind, Scaling
    from archsim.hashing import copy_with

    op = Op(OpKind.VECTOR, m=4, n=4096, name="norm", scaling=Scaling.FIXED)
    hash(op)
    hot = copy_with(op, hot=True)
    assert "_cached_hash" not in hot.__dict__ and op.hot is False  # the hash is worked out afresh
    assert hot == replace(op, hot=True) and hot != op and hash(hot) == hash(replace(op, hot=True))
    named = copy_with(op, name="other", repeat=3)
    assert named == op and (named.name, named.repeat) == ("other", 3)
    assert named.__dict__["_cached_hash"] == op.__dict__["_cached_hash"]
    with pytest.raises(TypeError, match="no field 'heat'"):
        copy_with(op, heat=True)


SUMS = """
import numpy as np
from archsim.serving.histogram import GapHistogram
g = np.random.default_rng(7).random(1_000_000)
h = GapHistogram()
h.add_many(g, np.arange(len(g)) % 5)
print(repr(float(h.stats[1])))
"""


def test_serving_sums_are_the_same_whatever_the_blas_threads():
    """A dot product through BLAS is split over its threads past some 10,000 elements, so its
    last bits would follow the machine's cores; the serving books sum with numpy instead. The
    histogram's total gap over a million gaps, with 1 and 2 BLAS threads."""
    totals = set()
    for threads in ("1", "2"):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        res = subprocess.run([sys.executable, "-c", SUMS], env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        totals.add(res.stdout.strip())
    assert len(totals) == 1, totals


BLAS = """
import os, sys
import archsim.cli
print(os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("MKL_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_the_command_line_starts_one_blas_thread_unless_told_otherwise():
    """The command line sets one BLAS thread before numpy loads (archsim/cli.py): the process
    has no thread but its own; a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    res = subprocess.run([sys.executable, "-c", BLAS], env=env, capture_output=True, text=True, timeout=120)
    assert res.stdout.split() == ["1", "1", "1"], res.stderr
    env["OPENBLAS_NUM_THREADS"] = "3"
    res = subprocess.run([sys.executable, "-c", BLAS], env=env, capture_output=True, text=True, timeout=120)
    assert res.stdout.split()[:2] == ["3", "1"], res.stderr
