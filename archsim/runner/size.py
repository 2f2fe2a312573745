"""The size of an op's program, estimated without building it, and the checks that refuse a run,
a serving setup or a step whose ops would exceed MAX_PROGRAM_ENTRIES (archsim/limits.py) or
have no rate on the chip's matrix units, before any of them is simulated. Sizes in entries
(tile steps).
"""

from __future__ import annotations

import math

from archsim.compiler.attention import _blocks
from archsim.compiler.gemm import TILE_SIZES, shortlist_head, shortlist_size
from archsim.compiler.gemm_phases import GemmMapping, Tiling
from archsim.compiler.tiles import matrix_format
from archsim.errors import TooLargeError
from archsim.graph.builder import Step, build_step
from archsim.graph.model import Phase
from archsim.graph.ops import OpKind
from archsim.graph.parallel import ParallelismError, shard_step
from archsim.limits import MAX_PROGRAM_ENTRIES
from archsim.runner.memory import footprint
from archsim.units import ceil_div

SHORTLIST_SPREAD = 16  # a GEMM's shortlisted tiles are down to a quarter of the widest edge (128 of 512)


def gemm_entries(op, chip) -> int:
    """Entries the largest of a GEMM's candidate programs can hold, from above (each candidate
    tiling that `archsim.compiler.gemm.shortlist` picks is compiled and played): one work item
    per output tile and K slice, up to three distinct core sequences of K steps (identical cores
    are stored once; one core has one), and under stream-K the tail of up to two waves whose K
    steps are dealt per core; a tiling whose items fill one wave, also dealt over half the cores
    (two items a core).

    The candidates are bounded by the tilings the shortlist picks from (`shortlist_head`, the
    analytic estimate's best: arithmetic over the tile grid), so no raster is walked here. A
    GEMM whose tiles at the widest edge, SHORTLIST_SPREAD times over, already pass the limit is
    counted that way, without ranking."""
    edge = max(TILE_SIZES)
    widest = op.groups * ceil_div(op.m, edge) * ceil_div(op.n, edge)
    if widest * SHORTLIST_SPREAD > MAX_PROGRAM_ENTRIES:
        return widest * SHORTLIST_SPREAD
    cores, worst = chip.cores, 0
    for t in shortlist_head(op, chip, shortlist_size(op)) or (Tiling(8, 8, 32),):
        tm, tn, tk, split = t.tm, t.tn, t.tk, t.split
        items = op.groups * ceil_div(op.m, tm) * ceil_div(op.n, tn) * max(1, split)
        ksteps = ceil_div(op.k, tk)
        per_item = ceil_div(ksteps, max(1, split))
        # a one-wave tiling may also be dealt over half the cores (choose/pick.py `fills_one_wave`)
        dealt = cores // 2 if cores < 2 * items <= 2 * cores else cores
        sequences = min(3, cores) * ceil_div(items, max(1, dealt)) * per_item
        tail = min(items, 2 * cores) * ksteps if t.mapping is GemmMapping.STREAM_K else 0
        worst = max(worst, items + sequences + tail)
    return worst


