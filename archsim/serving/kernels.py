"""The serving loop's per-request inner loops as Numba leaf kernels on arrays (archsim.jit: plain
Python under NUMBA_DISABLE_JIT=1, with the same results): a step touches every running request,
tens to hundreds of them, and one Python iteration per request per step would dominate a long
trace. Each kernel is the loop the docstring of its caller states; request counters are int64
arrays indexed by request, times float64 seconds.

The inter-token gap histogram (archsim/serving/histogram.py) is updated here too: `counts` per
log bin and `stats` = [count, sum, min, max].
"""

from __future__ import annotations

import math

import numpy as np

from archsim.jit import F64Array, I64Array, njit, njit_entry
from archsim.serving.histogram import BINS, LOG_LOW_S, LOW_S, SCALE


@njit
def hist_add(counts, stats, gap_s, weight):
    """`weight` gaps of `gap_s` seconds."""
    if weight <= 0:
        return
    b = 0
    if gap_s > LOW_S:
        b = int((math.log(gap_s) - LOG_LOW_S) * SCALE)
        if b >= BINS:
            b = BINS - 1
    counts[b] += weight
    stats[0] += weight
    stats[1] += gap_s * weight
    if gap_s < stats[2]:
        stats[2] = gap_s
    if gap_s > stats[3]:
        stats[3] = gap_s


KNOB_BLOCK, KNOB_BUDGET, KNOB_VERIFY, KNOB_DECODES_FIRST, KNOB_GROWS = range(5)  # `plan_running`'s knobs


