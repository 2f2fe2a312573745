"""The event loop keeps per-entry times only under a trace: without one, each sequence keeps a
ring of the `stages` + 1 entries it can still read. Both ways must play every program alike."""

import numpy as np
import pytest

from archsim.compiler.compile import compile_candidates
from archsim.engine.kernels import simulate_phase
from archsim.engine.simulate import play_phase
from archsim.graph.ops import Op, OpKind, VectorOp
from archsim.hardware.memory import MemoryParams

OPS = [
    Op(OpKind.GEMM, m=64, k=4096, n=6144),  # split-K / stream-K candidates
    Op(OpKind.GEMM, m=2048, k=4096, n=4096),
    Op(OpKind.ATTENTION, batch=4, heads=32, kv_heads=8, head_dim=128, q_len=1, kv_len=3000),
    Op(OpKind.ATTENTION, batch=1, heads=8, kv_heads=8, head_dim=128, q_len=1024, kv_len=1024, causal=True),
    Op(OpKind.VECTOR, m=1000, n=4096, vop=VectorOp.RMSNORM),
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
            start, weight, zeros, zeros, cycles, zeros, zeros, 1, _free_memory(), trace
        )
        assert (end[0], busy[0], stall[0], total) == (150.0, 150.0, 0.0, 150.0)
