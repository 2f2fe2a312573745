"""Chiplet GPUs (archsim/hardware/chiplet.py, archsim/compiler/die_reuse.py): the dies' L2 reuse
by hand, what spreading a GEMM over dies does on the MI300X (the L2 hit rate falls, the time does
not fall), and the `dies:` section's checks."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from archsim.choose import choose
from archsim.choose.timed import time_op
from archsim.compiler.die_reuse import die_fabric_fractions, die_l2_hit_fraction, local_l2_share, wave_bytes
from archsim.compiler.gemm import compile_gemm
from archsim.compiler.gemm_phases import GemmMapping, Tiling, wave_layout
from archsim.compiler.mappings.stream_k import die_window_steps, tail_local_l2_share
from archsim.config.loader import load_system
from archsim.dtypes import DType
from archsim.errors import ConfigError
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware.chiplet import Dies, split_l2_bandwidth

ROOT = Path(__file__).resolve().parents[1]
MI300X = load_system(str(ROOT / "hw_configs" / "mi300x.yaml"))[0].chip


def _grid(rows: int, cols: int, edge: int = 128, k: int = 64) -> dict[str, np.ndarray]:
    """Work items of a rows x cols tile grid in row order, one K slice each."""
    t = np.arange(rows * cols)
    zeros = np.zeros(len(t), np.int64)
    full = np.full(len(t), edge, np.int64)
    return {"g": zeros, "i": t // cols, "j": t % cols, "s": zeros, "em": full, "en": full, "kl": np.full(len(t), k)}


def test_dies_lose_the_sharing_of_one_wave_by_hand():
    """A 2 x 2 grid in one wave; every panel (128 rows x 64 of K x 2 bytes) is P = 16 KiB and an
    item moves 2P. One die: the four items read A0, A1, B0, B1 once each, 4P of 8P off the die,
    hit rate 1/2. Two dies, round robin: die 0 runs items 0 and 2 ((0,0), (1,0): A0, A1, B0) and
    die 1 items 1 and 3 ((0,1), (1,1): A0, A1, B1), 3P each, 6P of 8P: hit rate 1/4."""
    items, wave = _grid(2, 2), np.zeros(4, np.int64)
    assert wave_bytes(items, 2, 2, (1.0, 1.0)) == pytest.approx(np.full(4, 2 * 16384))
    one = die_fabric_fractions(items, wave, 2, 2, 1, 1 << 20, (1.0, 1.0), np.zeros(1))
    two = die_fabric_fractions(items, wave, 2, 2, 2, 1 << 20, (1.0, 1.0), np.zeros(1))
    assert one == pytest.approx([0.5]) and two == pytest.approx([0.75])
    assert die_l2_hit_fraction(items, wave, 2, 2, 1, 1 << 20) == pytest.approx(0.5)
    assert die_l2_hit_fraction(items, wave, 2, 2, 2, 1 << 20) == pytest.approx(0.25)


def test_a_die_keeps_its_panels_across_waves_while_they_fit():
    """The same 2 x 2 grid run twice over (two waves, the second touching the same panels): a
    die of 2 MiB keeps its 3P = 48 KiB and hits all of wave 1; a die of 32 KiB holds less than
    its 48 KiB and misses all of it again. Never below the wave's share from HBM."""
    items = {key: np.concatenate([v, v]) for key, v in _grid(2, 2).items()}
    wave = np.repeat([0, 1], 4)
    big = die_fabric_fractions(items, wave, 2, 2, 2, 2 << 20, (1.0, 1.0), np.zeros(2))
    small = die_fabric_fractions(items, wave, 2, 2, 2, 32 << 10, (1.0, 1.0), np.zeros(2))
    floor = die_fabric_fractions(items, wave, 2, 2, 2, 2 << 20, (1.0, 1.0), np.array([0.9, 0.9]))
    assert big == pytest.approx([0.75, 0.0]) and small == pytest.approx([0.75, 0.75])
    assert floor == pytest.approx([0.9, 0.9])


def test_local_share_by_hand():
    """The 2 x 2 grid of one wave on two dies: 8P moved, none from HBM, 6P cross the fabric, so
    the dies serve 2P of the 8P of L2 hits themselves: 1/4."""
    items, wave = _grid(2, 2), np.zeros(4, np.int64)
    share = local_l2_share(items, wave, 2, 2, (1.0, 1.0), np.zeros(1), np.array([0.75]))
    assert share == pytest.approx(0.25)


