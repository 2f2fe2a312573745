"""The event loop keeps per-entry times only under a trace (without one, each sequence keeps a
ring of the `stages` + 1 entries it can still read) and takes up at each event only the
sequences that event changes. Both must play every program as the loop before them did
(tests/engine_reference.py), bit for bit."""

import numpy as np
import pytest
from engine_reference import simulate_phase as reference_phase

from archsim.compiler.compile import compile_candidates
from archsim.engine.kernels import simulate_phase
from archsim.engine.simulate import phase_memory, play_phase
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware.memory import MemoryParams

OPS = [
    Op(OpKind.GEMM, m=64, k=4096, n=6144, scaling=Scaling.FIXED),  # split-K / stream-K candidates
    Op(OpKind.GEMM, m=2048, k=4096, n=4096, scaling=Scaling.FIXED),
    Op(OpKind.ATTENTION, batch=4, heads=32, kv_heads=8, head_dim=128, q_len=1, kv_len=3000, scaling=Scaling.FIXED),
    Op(
        OpKind.ATTENTION,
        batch=1,
        heads=8,
        kv_heads=8,
        head_dim=128,
        q_len=1024,
        kv_len=1024,
        causal=True,
        scaling=Scaling.FIXED,
    ),
    Op(OpKind.VECTOR, m=1000, n=4096, vop=VectorOp.RMSNORM, scaling=Scaling.FIXED),
]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.kind.value)
def test_a_phase_plays_the_same_with_and_without_its_timeline(op, h200):
    """Under a trace every entry keeps its own times (the layout before rings); the results of a
    play without one must be the same numbers, bit for bit, for every candidate's phases."""
    phases = [ph for program in compile_candidates(op, h200.chip) for ph in program.phases]
    assert phases
    for ph in phases:
        plain, traced = play_phase(ph, h200.chip), play_phase(ph, h200.chip, trace=True)
        assert plain.total_cycles == traced.total_cycles
        for name in ("end_cycles", "busy_cycles", "stall_cycles"):
            np.testing.assert_array_equal(getattr(plain, name), getattr(traced, name))
        assert plain.timeline is None and len(traced.timeline.compute_end) == ph.entries


@pytest.fixture(scope="module")
def a100():
    from archsim.config.loader import load_system

    return load_system("a100_pcie")[0]


def _both(ph, p: MemoryParams, trace: bool):
    assert set(ph.load_trips) == {1.0}  # the loop before knew only loads of one trip
    args = (ph.core_start, ph.core_weight, ph.hbm_bytes, ph.l2_bytes)
    stores, rest = (ph.store_bytes, ph.store_l2_bytes), (int(ph.stages), p, trace)
    new = simulate_phase(*args, ph.compute_cycles, *stores, ph.load_trips, *rest)
    old = reference_phase(*args, ph.compute_cycles.astype(np.float64), *stores, *rest)
    return new, old


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.kind.value)
@pytest.mark.parametrize("trace", [False, True])
def test_every_phase_plays_as_the_loop_before(op, trace, h200, a100):
    """Per sequence end, busy and stall cycles and the phase's cycles; under a trace also every
    entry's load issue, load done and compute end and the HBM read and write at every event."""
    for chip in (h200.chip, a100.chip):
        for program in compile_candidates(op, chip):
            for ph in program.phases:
                if ph.entries == 0:
                    continue
                new, old = _both(ph, phase_memory(ph, chip), trace)
                assert new[3] == old[3]
                for i in (0, 1, 2, 4, 5, 6, 7, 8, 9) if trace else (0, 1, 2):
                    np.testing.assert_array_equal(new[i], old[i])


