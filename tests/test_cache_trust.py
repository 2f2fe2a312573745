"""Nothing read from the on-disk caches is trusted (archsim/opcache.py): a tampered entry is a
miss, never a changed result; a file that is not a regular one of bounded size is never opened
in a way that blocks and never read; folders are made 0700 and refused when another user owns
them or others may write to them."""

import json
import os
import signal
import stat
from dataclasses import replace
from pathlib import Path

import pytest

import archsim
from archsim import opcache
from archsim.choose import time_op
from archsim.choose.tilings import _from_value, _value, cached_tilings, legal_tiling
from archsim.compiler.gemm import shortlist, shortlist_size
from archsim.compiler.gemm_phases import GemmMapping, Tiling
from archsim.compiler.l2reuse import Raster
from archsim.engine.timing import Bound
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.memo import clear_all
from archsim.runner import generation

GEMM = Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED)


def _fresh() -> None:
    """As a new process: every memo and every opened cache file forgotten."""
    clear_all()
    opcache._open.cache_clear()
    opcache._refused.clear()


def _entry(h200):
    timed = time_op(GEMM, h200.chip)
    return opcache.timed_value(timed.timing, timed.energy, timed.kernel_power_w), timed


@pytest.fixture
def no_alarm():
    """A read that would block fails the test after 5 s instead of hanging it."""

    def hung(*_):
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# --- values: every field checked against the chip ------------------------------------------------

T = {name: i for i, name in enumerate(opcache.TIMING_FIELDS)}
E = {name: i for i, name in enumerate(opcache.ENERGY_FIELDS)}


def _tampered(value, where: str, field: str, new):
    v = json.loads(json.dumps(value))
    if where == "timing":
        v[0][T[field]] = new
    elif where == "energy":
        v[1][E[field]] = new
    else:
        v[2] = new
    return v


TAMPERINGS = [
    ("timing", "time_s", -1e-6),  # a negative time
    ("timing", "time_s", 0.0),  # no longer cycles at the chip's clock
    ("timing", "cycles", 1),  # time_s no longer its cycles at the clock
    ("timing", "cycles", 1.5),  # a count that is not whole
    ("timing", "cycles", True),  # a boolean is no count
    ("timing", "clock_hz", 0.0),  # a zero clock
    ("timing", "clock_hz", 1e12),  # above the chip's clock
    ("timing", "active_cores", 10**6),  # more cores than the chip has
    ("timing", "compute_cycles", 10**15),  # more compute than cycles
    ("timing", "stall_cycles", -1),
    ("timing", "bound", "compute"),  # not the largest part (of this small GEMM: its fixed costs)
    ("timing", "bound", "nonsense"),
    ("timing", "hbm_bytes", -5.0),
    ("timing", "busy_core_cycles", 1e30),  # busier than its cores
    ("timing", "energy_j", 1.0),  # not the sum of its parts
    ("energy", "hbm_j", -1.0),
    ("energy", "hbm_j", 1e9),  # the parts no longer add up to energy_j
    ("power", "", -3.0),
    ("power", "", "300"),
]


@pytest.mark.parametrize(("where", "field", "new"), TAMPERINGS)
def test_a_tampered_timing_is_a_miss(h200, where, field, new):
    value, timed = _entry(h200)
    assert opcache.timed_from_value(value, h200.chip) == (timed.timing, timed.energy, timed.kernel_power_w)
    assert opcache.timed_from_value(_tampered(value, where, field, new), h200.chip) is None


def test_a_timing_of_another_chip_is_a_miss(h200):
    value, _ = _entry(h200)
    faster = replace(h200.chip, clock_hz=2 * h200.chip.clock_hz)  # time_s is not cycles at its clock
    assert opcache.timed_from_value(value, faster) is None
    assert opcache.timed_from_value(value, replace(h200.chip, cores=2)) is None  # more active cores than it has
    unpowered = replace(h200.chip, power=None)  # energies where the chip has no power model
    assert opcache.timed_from_value(value, unpowered) is None


def test_a_time_of_ops_must_be_a_finite_non_negative_number():
    assert opcache.seconds_from_value(1.5e-3) == 1.5e-3 and opcache.seconds_from_value(0) == 0.0
    for bad in (-1.0, float("nan"), float("inf"), True, "1", None, [1.0]):
        assert opcache.seconds_from_value(bad) is None


