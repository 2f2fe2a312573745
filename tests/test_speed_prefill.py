"""Long prompts: a causal prefill's attention streams B x H x n(n+1)/2 K/V blocks, dealt so that
no two cores run the same items, and beyond `attention.PLAYED_BLOCKS` of them each core's blocks
are played k at a time (compiler/attention.py). A step of k blocks pays their k access latencies
one after another and lands each on the channels of its own bytes (engine/kernels.py), so that a
core runs k blocks in k blocks' time whatever bounds it."""

import numpy as np
import pytest
from attention_ops import gqa_attention

from archsim import stopping
from archsim.compiler import attention
from archsim.compiler.attention import compile_attention
from archsim.compiler.program import coarse_steps
from archsim.config.loader import load_system
from archsim.engine.kernels import simulate_phase
from archsim.engine.simulate import play_program
from archsim.graph.ops import Op
from archsim.hardware.memory import MemoryParams
from archsim.program import entries


def test_coarse_steps_sum_runs_of_steps():
    """Five steps given as parts (2 + 3) played 2 at a time: steps 0-1, 2-3 and 4 alone. HBM
    bytes 1 + 2 = 3, 3 + 4 = 7, 5; cycles 10 + 20 = 30, 30 + 40 = 70, 50; the store of step 4
    (9 bytes) stays with the last; trips 2, 2, 1."""
    first = entries(2, hbm_bytes=[1.0, 2.0], cycles=[10.0, 20.0])
    second = entries(3, hbm_bytes=[3.0, 4.0, 5.0], cycles=[30.0, 40.0, 50.0], store_bytes=[0.0, 0.0, 9.0])
    steps = coarse_steps((first, second), 2)
    np.testing.assert_array_equal(steps["hbm_bytes"], [3.0, 7.0, 5.0])
    np.testing.assert_array_equal(steps["cycles"], [30.0, 70.0, 50.0])
    np.testing.assert_array_equal(steps["store_bytes"], [0.0, 0.0, 9.0])
    np.testing.assert_array_equal(steps["trips"], [2.0, 2.0, 1.0])


def _one_entry(hbm: float, trips: float) -> tuple:
    """(end, busy, stall, total) of one core running one entry of 10 cycles that loads `hbm`
    HBM bytes as `trips` loads, with one buffer: HBM latency 100 cycles, 8 channels of 1 byte a
    cycle interleaved every 256 bytes, Little's law out of the way (1e9 bytes in flight)."""
    p = MemoryParams(100.0, 0.0, 50.0, 1e9, 1e9, 1.0, 256.0, 8.0, 1e9, 1e9)
    loads = np.array([[hbm], [0.0], [0.0], [0.0], [trips]])  # HBM, L2, stores, trips
    out = simulate_phase(
        np.array([0, 1], dtype=np.int64),
        np.array([1], dtype=np.int64),
        loads,
        np.array([10], dtype=np.int64),
        1,
        p,
        False,
        stopping.FLAG,
    )
    return out[:4]


def test_a_load_of_several_trips_pays_each_latency_on_its_own_channels():
    """768 HBM bytes as one load: data flows after 100 cycles, over ceil(768 / 256) = 3 channels
    at 3 bytes a cycle (256 cycles), done at 356; the compute ends at 366, 356 of them a stall.
    As 3 trips of 256 bytes: 3 x 100 = 300 cycles of latency, each part on one channel at 1 byte a
    cycle (768 cycles), done at 1068, computed by 1078."""
    assert _one_entry(768.0, 1.0) == (366.0, 10.0, 356.0, 366.0)
    assert _one_entry(768.0, 3.0) == (1078.0, 10.0, 1068.0, 1078.0)


def _prefill(batch: int, prompt: int) -> Op:
    return gqa_attention(prompt, prompt, batch=batch, causal=True)