def attention_entries(op, chip) -> int:
    """KV blocks streamed by all work items of a flash-attention op: (sequence, query head or
    KV head, query block) items, each one entry per K/V block it reads (the compiler walks every
    block even where the engine plays them k at a time: compiler/attention.py)."""
    _rows, bq, bk = _blocks(op, chip)
    kv_blocks = ceil_div(op.kv_len, bk)
    if op.q_len == 1:  # decode: one item per (sequence, KV head), its KV range in blocks
        return op.batch * op.kv_heads * kv_blocks
    q_blocks = ceil_div(op.q_len, bq)
    if not op.causal:
        per_head = q_blocks * kv_blocks
    else:  # query block i reads the blocks up to its last row, past KV included
        past = op.kv_len - op.q_len
        last_rows = [min(op.q_len, (i + 1) * bq) - 1 + past for i in range(min(q_blocks, 1 << 16))]
        per_head = sum(min(kv_blocks, r // bk + 1) for r in last_rows)
        if q_blocks > len(last_rows):  # beyond 65,536 query blocks: every block reads them all
            per_head += (q_blocks - len(last_rows)) * kv_blocks
    return op.batch * op.heads * per_head


def streaming_entries(op, chip) -> int:
    """A vector op, copy or gather: its bytes in entries of a quarter of a core's SRAM, plus a
    chain per row for row-wise ops (a bound from above: rows never share an entry)."""
    quarter = max(1, int(chip.core.sram.capacity_bytes) // 4)
    if op.bytes:
        return ceil_div(2 * int(op.bytes), quarter)
    return ceil_div(math.ceil(op.m * op.n * op.dtype.bytes), quarter) + op.m


def program_entries(op, chip) -> int:
    """An estimate of the entries an op's program holds on `chip`, computed without building it."""
    if op.kind is OpKind.GEMM:
        return gemm_entries(op, chip)
    if op.kind is OpKind.ATTENTION:
        return attention_entries(op, chip)
    if op.kind in (OpKind.VECTOR, OpKind.COPY, OpKind.EMBEDDING):
        return streaming_entries(op, chip)
    return 0  # collectives are costed in closed form


def check_op(op, chip, what: str = "") -> None:
    """UnsupportedError if the chip's matrix units have no rate for the op's format (see
    `archsim.compiler.tiles.matrix_format`), TooLargeError if its program would exceed
    MAX_PROGRAM_ENTRIES."""
    matrix_format(op, chip, what)
    entries = program_entries(op, chip)
    if entries > MAX_PROGRAM_ENTRIES:
        name = what or op.name or op.kind.value
        raise TooLargeError(
            f"{name} is too large to simulate: about {entries:,} program entries "
            f"(tile steps) on {chip.name}, more than the limit of {MAX_PROGRAM_ENTRIES:,} ({describe(op)}); "
            "fewer tokens per step (a smaller batch, prompt or prefill chunk) shrinks it"
        )


def check_steps_size(w, system, steps, parallelism=None) -> None:
    """Every op of the given steps (`archsim.graph.builder.Step`) supported and within
    MAX_PROGRAM_ENTRIES on the busiest chip of `parallelism`: refused before any of them is
    simulated."""
    for step in steps:
        single = parallelism is None or parallelism.is_single
        ops = build_step(w, step) if single else shard_step(w, step, parallelism).ops
        for op in ops:
            check_op(op, system.chip, f"the {step.phase.value} step's {op.name or op.kind.value}")


def check_run_size(w, system, parallelism=None) -> None:
    """The prefill and the last decode step of the workload's scenario within the bound (the
    largest ops of a run); nothing to check if the scenario does not fit in memory anyway, or
    if the layout is refused (the run reports either)."""
    par = None if parallelism is None or parallelism.is_single else parallelism
    s = w.scenario
    try:
        if not footprint(w, system, None, par).fits:
            return
        steps = [Step(Phase.PREFILL, s.batch, s.prompt_tokens, 0)]
        if s.output_tokens > 1:
            steps.append(Step(Phase.DECODE, s.batch, 1, s.prompt_tokens + s.output_tokens - 1))
        check_steps_size(w, system, steps, par)
    except ParallelismError:
        return


def check_serve_size(w, systems, longest_prompt: int, longest_context: int, max_batched_tokens: int) -> None:
    """The largest steps a serving run can hold within the bound, on each of `systems`: a
    prefill chunk of the longest prompt (at most `max_batched_tokens` at once) at the end of its
    prompt, and a decode token at the longest context (attention is costed per request)."""
    chunk = max(1, min(longest_prompt, max_batched_tokens))
    steps = [
        Step(Phase.PREFILL, 1, chunk, max(0, longest_prompt - chunk)),
        Step(Phase.DECODE, 1, 1, max(1, longest_context - 1)),
    ]
    for system in systems:
        check_steps_size(w, system, steps)


def describe(op) -> str:
    """The shape of an op in a few words, for messages."""
    if op.kind is OpKind.GEMM:
        return f"M {op.m:,} x K {op.k:,} x N {op.n:,}" + (f" x {op.groups} groups" if op.groups > 1 else "")
    if op.kind is OpKind.ATTENTION:
        return f"batch {op.batch:,}, {op.heads:,} heads, {op.q_len:,} queries over {op.kv_len:,} keys"
    if op.bytes:
        return f"{op.bytes:,} bytes"
    return f"{op.m:,} x {op.n:,} elements"
