"""The event loop keeps per-entry times only under a trace (without one, each sequence keeps a
ring of the `stages` + 1 entries it can still read) and takes up at each event only the
sequences that event changes. Both must play every program as the loop before them did, bit for
bit (tests/test_engine_recorded.py compares its outputs with recorded ones)."""

import numpy as np
import pytest
from attention_ops import gqa_attention

from archsim.compiler.compile import compile_candidates
from archsim.engine.simulate import phase_memory, play_phase, play_phase_on
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware.memory import MemoryParams
from archsim.program import Phase

OPS = [
    Op(OpKind.GEMM, m=64, k=4096, n=6144, scaling=Scaling.FIXED),  # split-K / stream-K candidates
    Op(OpKind.GEMM, m=2048, k=4096, n=4096, scaling=Scaling.FIXED),
    gqa_attention(1, 3000, batch=4),
    gqa_attention(1024, 1024, heads=8, causal=True),
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


def test_a_load_of_no_bytes_waits_for_the_next_event(h200):
    """A DMA takes one load per event: a core whose entries load nothing issues its next load at
    the next event of any core, which the trace's load issue times show. Sequence 0 computes
    20,000 cycles per entry and loads nothing; sequence 1 loads 4 KiB per entry (an HBM latency
    of about a thousand cycles each), so its events fall inside sequence 0's computes."""
    zeros = np.zeros(8)
    p = phase_memory(compile_candidates(OPS[0], h200.chip)[0].phases[0], h200.chip)
    for stages in (1, 2, 3):
        ph = Phase(
            core_start=np.array([0, 4, 8], dtype=np.int64),
            core_weight=np.array([1, 3], dtype=np.int64),
            hbm_bytes=np.array([0.0, 0.0, 0.0, 0.0, 4096.0, 4096.0, 4096.0, 4096.0]),
            l2_bytes=zeros,
            compute_cycles=np.array([20000, 20000, 20000, 20000, 5, 5, 5, 5], dtype=np.int64),
            store_bytes=zeros,
            store_l2_bytes=zeros,
            load_trips=np.ones(8),
            stages=stages,
        )
        issue = play_phase_on(ph, p, trace=True).timeline.load_issue
        assert issue[0] == 0.0
        if stages > 1:  # sequence 0's second load went at sequence 1's first event, not at 0
            assert 0.0 < issue[1] < 20000.0
        else:  # one buffer: the second load waits for the first entry's compute
            assert issue[1] == 20000.0


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
    ph = Phase(start, weight, zeros, zeros, cycles, zeros, zeros, np.ones(5), stages=1)
    for trace in (False, True):
        r = play_phase_on(ph, _free_memory(), trace)
        assert (r.end_cycles[0], r.busy_cycles[0], r.stall_cycles[0], r.total_cycles) == (150.0, 150.0, 0.0, 150.0)


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