@pytest.mark.parametrize("chip_name", ["h200", "mi300x"])
def test_a_long_prefill_played_in_runs_of_blocks_keeps_its_time(chip_name, monkeypatch):
    """Llama-3-8B's prefill attention at batch 8 and 4,096 tokens streams 8 x 32 x 32 x 33 / 2 =
    135,168 K/V blocks on the H200 (bq = bk = 128), one entry each when every block is played.
    With a budget of 2^14 blocks each core plays 9 a step, about 9x fewer entries; the kernel's cycles stay within 0.5% of every block played
    (on the MI300X, bq 64 x bk 32 and latency-bound, within 1.5%: measured +0.3% and +1.0%). The
    steps carry every block's bytes and cycles."""
    chip = load_system(chip_name)[0].chip
    op = _prefill(8, 4096)
    monkeypatch.setattr(attention, "PLAYED_BLOCKS", 1 << 40)
    exact = compile_attention(op, chip)
    monkeypatch.setattr(attention, "PLAYED_BLOCKS", 1 << 14)
    coarse = compile_attention(op, chip)
    fine, steps = exact.phases[0], coarse.phases[0]
    run = int(steps.load_trips.max())
    assert run > 1 and steps.entries < 2 * fine.entries / run
    for name in ("hbm_bytes", "l2_bytes", "store_bytes", "load_trips"):
        per_core_fine = np.add.reduceat(getattr(fine, name), fine.core_start[:-1])
        per_core_steps = np.add.reduceat(getattr(steps, name), steps.core_start[:-1])
        np.testing.assert_allclose(per_core_steps, per_core_fine, rtol=1e-12)
    played = play_program(exact, chip).cycles, play_program(coarse, chip).cycles
    assert played[1] == pytest.approx(played[0], rel=0.005 if chip_name == "h200" else 0.015)


def test_a_short_prefill_plays_every_block():
    """At 2,048 tokens and batch 8 (8 x 32 x 16 x 17 / 2 = 34,816 blocks, under the budget of
    2^17) every entry is one block: one load each."""
    chip = load_system("h200")[0].chip
    (phase,) = compile_attention(_prefill(8, 2048), chip).phases
    assert phase.entries == 34816 and set(phase.load_trips) == {1.0}


CASES = [(1000, 4000, 1, {"causal": True}), (300, 700, 3, {"causal": True}), (1, 3000, 4, {"split_kv": True})]


@pytest.mark.parametrize(("q_len", "kv_len", "batch", "fields"), CASES)
def test_a_kernel_of_one_block_a_step_built_by_column_is_built_a_core_at_a_time(
    h200, monkeypatch, q_len, kv_len, batch, fields
):
    """The entries of every core at once (`item_columns`, one block a step) are those of each
    core's items built and joined a core at a time (`item_rows`, `build_phase`), bit for bit:
    a causal prefill with a past, one of three sequences, and a decode split along its KV."""
    import math

    from archsim.compiler.program import build_phase
    from archsim.program import ENTRY

    asked, dealt = [], []
    by_column, deal = attention.item_columns, attention.core_groups
    monkeypatch.setattr(
        attention, "item_columns", lambda sigs, *blocks: asked.append((sigs, blocks)) or by_column(sigs, *blocks)
    )
    monkeypatch.setattr(attention, "core_groups", lambda *args: dealt.append(deal(*args)) or dealt[-1])
    op = gqa_attention(q_len, kv_len, batch=batch, **fields)
    kv_row = op.kv_row_elements * op.kv_format.bytes
    bk = attention.item_shape(attention.copy_with(op, kv_len=0), h200.chip)[2]
    blocks = math.ceil(kv_len / bk)
    last = float((kv_len - (blocks - 1) * bk) * kv_row)
    fits = float(batch * op.kv_heads * kv_len * kv_row) <= attention.reuse_capacity_bytes(h200.chip)
    phases, run = attention._flash_phases(op, h200.chip, blocks, last, fits)
    ((sigs, made),), (groups,) = asked, dealt
    assert run == 1 and [sig for sig, _w in groups] == sigs
    rows = attention.item_rows(*made)
    joined = build_phase(
        [rows(sig).view(ENTRY).ravel() for sig in sigs], phases[0].stages, weights=[w for _s, w in groups]
    )
    for name in ("core_start", "core_weight", "hbm_bytes", "l2_bytes", "compute_cycles", "store_bytes"):
        assert getattr(joined, name).tobytes() == getattr(phases[0], name).tobytes(), name
    for name in ("store_l2_bytes", "load_trips"):
        assert getattr(joined, name).tobytes() == getattr(phases[0], name).tobytes(), name
    if q_len > 1:  # several cores, several items on one, K/V from HBM and from L2
        assert len(sigs) > 1 and max(len(sig[0]) for sig in sigs) > 1
        assert set(np.concatenate([sig[1] for sig in sigs]).tolist()) == {False, True}
    else:  # the splits' partial outputs go to L2
        assert len(phases) == 2 and phases[0].store_l2_bytes.any() and not phases[0].store_bytes.any()