@njit_entry
def plan_running(
    order: I64Array,
    prompt: I64Array,
    generated: I64Array,
    computed: I64Array,
    blocks: I64Array,
    target: I64Array,
    knobs: I64Array,
    free: int,
):
    """The running requests' part of a step, in order (decodes first if asked), each its known
    tokens left to compute (a decode: 1, or a verify's `verify` capped by what it has left to
    generate) within the step's token budget: (ids, tokens, total blocks they grow by, budget
    left, whether every one is a one-token decode, and the `decode_bounds` of a run of such
    steps from it). `knobs` is the scheduler's record, one int each: the block size, the token
    budget, the tokens a decode verifies, whether decodes go first, and whether blocks grow as
    tokens are decoded (the policy reserves none ahead). Where the `free` blocks cover the
    growth, each request's blocks grow by its share, and where every one decodes, the run's
    bounds are those of the blocks left free; else no block grows (the caller preempts) and the
    bounds are -1."""
    bs, budget, verify = knobs[KNOB_BLOCK], knobs[KNOB_BUDGET], knobs[KNOB_VERIFY]
    decodes_first, grows = knobs[KNOB_DECODES_FIRST] != 0, knobs[KNOB_GROWS] != 0
    n = len(order)
    ids = np.empty(n, np.int64)
    ntok = np.empty(n, np.int64)
    grow = np.empty(n, np.int64)
    m = 0
    total = 0
    all_decodes = True
    for rnd in range(2 if decodes_first else 1):
        for i in range(n):
            r = order[i]
            need = prompt[r] + generated[r] - computed[r]
            is_decode = need == 1 and generated[r] > 0
            if decodes_first and (rnd == 0) != is_decode:
                continue
            if budget <= 0:
                break
            k = need
            if is_decode and verify > 1:
                k = min(verify, target[r] - generated[r])
            if k > budget:
                k = budget
            g = -(-(computed[r] + k) // bs) - blocks[r]
            if g < 0:
                g = 0
            ids[m] = r
            ntok[m] = k
            grow[m] = g
            m += 1
            total += g
            budget -= k
            if not (is_decode and k == 1):
                all_decodes = False
    kmax, total_kv, max_kv = -1, -1, -1
    if total <= free:
        for i in range(m):
            blocks[ids[i]] += grow[i]
        if all_decodes and m:
            kmax, total_kv, max_kv = run_bounds(ids, m, target, generated, computed, blocks, bs, free - total, grows)
    return ids[:m], ntok[:m], total, budget, all_decodes, kmax, total_kv, max_kv


@njit_entry
def step_shape(ids: I64Array, ntok: I64Array, prompt: I64Array, generated: I64Array, computed: I64Array):
    """What a step computes: (decodes, their KV total and max with this step's tokens, their KV
    before it, which entries are prefill chunks and how many, how many one-token emissions it
    makes, its tokens)."""
    decodes = 0
    chunks = 0
    tokens = 0
    total = 0
    longest = 0
    before = 0
    emits = 0
    chunk = np.zeros(len(ids), np.bool_)
    for i in range(len(ids)):
        r, k = ids[i], ntok[i]
        tokens += k
        known = prompt[r] + generated[r]
        if generated[r] > 0 and computed[r] + 1 == known:
            decodes += 1
            total += computed[r] + k
            longest = max(longest, computed[r] + k)
            before += computed[r] + 1
        else:
            chunk[i] = True
            chunks += 1
        if computed[r] + k == known:
            emits += 1
    return decodes, total, longest, before, chunk, chunks, emits, tokens


@njit_entry
def apply_tokens(
    ids: I64Array,
    ntok: I64Array,
    prompt: I64Array,
    generated: I64Array,
    computed: I64Array,
    first_token: F64Array,
    last_token: F64Array,
    end_s: float,
    counts: I64Array,
    stats: F64Array,
):
    """Book a step ending at `end_s`: each request computes its tokens and, when all its known
    tokens are computed, emits one (its first token, or a gap since its last). Returns those
    that emitted."""
    emit = np.empty(len(ids), np.int64)
    m = 0
    for i in range(len(ids)):
        r = ids[i]
        computed[r] += ntok[i]
        if computed[r] == prompt[r] + generated[r]:
            if generated[r] == 0:
                first_token[r] = end_s
            else:
                hist_add(counts, stats, end_s - last_token[r], 1)
            generated[r] += 1
            last_token[r] = end_s
            emit[m] = r
            m += 1
    return emit[:m]


@njit_entry
def decode_bounds(
    ids: I64Array,
    target: I64Array,
    generated: I64Array,
    computed: I64Array,
    blocks: I64Array,
    bs: int,
    free: int,
    grows: bool,
):
    """For a run of decode-only steps of `ids` (the first step's blocks held): the most steps
    before a finish and, when blocks grow, the most the free blocks cover (after j steps a
    request with c computed holds ceil((c + j) / bs) blocks); its KV total and max in step 1."""
    return run_bounds(ids, len(ids), target, generated, computed, blocks, bs, free, grows)


@njit
def run_bounds(ids, n, target, generated, computed, blocks, bs, free, grows):
    """`decode_bounds` of the first `n` of `ids`."""
    kmax = 1 << 62 if n else 0
    total = 0
    longest = 0
    for i in range(n):
        r = ids[i]
        kmax = min(kmax, target[r] - generated[r])
        total += computed[r] + 1
        longest = max(longest, computed[r] + 1)
    if grows and kmax > 1:
        lo, hi = 1, kmax
        while lo < hi:
            mid = lo + (hi - lo + 1) // 2
            need = 0
            for i in range(n):
                r = ids[i]
                g = -(-(computed[r] + mid) // bs) - blocks[r]
                if g > 0:
                    need += g
            if need <= free:
                lo = mid
            else:
                hi = mid - 1
        kmax = lo
    return kmax, total, longest


@njit_entry
def book_decodes(
    ids: I64Array,
    computed: I64Array,
    generated: I64Array,
    target: I64Array,
    blocks: I64Array,
    bs: int,
    last_token: F64Array,
    ends_s: F64Array,
    counts: I64Array,
    stats: F64Array,
):
    """Book k = len(ends_s) decode-only steps of `ids` ending at `ends_s`: the gaps between the
    step ends (each for every request), then each request's gap to its first token of the run
    and k more tokens each, and where `bs` > 0 (the block size; 0 where the policy reserved the
    blocks ahead) the blocks of `bs` tokens its computed tokens fill. Returns the blocks taken
    in all and the requests that reached their `target` tokens (in `ids` order)."""
    b, k = len(ids), len(ends_s)
    for j in range(1, k):
        hist_add(counts, stats, ends_s[j] - ends_s[j - 1], b)
    first_end_s, end_s = ends_s[0], ends_s[k - 1]
    fin = np.empty(b, np.int64)
    n = 0
    taken = 0
    for r in ids:
        hist_add(counts, stats, first_end_s - last_token[r], 1)
        last_token[r] = end_s
        computed[r] += k
        generated[r] += k
        if bs > 0:
            g = -(-computed[r] // bs) - blocks[r]
            if g > 0:
                blocks[r] += g
                taken += g
        if generated[r] >= target[r]:
            fin[n] = r
            n += 1
    return taken, fin[:n]