def test_an_op_cost_is_read_back_as_written_and_a_tampered_one_is_a_miss(h200):
    """An op's time, energy and power (a decode attention sample's entry): read back equal; an
    entry of another shape, a negative or non-finite amount, or energy where the chip has no
    power model, is a miss."""
    timed = time_op(GEMM, h200.chip)
    value = opcache.cost_value(timed.timing.time_s, timed.energy, timed.kernel_power_w)
    assert opcache.cost_from_value(json.loads(json.dumps(value)), h200.chip) == (
        timed.timing.time_s,
        timed.energy,
        timed.kernel_power_w,
    )
    time_s, energy, power_w = value
    for bad in (
        [-time_s, energy, power_w],
        [float("nan"), energy, power_w],
        [time_s, energy[:-1], power_w],
        [time_s, [*energy[:-1], -1.0], power_w],
        [time_s, energy, float("inf")],
        [time_s, energy, True],
        [time_s, energy],
        timed.timing.time_s,
    ):
        assert opcache.cost_from_value(bad, h200.chip) is None
    assert opcache.cost_from_value(value, replace(h200.chip, power=None)) is None
    assert opcache.cost_from_value([time_s, [0.0] * len(energy), 0.0], replace(h200.chip, power=None)) is not None


# --- lines: NaN, cut short, given twice ------------------------------------------------------------


def test_lines_that_are_not_whole_entries_are_skipped_and_a_clash_is_a_miss():
    data = b"\n".join(
        [
            b'{"k": "a", "v": 1.0}',
            b'{"k": "b", "v": NaN}',  # Python's json would read NaN: not an entry
            b'{"k": "c", "v": Infinity}',
            b'{"k": "d", "v": 2.0}',
            b'{"k": "d", "v": 3.0}',  # a second value for d: neither is right for sure
            b'{"k": "e", "v": 4.0}',
            b'{"k": "e", "v": 4.0}',  # two writers of one entry: the same value twice
            b'{"k": "f", "v": [1, 2',  # cut short by a writer that died
            b'{"k": 7, "v": 1.0}',  # a key that is no digest
            b"[1, 2]",
            b"\xff\xfe",
        ]
    )
    assert opcache.parse_entries(data) == {"a": 1.0, "e": 4.0}


def test_a_planted_line_never_changes_a_run(cache_dir, h200):
    """Every op timing of a run replaced by one with a negative time: the run reads none of them."""
    from test_serving import TINY

    from archsim.graph.model import Scenario

    w = replace(TINY, scenario=Scenario(1, 64, 3))
    first = generation.run_generation(w, h200, kv_stride=1)
    path = opcache.cache_for_chip(h200.chip).path
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    timings = [e for e in lines if isinstance(e["v"], list) and len(e["v"]) == 3]
    whole = [e for e in timings if isinstance(e["v"][0], list)]  # an op's whole timing (time_op)
    costs = [e for e in timings if not isinstance(e["v"][0], list)]  # its time, energy and power (op_cost)
    assert whole and costs
    for e in whole:
        e["v"][0][T["time_s"]] = -e["v"][0][T["time_s"]] - 1.0
    for e in costs:
        e["v"][0] = -e["v"][0] - 1.0
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    _fresh()
    again = generation.run_generation(w, h200, kv_stride=1)
    assert again.ttft_s == first.ttft_s and again.tpot_s == first.tpot_s


def test_a_clashing_line_is_not_appended_to_again(cache_dir, h200):
    """A key whose file gives two values is worked out again and kept in memory: appending a
    third line would not settle it."""
    value, timed = _entry(h200)
    key = opcache.ops_key((GEMM,), "time_op")
    cache = opcache.cache_for_chip(h200.chip)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    other = _tampered(value, "power", "", value[2] * 2)
    cache.path.write_text(json.dumps({"k": key, "v": value}) + "\n" + json.dumps({"k": key, "v": other}) + "\n")
    _fresh()
    assert generation.cached_time_op(GEMM, h200.chip) == timed
    assert opcache.cache_for_chip(h200.chip).path.read_text().count(key) == 2