def test_a_load_of_no_bytes_waits_for_the_next_event_as_before(h200):
    """A DMA takes one load per event: a core whose entries load nothing issues its next load at
    the next event of any core, which the trace's load issue times show. Sequence 0 computes
    20,000 cycles per entry and loads nothing; sequence 1 loads 4 KiB per entry (an HBM latency
    of about a thousand cycles each), so its events fall inside sequence 0's computes."""
    ph_start = np.array([0, 4, 8], dtype=np.int64)
    weight = np.array([1, 3], dtype=np.int64)
    hbm = np.array([0.0, 0.0, 0.0, 0.0, 4096.0, 4096.0, 4096.0, 4096.0])
    zeros = np.zeros(8)
    cycles = np.array([20000, 20000, 20000, 20000, 5, 5, 5, 5], dtype=np.int64)
    p = phase_memory(compile_candidates(OPS[0], h200.chip)[0].phases[0], h200.chip)
    for stages in (1, 2, 3):
        rest = (zeros, zeros, stages, p, True)
        new = simulate_phase(ph_start, weight, hbm, zeros, cycles, zeros, zeros, np.ones(8), stages, p, True)
        old = reference_phase(ph_start, weight, hbm, zeros, cycles.astype(np.float64), *rest)
        for i in (0, 1, 2, 4, 5, 6):
            np.testing.assert_array_equal(new[i], old[i])
        assert new[3] == old[3]
        if stages > 1:  # sequence 0's second load went at sequence 1's first event, not at 0
            assert 0.0 < new[4][1] < 20000.0


def _free_memory() -> MemoryParams:
    return MemoryParams(1.0, 0.0, 1.0, 1e9, 1e9, 1e9, 256.0, 1.0, 1e9, 1e9)  # latencies of a cycle


def test_one_buffer_runs_entries_back_to_back():
    """One sequence of 5 entries of 10, 20, 30, 40 and 50 cycles that load nothing, one SRAM
    buffer (stages 1): entry j loads when j - 1 has computed, at once, so the core computes
    for 10 + 20 + 30 + 40 + 50 = 150 cycles without a stall. The ring holds 2 entries, so
    entries 2 and 4 reuse the places of entries 0 and 2."""
    zeros = np.zeros(5)
    cycles = np.array([10, 20, 30, 40, 50], dtype=np.int64)
    start, weight = np.array([0, 5], dtype=np.int64), np.array([1], dtype=np.int64)
    for trace in (False, True):
        end, busy, stall, total, *_rest = simulate_phase(
            start, weight, zeros, zeros, cycles, zeros, zeros, np.ones(5), 1, _free_memory(), trace
        )
        assert (end[0], busy[0], stall[0], total) == (150.0, 150.0, 0.0, 150.0)


def test_a_sequence_given_in_parts_is_the_sequence_joined():
    """Two cores' sequences, the first as parts (2 entries, then 1), the second whole, standing
    for 3 and 1 cores: entries in order 0, 1, 2 | 3, cycles rounded up (2.5 -> 3, 7.0 -> 7)."""
    from archsim.compiler.program import build_phase
    from archsim.program import entries

    first = (entries(2, hbm_bytes=[10.0, 20.0], cycles=[2.5, 7.0]), entries(1, store_bytes=5.0, cycles=1.2))
    second = entries(1, l2_bytes=8.0, cycles=4.0)
    ph = build_phase([first, second], 2, weights=[3, 1])
    np.testing.assert_array_equal(ph.core_start, [0, 3, 4])
    np.testing.assert_array_equal(ph.core_weight, [3, 1])
    np.testing.assert_array_equal(ph.hbm_bytes, [10.0, 20.0, 0.0, 0.0])
    np.testing.assert_array_equal(ph.l2_bytes, [0.0, 0.0, 0.0, 8.0])
    np.testing.assert_array_equal(ph.store_bytes, [0.0, 0.0, 5.0, 0.0])
    np.testing.assert_array_equal(ph.compute_cycles, [3, 7, 2, 4])
    assert ph.compute_cycles.dtype == np.int64
    assert first[0]["cycles"][0] == 2.5  # the parts given are left as they were