def test_stream_k_tail_local_share_by_hand():
    """4 iterations on 2 dies, (die, offset, A block, B block) = (0, 0, a0, b0), (1, 0, a0, b1),
    (0, 1, a0, b1), (1, 5, a1, b1), 100 B a block, a window of 2 steps: die 0 reads a0 again 1
    step after its first read (a hit), die 1 reads b1 again 5 steps after (a miss), every other
    read is a block's first on its die. M = 700 of T = 800 B, h = 0.25 from HBM: fabric
    max(0.875, 0.25); with P = 100 B of partials read back, local = 800 x 0.125 / (800 x 0.75 +
    100) = 1 / 7. A window of 5 steps makes die 1's second b1 a hit too: M = 600, 200 / 700 = 2 / 7."""
    die, offset = np.array([0, 1, 0, 1]), np.array([0, 0, 1, 5])
    zeros = np.zeros(4, np.int64)
    blocks = (zeros, np.array([0, 0, 0, 1]), np.array([0, 1, 1, 1]), zeros)
    moved = (np.full(4, 100.0), np.full(4, 100.0))
    assert tail_local_l2_share(die, offset, blocks, moved, 2, 0.25, 100.0) == pytest.approx(1 / 7)
    assert tail_local_l2_share(die, offset, blocks, moved, 5, 0.25, 100.0) == pytest.approx(2 / 7)
    assert tail_local_l2_share(die, offset, blocks, moved, 5, 1.0, 0.0) == 0.0  # all from HBM: no hits


def test_die_window_by_hand():
    """The MI300X's 4 MB die L2 under 38 CUs (304 / 8) loading 16 KiB steps (128 x 32 + 32 x 128
    bf16): 4,000,000 / (38 x 16,384) = 6.42 steps; twice the CUs, 3.21."""
    lay = wave_layout(MI300X)
    assert die_window_steps(lay, 16384) == pytest.approx(4_000_000 / (38 * 16384))
    assert die_window_steps(replace(lay, cores=608), 16384) == pytest.approx(4_000_000 / (76 * 16384))


def test_a_stream_k_tail_on_the_mi300x_by_hand():
    """256 x 128 x 256 bf16 as stream-K 128 x 128 x 32 tiles on the MI300X: 4 tiles of 4 K steps,
    16 iterations on 304 CUs, one each (core = iteration, die = iteration mod 8, all at offset 0),
    row order: tile (i, j) = (t // 2, t % 2), iteration 4t + s. A block (i, s) is read by tiles
    (i, 0) and (i, 1), iterations 8i + s and 8i + 4 + s: dies s and s + 4, both miss. B block
    (j, s) by tiles (0, j) and (1, j), iterations 4j + s and 8 + 4j + s: the same die, the second
    hits. Every block is 128 x 32 x 2 = 8 KiB: M = 16 x 8 + 8 x 8 = 192 KiB of T = 256 KiB, 3/4.
    The tiles in flight together read each panel twice, its first from HBM: h = 1/2. Each tile's
    finishing core reads the other three's fp32 partials, 4 x 3 x 128 x 128 x 4 = 786,432 B:
    local = 262,144 x 0.25 / (262,144 x 0.5 + 786,432) = 1 / 14."""
    op = Op(OpKind.GEMM, DType.BF16, m=256, k=128, n=256, scaling=Scaling.FIXED)
    (tail,) = compile_gemm(op, MI300X, Tiling(128, 128, 32, GemmMapping.STREAM_K, 1)).phases
    assert tail.local_l2_share == pytest.approx(1 / 14)


def test_split_l2_bandwidth_by_hand():
    """Fabric 17.2 TB/s, dies 8 x 4.3 = 34.4 TB/s. No local hits: the fabric's 17.2. Half local:
    1 / max(0.5 / 34.4, 0.5 / 17.2) = 34.4 TB/s (the fabric's half binds). 85% local:
    1 / max(0.85 / 34.4, 0.15 / 17.2) = 40.47 TB/s (the dies' share binds)."""
    assert split_l2_bandwidth(17.2e12, 34.4e12, 0.0) == pytest.approx(17.2e12)
    assert split_l2_bandwidth(17.2e12, 34.4e12, 0.5) == pytest.approx(34.4e12)
    assert split_l2_bandwidth(17.2e12, 34.4e12, 0.85) == pytest.approx(40.4706e12, rel=1e-4)


GEMM = Op(OpKind.GEMM, DType.BF16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)