# --- files: regular ones only, bounded -------------------------------------------------------------


def _cache_file(h200) -> Path:
    path = opcache.cache_for_chip(h200.chip).path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.unlink(missing_ok=True)
    _fresh()
    return path


def test_a_fifo_never_blocks_and_is_never_written(cache_dir, h200, no_alarm):
    path = _cache_file(h200)
    os.mkfifo(path)
    assert generation.cached_time_op(GEMM, h200.chip) == time_op(GEMM, h200.chip)
    cache = opcache.cache_for_chip(h200.chip)
    assert cache.values[opcache.ops_key((GEMM,), "time_op")] == _entry(h200)[0] and not cache.writable
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "regular"])
def test_a_link_is_not_followed(cache_dir, h200, no_alarm, target, tmp_path):
    value, _ = _entry(h200)
    path = _cache_file(h200)
    if target == "regular":  # a link to an entry file elsewhere: not read, however good its lines
        target = str(tmp_path / "elsewhere.jsonl")
        Path(target).write_text(json.dumps({"k": opcache.ops_key((GEMM,), "time_op"), "v": value}) + "\n")
    os.symlink(target, path)
    assert opcache.read_regular(path) is None
    cache = opcache.cache_for_chip(h200.chip)
    assert cache.values == {} and not cache.writable


def test_a_file_past_the_bound_is_left_alone(cache_dir, h200):
    value, _ = _entry(h200)
    path = _cache_file(h200)
    line = json.dumps({"k": opcache.ops_key((GEMM,), "time_op"), "v": value}) + "\n"
    with open(path, "w") as f:
        f.write(line)
        f.truncate(opcache.MAX_FILE_BYTES + 1)  # sparse: costs no disk
    assert opcache.read_regular(path) is None
    cache = opcache.cache_for_chip(h200.chip)
    assert cache.values == {} and not cache.writable
    cache.put("k", 1.0)
    assert os.path.getsize(path) == opcache.MAX_FILE_BYTES + 1  # not appended to


def test_the_bound_is_the_size_read():
    assert opcache.MAX_FILE_BYTES == 64 << 20


# --- folders: made 0700, refused when not the user's own -----------------------------------------


def test_folders_are_made_private(cache_dir, h200):
    generation.cached_time_op(GEMM, h200.chip)
    version = opcache.version_folder()
    for folder in (cache_dir, version):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(opcache.cache_for_chip(h200.chip).path).st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777])
def test_a_folder_others_may_write_to_is_refused_with_the_fix(cache_dir, h200, mode):
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, mode)
    _fresh()
    for refused in (lambda: opcache.cache_for_chip(h200.chip), opcache.check_folders):
        with pytest.raises(archsim.CacheFolderError) as err:
            refused()
        assert str(err.value).count("\n") == 0 and f"chmod 700 {cache_dir}" in str(err.value)
        assert "--no-cache" in str(err.value)
    with pytest.raises(archsim.CacheFolderError):  # the API refuses before any work
        archsim.run("h200", "llama3_8b")
    assert list(cache_dir.iterdir()) == []  # nothing written there
    opcache.set_enabled(False)  # --no-cache: nothing read from it, nothing refused
    opcache.check_folders()
    assert generation.cached_time_op(GEMM, h200.chip) == time_op(GEMM, h200.chip)
    opcache.set_enabled(True)


def test_a_version_folder_others_may_write_to_is_refused(cache_dir, h200):
    version = opcache.version_folder()
    version.mkdir(parents=True, mode=0o700)
    os.chmod(version, 0o777)
    _fresh()
    with pytest.raises(archsim.CacheFolderError, match="chmod 700"):
        opcache.cache_for_chip(h200.chip)


def test_a_folder_of_another_user_is_refused(cache_dir, h200, monkeypatch):
    cache_dir.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(cache_dir).st_uid + 1)
    _fresh()
    with pytest.raises(archsim.CacheFolderError, match=r"owned by another user .*set ARCHSIM_CACHE_DIR"):
        opcache.cache_for_chip(h200.chip)


