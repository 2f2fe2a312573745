"""The step-time model: times of any step (prefill chunks and decodes mixed) from the hardware
model, memoised, for `archsim run` and serving alike. Seconds throughout.

A step's time is composed as `archsim.graph.mixed` defines it: ops on the total tokens T, the
LM head on one row per sequence (one per token checked in a speculative verify step), attention
per prefill chunk at its own (new tokens, past), and the batched decode attention: max(B
decodes at their mean KV length, the longest decode alone). Each part is its ops timed by
`time_ops` (archsim/runner/generation.py): every op as `choose` times it, and collectives on
the links, overlapping the op that produces them where the fabric allows. Under a parallel
layout the ops are the busiest chip's with their collectives: tensor parallel splits every op;
expert parallel runs one data-parallel rank's tokens through the routed experts (the caller
gives each rank its share of the requests); pipeline parallel cuts the step's sequences into
m = min(sequences, stages) micro-batches, each taking time `stage` on the busiest stage and
`send` to the next, and the step, micro-batches in flight from step to step, takes
max(m x stage, stages x (stage + send)), as `archsim run` times a decode step.

Simulating a GEMM on a new shape costs 0.1-2 s, so each part is simulated on a grid of shapes
and interpolated linearly between them. A grid has `resolution` points g per doubling of the
step's tokens and of its sequences (twice as many for the query tokens of a prefill chunk and
four times for the decode batch, whose attention is cheap to simulate); each point is simulated
at g and at g + 1. GEMM time climbs in stairs as output tiles fill waves of cores, and tiles
are powers of two, so a round g is often the last token of a stair and g + 1 the first of the
next: interpolating from g + 1 to the next g keeps the stairs' mean (interpolating from g to g
would sit on their lower edge, 5% low on the H200 model). KV lengths (attention time is affine
in the KV blocks it streams) take `resolution` plain points per doubling. Values below the
first spacing of 4 and the knots themselves are exact; `resolution = 0` simulates every shape.
Each simulated part is also kept on disk (archsim/opcache.py), so a later process finds it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from archsim import opcache
from archsim.graph.builder import Step
from archsim.graph.mixed import (
    MixedBatch,
    build_mixed_step,
    decode_attention_ops,
    head_ops,
    pipeline_ops,
    prefill_attention_ops,
    step_ops,
    token_ops,
)
from archsim.graph.model import Phase, Scenario, Workload
from archsim.graph.ops import Op
from archsim.graph.parallel import Parallelism
from archsim.hardware import System
from archsim.memo import memo
from archsim.runner.generation import ops_time_s

DEFAULT_RESOLUTION = 2
QUERY_FACTOR = 2  # finer grid over a chunk's query tokens than over the step's tokens
DECODE_BATCH_FACTOR = 4  # and finer still over the decode batch
Chunks = Sequence[tuple[int, int]]  # prefill chunks: (new tokens, past tokens)
DecodeTable = tuple[int, array, int, int]  # `StepModel._dense`'s: first KV length, values, lengths held


def mixed_step_time_s(w: Workload, system: System, batch: MixedBatch) -> float:
    """Exact time of one mixed step on one chip, every op simulated at its own shape (no grid)."""
    m = build_mixed_step(w, batch)
    decode = max(ops_time_s(m.decode_attention, system), ops_time_s(m.longest_decode, system))
    return (
        ops_time_s(m.tokens, system)
        + ops_time_s(m.head, system)
        + decode
        + sum(ops_time_s(ops, system) for ops in m.prefill_attention)
    )


def grid_step(n: int, per_octave: int) -> int:
    """Spacing of the grid at n: 1 below 2 x per_octave, else 2^floor(log2 n) / per_octave
    (0: no grid, every value exact)."""
    if per_octave <= 0:
        return 0
    if n < 2 * per_octave:
        return 1
    return (1 << (n.bit_length() - 1)) // per_octave


def bracket(n: int, per_octave: int, knots: bool = False) -> tuple[int, int]:
    """The simulated points (a, b) whose line gives the value at n, or (n, n) when n is simulated:
    a grid point g <= n and the next one; with `knots`, from g + 1 instead of g (n = g, g + 1 exact)."""
    step = grid_step(n, per_octave)
    lo = n - n % step if step else n
    off = n - lo
    if step <= (2 if knots else 1) or off == 0 or (knots and off == 1):
        return n, n
    return (lo + 1 if knots else lo), lo + step


def grid_points(lo: int, hi: int, per_octave: int) -> list[int]:
    """Plain grid points covering [lo, hi]: from the one at or below lo to the one at or above hi."""
    step = grid_step(lo, per_octave)
    x = lo - lo % step if step else lo
    points = [x]
    while x < hi:
        x += max(1, grid_step(x, per_octave))
        points.append(x)
    return points


class _Memo:
    """A function of integers simulated once per point."""

    def __init__(self, f: Callable[..., float]):
        self.f = f
        self.values: dict[tuple[int, ...], float] = {}

    def __call__(self, *key: int) -> float:
        v = self.values.get(key)
        if v is None:
            v = self.values[key] = self.f(*key)
        return v


class StepModel:
    """Memoised, interpolated step times of one workload on one instance: a chip, or the busiest
    chip of a parallel layout over a system's chips (its ops, collectives and pipeline)."""

    def __init__(
        self,
        w: Workload,
        system: System,
        resolution: int = DEFAULT_RESOLUTION,
        parallelism: Parallelism | None = None,
    ):
        self.w, self.system, self.resolution = w, system, resolution
        self.chip = system.chip
        self.kv_res = resolution
        self.query_res = resolution * QUERY_FACTOR
        self.batch_res = resolution * DECODE_BATCH_FACTOR
        par = parallelism if parallelism is not None and not parallelism.is_single else None
        self.parallelism = par
        self.stages = par.pp if par is not None else 1
        # parts are timed at the sizes given: one micro-batch; attention and the LM head of one rank
        tok = replace(par, micro_batches=1) if par is not None else None
        seq = replace(par, ep=1, micro_batches=1) if par is not None else None
        cache = opcache.cache_for(system)

        def part(ops: Sequence[Op]) -> float:
            key = opcache.ops_key(ops, "ops_time_s") if cache is not None else ""
            hit = opcache.seconds_from_value(cache.get(key)) if cache is not None else None
            if hit is not None:
                return hit
            t = ops_time_s(ops, system)
            if cache is not None:
                cache.put(key, t)
            return t

        def send(t: int) -> list[Op]:
            return pipeline_ops(step_ops(w, Step(Phase.PREFILL, 1, t, 0), tok))

        self._tokens = _Memo(lambda t: part(token_ops(w, t, tok)))
        self._head = _Memo(lambda s: part(head_ops(w, s, seq)))
        self._send = _Memo(lambda t: part(send(t)))
        self._decode = _Memo(lambda b, k: part(decode_attention_ops(w, b, k, seq)))
        self._prefill = _Memo(lambda q, p: part(prefill_attention_ops(w, q, p, 1, seq)))
        self._batched_prefill = _Memo(lambda q, b: part(prefill_attention_ops(w, q, 0, b, seq)))
        self._verify = _Memo(lambda b, q, p: part(prefill_attention_ops(w, q, p, b, seq)))
        self._chunk_cache: dict[tuple[int, int], float] = {}
        self._tokens_at: dict[int, float] = {}  # interpolated values, as asked for
        self._head_at: dict[int, float] = {}
        self._tables: dict[int, DecodeTable] = {}
        self._fixed: dict[int, float] = {}
        self._batch_pairs: dict[int, tuple[int, int, float]] = {}  # `_decode_pair`'s grid batches of a batch

    # --- parts, interpolated on their grids ---
    def _interp1(self, memo: _Memo, n: int, res: int) -> float:
        lo, hi = bracket(n, res, knots=True)
        if lo == hi:
            return memo(n)
        a, b = memo(lo), memo(hi)
        return a + (b - a) * (n - lo) / (hi - lo)

    def tokens_s(self, tokens: int) -> float:
        v = self._tokens_at.get(tokens)
        if v is None:
            v = self._tokens_at[tokens] = self._interp1(self._tokens, tokens, self.resolution)
        return v

    def head_s(self, sequences: int) -> float:
        v = self._head_at.get(sequences)
        if v is None:
            v = self._head_at[sequences] = self._interp1(self._head, sequences, self.resolution)
        return v

    def send_s(self, tokens: int) -> float:
        """The pipeline's send of `tokens` tokens' hidden states to the next stage (0 without)."""
        return self._interp1(self._send, tokens, self.resolution) if self.stages > 1 else 0.0

    def prefill_chunk_s(self, new_tokens: int, past: int) -> float:
        """Attention of one prefill chunk, bilinear in (new tokens, past)."""
        key = (new_tokens, past)
        v = self._chunk_cache.get(key)
        if v is None:
            v = self._chunk_cache[key] = self._bilinear(self._prefill, new_tokens, self.query_res, past)
        return v

    def _bilinear(self, memo: _Memo, x: int, x_res: int, y: int, y_res: int | None = None) -> float:
        """memo(x, y) interpolated: x on a grid with knots, y on the KV grid (or one of
        `y_res` points per doubling with knots)."""
        x0, x1 = bracket(x, x_res, knots=True)
        y0, y1 = bracket(y, self.kv_res) if y_res is None else bracket(y, y_res, knots=True)
        fy = (y - y0) / (y1 - y0) if y1 != y0 else 0.0
        fx = (x - x0) / (x1 - x0) if x1 != x0 else 0.0

        def at(xx: int) -> float:
            a = memo(xx, y0)
            return a if fy == 0.0 else a + (memo(xx, y1) - a) * fy

        lo = at(x0)
        return lo if fx == 0.0 else lo + (at(x1) - lo) * fx

    def _dense(self, batch: int, lo: int, hi: int) -> DecodeTable:
        """Decode attention of `batch` (a grid batch) decodes at every KV length of a table that
        holds at least [lo, hi]: (first KV length, values, first and last KV length held)."""
        table = self._tables.get(batch)
        if table is None or lo < table[2] or hi > table[3]:
            table = self._tables[batch] = self._extended(batch, table, lo, hi)
        return table

    def _extended(self, batch: int, table: DecodeTable | None, lo: int, hi: int) -> DecodeTable:
        """`table` (None: none yet) made to hold [lo, hi] as well: the values from the KV grid
        point at or below the lowest KV length held to the one at or above the highest, linear
        between them (`np.interp`: a value reads only the two grid points around it). Only the
        grid points of the lengths newly held are simulated; where the lengths held grow past the
        table's room, the room grows on that side by half its span again (fewer copies)."""
        if table is not None:
            lo, hi = min(lo, table[2]), max(hi, table[3])
        ks = grid_points(lo, hi, self.kv_res)
        lo, hi = ks[0], ks[-1]
        if table is None:
            first, values, parts = lo, array("d", bytes(8 * (hi - lo + 1))), [ks]
        else:
            first, values, held = table[0], table[1], (table[2], table[3])
            last = first + len(values) - 1
            if lo < first or hi > last:
                span = last - first
                start = first if lo >= first else max(0, min(lo, first - span // 2))
                end = last if hi <= last else max(hi, last + span // 2)
                grown = array("d", bytes(8 * (end - start + 1)))
                grown[held[0] - start : held[1] - start + 1] = values[held[0] - first : held[1] - first + 1]
                first, values = start, grown
            # the new lengths: below those held and above them (a grid point at both ends of each)
            parts = [[k for k in ks if k <= held[0]], [k for k in ks if k >= held[1]]]
        for part in parts:
            if len(part) > 1 or table is None:
                vs = np.array([self._decode(batch, k) for k in part])
                ys = np.interp(np.arange(part[0], part[-1] + 1), np.array(part, dtype=np.float64), vs)
                values[part[0] - first : part[-1] - first + 1] = array("d", ys.tobytes())
        return first, values, lo, hi

    def _decode_pair(self, batch: int, lo: int, hi: int):
        """The tables of the grid batches around `batch` and the weight of the upper one."""
        pair = self._batch_pairs.get(batch)
        if pair is None:
            b0, b1 = bracket(batch, self.batch_res, knots=True)
            pair = self._batch_pairs[batch] = (b0, b1, (batch - b0) / (b1 - b0) if b1 != b0 else 0.0)
        b0, b1, f = pair
        t0 = self._dense(b0, lo, hi)
        if b1 == b0:
            return t0, t0, 0.0
        return t0, self._dense(b1, lo, hi), f

    def decode_attention_s(self, batch: int, kv_len: int) -> float:
        """Attention of `batch` decodes at `kv_len`: linear in the KV length between grid points,
        and in the batch between grid batches."""
        (l0, v0, _, _), (l1, v1, _, _), f = self._decode_pair(batch, kv_len, kv_len)
        a = v0[kv_len - l0]
        return a if f == 0.0 else a + (v1[kv_len - l1] - a) * f

    def verify_attention_s(self, batch: int, tokens: int, past: int) -> float:
        """Attention of `batch` sequences checking `tokens` tokens each after `past` (speculative
        decoding's verify), linear in the batch and in past between grid points."""
        b0, b1 = bracket(batch, self.batch_res, knots=True)
        p0, p1 = bracket(past, self.kv_res)
        fp = (past - p0) / (p1 - p0) if p1 != p0 else 0.0

        def at(b: int) -> float:
            a = self._verify(b, tokens, p0)
            return a if fp == 0.0 else a + (self._verify(b, tokens, p1) - a) * fp

        lo = at(b0)
        return lo if b1 == b0 else lo + (at(b1) - lo) * (batch - b0) / (b1 - b0)

    def decode_attention_series_s(self, batch: int, kv_lens: np.ndarray) -> np.ndarray:
        """decode_attention_s at each of the consecutive KV lengths `kv_lens`."""
        lo, hi = int(kv_lens[0]), int(kv_lens[-1])
        (l0, v0, _, _), (l1, v1, _, _), f = self._decode_pair(batch, lo, hi)
        a = np.frombuffer(v0)[lo - l0 : hi - l0 + 1]
        return a if f == 0.0 else a + (np.frombuffer(v1)[lo - l1 : hi - l1 + 1] - a) * f

    def decode_steps_s(self, batch: int, total_kv: int, max_kv: int, steps: int) -> list[float]:
        """decode_step_s of `steps` consecutive decode-only steps (as decode_run_s), as floats:
        the serving loop's short runs."""
        m = min(batch, self.stages)
        b = -(-batch // m)
        mean = -(-total_kv // batch)
        (l0, v0, _, _), (l1, v1, _, _), f = self._decode_pair(b, mean, mean + steps)
        lo_l, vl, _, _ = self._dense(1, max_kv, max_kv + steps)
        fixed, i0, i1, il = self.decode_fixed_s(b), mean - l0, mean - l1, max_kv - lo_l
        out = []
        for j in range(steps):
            a = v0[i0 + j]
            if f:
                a += (v1[i1 + j] - a) * f
            longest = vl[il + j]
            out.append(fixed + (a if a > longest else longest))
        if self.stages > 1:
            send = self.send_s(b)
            out = [max(m * x, self.stages * (x + send)) for x in out]
        return out

    # --- whole steps ---
    def _stage_s(self, decodes: int, total_kv: int, max_kv: int, chunks: Chunks, verify: int, m: int) -> float:
        """One of m micro-batches on the busiest stage (the whole step when m = 1)."""
        b = -(-decodes // m)
        t = self.tokens_s(b * verify + -(-sum(n for n, _ in chunks) // m))
        t += self.head_s(b * verify + -(-len(chunks) // m))
        if chunks:
            t += sum(self.prefill_chunk_s(n, past) for n, past in chunks) / m
        if decodes:
            mean = -(-total_kv // decodes)
            if verify == 1:
                t += max(self.decode_attention_s(b, mean), self.decode_attention_s(1, max_kv))
            else:
                batched = self.verify_attention_s(b, verify, mean - verify)
                t += max(batched, self.verify_attention_s(1, verify, max_kv - verify))
        return t

    def step_s(self, decodes: int, total_kv: int, max_kv: int, chunks: Chunks = (), verify: int = 1) -> float:
        """One step: `decodes` decoding sequences whose KV lengths (this step's tokens included)
        sum to `total_kv` and peak at `max_kv`, each computing `verify` tokens (1, or the k + 1
        of a speculative verify), and the prefill (new, past) chunks."""
        if self.stages == 1:
            return self._stage_s(decodes, total_kv, max_kv, chunks, verify, 1)
        m = max(1, min(decodes + len(chunks), self.stages))
        stage = self._stage_s(decodes, total_kv, max_kv, chunks, verify, m)
        tokens = -(-(decodes * verify + sum(n for n, _ in chunks)) // m)
        return max(m * stage, self.stages * (stage + self.send_s(tokens)))

    def decode_step_s(self, decodes: int, total_kv: int, max_kv: int) -> float:
        """A decode-only step (as step_s with no chunks)."""
        return self.decode_steps_s(decodes, total_kv, max_kv, 1)[0]

    def uniform_prefill_s(self, batch: int, prompt_tokens: int) -> float:
        """A prefill of `batch` equal prompts as one batched attention op (as `archsim run` and
        static batching run it)."""
        attention = self._bilinear(self._batched_prefill, prompt_tokens, self.query_res, batch, self.batch_res)
        stage = self.tokens_s(batch * prompt_tokens) + self.head_s(batch) + attention
        if self.stages == 1:
            return stage
        return self.stages * (stage + self.send_s(batch * prompt_tokens))

    def decode_fixed_s(self, batch: int) -> float:
        """The part of a decode-only step of `batch` sequences that is not attention (a lower
        bound on its time)."""
        fixed = self._fixed.get(batch)
        if fixed is None:
            fixed = self._fixed[batch] = self.tokens_s(batch) + self.head_s(batch)
        return fixed

    def decode_run_s(self, batch: int, total_kv: int, max_kv: int, steps: int) -> np.ndarray:
        """Times of `steps` consecutive decode-only steps of `batch` sequences whose KV lengths
        (new token included) sum to `total_kv` and peak at `max_kv` in the first step."""
        m = min(batch, self.stages)
        b = -(-batch // m)
        j = np.arange(steps, dtype=np.int64)
        mean = self.decode_attention_series_s(b, -(-total_kv // batch) + j)
        longest = self.decode_attention_series_s(1, max_kv + j)
        stage = self.decode_fixed_s(b) + np.maximum(mean, longest)
        if self.stages == 1:
            return stage
        return np.maximum(m * stage, self.stages * (stage + self.send_s(b)))


def normalised(w: Workload) -> Workload:
    """The workload without its scenario (step times do not depend on it)."""
    return replace(w, scenario=Scenario(1, 1, 1), source="")


@memo(maxsize=16)
def _model(w: Workload, system: System, resolution: int, parallelism: Parallelism | None, cached: bool) -> StepModel:
    return StepModel(w, system, resolution, parallelism)


def step_model(
    w: Workload, system: System, resolution: int = DEFAULT_RESOLUTION, parallelism: Parallelism | None = None
) -> StepModel:
    """The shared step model of (workload, system, resolution, layout): its memo lives as long as
    the process."""
    par = parallelism if parallelism is not None and not parallelism.is_single else None
    return _model(normalised(w), system, resolution, par, opcache.enabled())
