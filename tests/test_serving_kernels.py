"""The serving loop's kernels (archsim/serving/kernels.py) on small hand-worked cases: what a run
of decode steps books, the scheduler's pass over the running requests with the blocks it grows
and the bounds of the decode run it allows, and the running requests' ids kept for it. Each
compiled kernel gives what its Python gives."""

import math

import numpy as np
import pytest

from archsim.serving import kernels
from archsim.serving.histogram import GapHistogram
from archsim.serving.scheduler import Policy, SchedulerConfig, scheduler_knobs
from archsim.serving.state import InstanceState


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# blocks of 16 tokens, a budget of 8,192 tokens, decodes of 1 token, in order, blocks growing
KNOBS = scheduler_knobs(SchedulerConfig(Policy.VLLM, 8192, block_size=16), 16)


def _book(kernel, bs: int = 8):
    """Requests 0 and 1 decode k = 3 steps ending at 1.0, 1.5 and 2.5 s (blocks of `bs` tokens)."""
    computed, generated, target, blocks = ints(10, 20), ints(2, 5), ints(5, 9), ints(1, 2)
    last = np.array([0.5, 0.8])
    hist = GapHistogram()
    ends = np.array([1.0, 1.5, 2.5])
    taken, fin = kernel(ints(0, 1), computed, generated, target, blocks, bs, last, ends, hist.counts, hist.stats)
    return int(taken), fin.tolist(), computed.tolist(), generated.tolist(), blocks.tolist(), last.tolist(), hist


@pytest.mark.parametrize("python", [False, True])
def test_a_decode_run_books_its_gaps_tokens_blocks_and_finishes(python):
    kernel = kernels.book_decodes.py_func if python else kernels.book_decodes
    taken, fin, computed, generated, blocks, last, hist = _book(kernel)
    # tokens: 10 + 3 and 20 + 3 computed, 2 + 3 and 5 + 3 generated; request 0 reached its 5
    assert computed == [13, 23] and generated == [5, 8] and fin == [0]
    # blocks of 8: ceil(13 / 8) = 2 (held 1) and ceil(23 / 8) = 3 (held 2): one more each
    assert blocks == [2, 3] and taken == 2
    assert last == [2.5, 2.5]
    # gaps: the steps' 0.5 and 1.0 s for both requests, then each one's gap to the run's first
    # token, 1.0 - 0.5 and 1.0 - 0.8 s: 6 gaps summing to 1.0 + 2.0 + 0.5 + 0.2 (in that order)
    assert hist.count == 6
    assert hist.sum_s == 0.5 * 2 + 1.0 * 2 + 0.5 + (1.0 - 0.8)
    assert hist.min_s == 1.0 - 0.8 and hist.max_s == 1.0


@pytest.mark.parametrize("python", [False, True])
def test_a_decode_run_under_reserved_blocks_grows_none(python):
    kernel = kernels.book_decodes.py_func if python else kernels.book_decodes
    taken, fin, computed, generated, blocks, _, _ = _book(kernel, bs=0)
    assert blocks == [1, 2] and taken == 0 and computed == [13, 23] and generated == [5, 8] and fin == [0]


def test_a_decode_run_compiled_books_what_its_python_books():
    compiled, python = _book(kernels.book_decodes), _book(kernels.book_decodes.py_func)
    assert compiled[:-1] == python[:-1]
    assert np.array_equal(compiled[-1].counts, python[-1].counts)
    assert np.array_equal(compiled[-1].stats, python[-1].stats)


def _plan(kernel, free: int):
    """Three running decodes with 15, 16 and 30 tokens computed (blocks of 16: 1, 1 and 2 held),
    each one token from its target of 4, 9 and 6 generated (3, 5 and 3 so far)."""
    prompt, generated, computed = ints(13, 12, 28), ints(3, 5, 3), ints(15, 16, 30)
    blocks, target = ints(1, 1, 2), ints(4, 9, 6)
    out = kernel(ints(0, 1, 2), prompt, generated, computed, blocks, target, KNOBS, free)
    return [x.tolist() if isinstance(x, np.ndarray) else int(x) for x in out], blocks.tolist()