def test_a_private_folder_made_before_is_used(cache_dir, h200):
    cache_dir.mkdir(mode=0o755)  # as earlier versions made it: others may read, not write
    _fresh()
    assert opcache.cache_for_chip(h200.chip) is not None


# --- tilings: checked against the op and the chip -------------------------------------------------

GEMMS = [
    Op(OpKind.GEMM, m=1, k=4096, n=4096, scaling=Scaling.FIXED),
    Op(OpKind.GEMM, m=96, k=2048, n=3072, scaling=Scaling.FIXED),
    Op(OpKind.GEMM, m=2048, k=4096, n=14336, scaling=Scaling.FIXED),
    Op(OpKind.GEMM, m=7, k=100, n=33, scaling=Scaling.FIXED),
    Op(OpKind.GEMM, m=64, k=7168, n=256, groups=8, scaling=Scaling.FIXED),
]


@pytest.mark.parametrize("hw", ["h200", "a100", "tpu_v5e", "mi300x"])
def test_every_tiling_the_compiler_shortlists_is_legal(hw):
    from archsim.config.loader import load_system

    chip = load_system(hw)[0].chip
    for op in GEMMS:
        kept = shortlist(op, chip, shortlist_size(op))
        assert kept and all(legal_tiling(op, chip, t) for t in kept)
        assert _from_value(json.loads(json.dumps(_value(kept))), op) == kept


def test_a_tampered_tiling_is_a_miss(cache_dir, h200):
    """The H200's core has 228 KiB of SRAM: 512 x 512 x 512 tiles of bf16 take 2 x 1 MiB a stage
    pair, which no core holds; 100 is no tile edge of a 4096 dimension (only powers of two from 8
    and the whole dimension); split 5 is no split-K slice count (2, 3, 4, 6, 8, 12, 16); a grouped
    raster of 64 rows exceeds the 1 x 32 tile grid of a 64 x 1024 GEMM cut into 64 x 32 tiles."""
    chip = h200.chip
    good = Tiling(64, 32, 64)
    assert legal_tiling(GEMM, chip, good)
    bad = [
        Tiling(512, 512, 512),
        Tiling(64, 100, 64),
        Tiling(64, 32, 64, GemmMapping.SPLIT_K, 5),
        Tiling(64, 32, 64, GemmMapping.DATA_PARALLEL, 2),
        Tiling(64, 32, 64, raster=Raster.GROUPED, group=64),
        Tiling(64, 32, 8192),
    ]
    for t in bad:
        assert not legal_tiling(GEMM, chip, t), t
    count = shortlist_size(GEMM)
    key = opcache.ops_key((GEMM,), f"shortlist|{count}")
    truth = list(shortlist(GEMM, chip, count))
    for planted in [_value(bad[:1]), _value([good, good]), [[64.0, 32, 64, "data-parallel", 1, "row", 1]]]:
        cache = opcache.cache_for_chip(chip)
        cache.path.parent.mkdir(parents=True, exist_ok=True)
        cache.path.write_text(json.dumps({"k": key, "v": planted}) + "\n")
        _fresh()
        shortlist.cache_clear()
        assert cached_tilings(GEMM, chip) == truth


def test_bounds_of_a_timing_hold_for_every_op_a_run_times(cache_dir, h200):
    """Every entry a run writes is read back as written (so the checks cost no hit)."""
    from test_serving import TINY

    from archsim.graph.model import Scenario

    w = replace(TINY, scenario=Scenario(2, 96, 4))
    generation.run_generation(w, h200, kv_stride=1)
    values = opcache.parse_entries(opcache.cache_for_chip(h200.chip).path.read_bytes())
    timings = [v for v in values.values() if isinstance(v, list) and len(v) == 3 and isinstance(v[2], float)]
    whole = [v for v in timings if isinstance(v[0], list)]  # time_op's
    costs = [v for v in timings if not isinstance(v[0], list)]  # op_cost's: the decode attention's samples
    assert len(whole) > 5 and len(costs) == 3  # a KV length each of the 3 decode steps
    assert all(opcache.timed_from_value(v, h200.chip) is not None for v in whole)
    assert all(opcache.cost_from_value(v, h200.chip) is not None for v in costs)
    assert Bound.COMPUTE.value == "compute"