def _one_die(chip):
    """The chip's dies as one die of their total L2 capacity and bandwidth."""
    d = chip.dies
    return replace(
        chip,
        dies=Dies(
            count=1, l2_capacity_bytes=8 * d.l2_capacity_bytes, l2_bandwidth_bytes_per_s=8 * d.l2_bandwidth_bytes_per_s
        ),
    )


def _local_share(chip) -> float:
    return choose(GEMM, chip).program.phases[0].local_l2_share


@pytest.mark.parametrize("fabric", [None, "1 TB/s"])
def test_one_die_against_eight_of_the_same_total(fabric):
    """The MI300X's eight XCDs of 4 MB against one die of 32 MB: spread over eight dies the GEMM
    hits less in its own dies' L2 (more crosses the die fabric) and takes no less time, each
    chip on the tiling its autotuner picks; on a die fabric of 1 TB/s, where the fabric binds,
    strictly more (eight dies 256 x 256 x 32, 1.52 ms; one die 128 x 256 x 32, 1.21 ms)."""
    eight = MI300X if fabric is None else with_noc_bandwidth(MI300X, 1e12)
    assert MI300X.dies == Dies(count=8, l2_capacity_bytes=4_000_000, l2_bandwidth_bytes_per_s=4.3e12)
    one = _one_die(eight)
    assert _local_share(eight) < _local_share(one) - 0.05
    t8, t1 = time_op(GEMM, eight).timing, time_op(GEMM, one).timing
    # no less time at the full clock (the power limit then holds each at a clock its energy sets),
    # to the event loop's few cycles: where the fabric does not bind (1.82 million cycles both, the
    # Infinity Cache hit at its measured 218 ns) the stalls' order may differ by a few dozen
    assert choose(GEMM, eight).played.cycles >= choose(GEMM, one).played.cycles * (1 - 1e-4)
    if fabric is not None:
        assert t8.time_s > 1.05 * t1.time_s


def with_noc_bandwidth(chip, bytes_per_s: float):
    return replace(chip, noc=replace(chip.noc, bandwidth_bytes_per_s=bytes_per_s))


def test_dies_never_slow_a_gemm_down():
    """Hits on a die's own L2 leave the fabric: the same chip as one monolithic L2 (no dies) is
    no faster, and its L2 hits all cross the fabric."""
    flat = replace(MI300X, dies=None)
    assert _local_share(flat) == 0.0 and _local_share(MI300X) > 0.5
    # at the full clock (before the power limit holds it: that clock follows each run's energy)
    assert choose(GEMM, MI300X).played.cycles <= choose(GEMM, flat).played.cycles


def _mutated(tmp_path, old: str, new: str) -> str:
    text = (ROOT / "hw_configs" / "mi300x.yaml").read_text()
    assert old in text
    out = tmp_path / "chiplet.yaml"
    out.write_text(text.replace(old, new, 1))
    return str(out)


def test_mi300x_l2_hits_take_the_measured_infinity_cache_latency():
    # Chips and Cheese's pointer chase reads an Infinity Cache hit at about 218 ns: the file's
    # 178 ns plus the die fabric's 2 hops x 20 ns; 218 ns x 2.1 GHz = 457.8 cycles
    from archsim.hardware.memory import l2_latency_s, memory_params

    assert l2_latency_s(MI300X) == pytest.approx(218e-9)
    assert memory_params(MI300X, 0.0, 65536.0).l2_latency == pytest.approx(457.8)
    mi325x = load_system(str(ROOT / "hw_configs" / "mi325x.yaml"))[0].chip
    assert l2_latency_s(mi325x) == pytest.approx(218e-9)  # the same IODs and Infinity Cache


def test_dies_must_share_the_cores_evenly(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_system(_mutated(tmp_path, "count: 8                        # XCDs", "count: 7  # XCDs"))
    assert "chiplet.yaml:" in str(err.value)
    assert "dies.count: 304 cores do not spread evenly over 7 dies" in str(err.value)


def test_dies_keys_are_checked(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_system(_mutated(tmp_path, "l2_capacity: 4 MB", "l2_capacty: 4 MB"))
    assert "dies.l2_capacty: unknown key; did you mean 'l2_capacity'?" in str(err.value)


def test_files_without_dies_keep_their_resolved_config():
    _, resolved = load_system(str(ROOT / "hw_configs" / "h200.yaml"))
    assert "dies" not in resolved and load_system("h200")[0].chip.dies is None