@pytest.mark.parametrize("python", [False, True])
def test_the_scheduler_pass_grows_blocks_where_free_ones_cover_them_and_bounds_the_decode_run(python):
    assert KNOBS.tolist() == [16, 8192, 1, 0, 1]
    kernel = kernels.plan_running.py_func if python else kernels.plan_running
    # each decodes 1 token: 16, 17 and 31 tokens need 1, 2 and 2 blocks: request 1 grows by 1
    (ids, ntok, total, budget, all_decodes, kmax, total_kv, max_kv), blocks = _plan(kernel, free=5)
    assert ids == [0, 1, 2] and ntok == [1, 1, 1] and total == 1 and budget == 8192 - 3 and all_decodes
    assert blocks == [1, 2, 2]
    # the run: the first finish after min(4 - 3, 9 - 5, 6 - 3) = 1 step; KV 16 + 17 + 31 = 64, max 31
    assert (kmax, total_kv, max_kv) == (1, 64, 31)
    # no free block: nothing grows and there are no bounds (the caller preempts)
    (ids, _, total, _, _, kmax, total_kv, max_kv), blocks = _plan(kernel, free=0)
    assert total == 1 and blocks == [1, 1, 2] and (kmax, total_kv, max_kv) == (-1, -1, -1)


def test_the_run_bounds_are_those_decode_bounds_gives_after_the_blocks_grew():
    """Decodes far from their targets: the run stops where the free blocks left run out."""
    n = 4
    prompt, generated, target = ints(*[100] * n), ints(*[1] * n), ints(*[500] * n)
    computed = prompt + generated - 1
    blocks = -(-computed // 16)  # each holds its KV: ceil(100 / 16) = 7 blocks
    for free in (0, 3, 9, 40):
        b = blocks.copy()
        out = kernels.plan_running(np.arange(n), prompt, generated, computed, b, target, KNOBS, free)
        total = int(out[2])
        expected = kernels.decode_bounds(np.arange(n), target, generated, computed, b, 16, free - total, True)
        assert total == 0 and tuple(int(x) for x in out[5:]) == tuple(int(x) for x in expected)
        # step j holds ceil((100 + j) / 16) blocks each: 7 to j = 12, 8 to 28, 9 to 44, 17 to 172;
        # the 4 grow together, so `free` blocks last while 4 x (blocks - 7) <= free
        assert int(out[5]) == {0: 12, 3: 12, 9: 44, 40: 172}[free]


def test_the_running_ids_follow_the_list():
    n = 8
    z = np.zeros(n, dtype=np.int64)
    s = InstanceState(z, z, z, z, z, z - 1, z, pool_blocks=10, block_size=16)
    assert s.running_ids().tolist() == []
    s.running += [3, 1, 4]
    first = s.running_ids()
    assert first.tolist() == [3, 1, 4] and s.running_ids() is first  # unchanged: the same array
    s.running.pop()
    s.running.append(5)  # as long as before, other requests
    assert s.running_ids().tolist() == [3, 1, 5]
    s.running = [r for r in s.running if r != 1]
    assert s.running_ids().tolist() == [3, 5] and s.running_ids().dtype == np.int64


@pytest.mark.parametrize("python", [False, True])
def test_a_step_counts_its_tokens_and_chunks(python):
    shape = kernels.step_shape.py_func if python else kernels.step_shape
    book = kernels.apply_tokens.py_func if python else kernels.apply_tokens
    # request 0 decodes (10 + 2 known, 11 computed); request 1 prefills 6 of its 8-token prompt;
    # request 2 finishes its prompt's last 4 tokens and emits its first token
    prompt, generated, computed = ints(10, 8, 4), ints(2, 0, 0), ints(11, 0, 0)
    ids, ntok = ints(0, 1, 2), ints(1, 6, 4)
    decodes, total, longest, before, chunk, chunks, emits, tokens = shape(ids, ntok, prompt, generated, computed)
    assert (decodes, total, longest, before) == (1, 12, 12, 12)
    assert chunk.tolist() == [False, True, True] and chunks == 2 and emits == 2 and tokens == 11
    hist = GapHistogram()
    first, last = np.full(3, math.nan), np.array([0.5, math.nan, math.nan])
    emit = book(ids, ntok, prompt, generated, computed, first, last, 2.0, hist.counts, hist.stats)
    # 0 emits its 3rd token, 2 its first; 1 emits none
    assert emit.tolist() == [0, 2] and generated.tolist() == [3, 0, 1]
    assert hist.count == 1 and hist.sum_s == 1.5 and np.isnan(first[0]) and first[2] == 2.0
