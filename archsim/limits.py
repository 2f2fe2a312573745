"""How large an input archsim takes: the bounds every reader, schema and flag applies before any
work starts, and the estimate of an op's size that refuses it before its program is allocated.

Every bound is physical or practical, never a tuning knob: no model has more than MAX_LAYERS
layers or a context longer than MAX_TOKENS, no serving trace of interest has more than
MAX_REQUESTS requests, and a program of more than MAX_PROGRAM_ENTRIES entries (about 4 GB and
a minute to simulate) is the wrong input for a cycle-approximate simulator. README's "Bad input"
section lists them.
"""

from __future__ import annotations

import math

from archsim.errors import TooLargeError
from archsim.units import ceil_div

__all__ = ["TooLargeError"]

# sizes of files read whole
MAX_JSON_BYTES = 64 << 20  # a config.json or a case file (the shipped ones are a few kB)
MAX_TRACE_BYTES = 2 << 30  # a request trace (ten million requests are about 300 MB of CSV)
MAX_JSON_DEPTH = 64  # nesting of a JSON document (a config nests three deep)

# models and scenarios (workload files, Hugging Face configs, sweep points)
MAX_LAYERS = 4096  # the largest models have about 130
MAX_WIDTH = 1 << 24  # hidden, FFN, head and vocabulary sizes (the largest vocabularies are ~256k)
MAX_HEADS = 1 << 16
MAX_EXPERTS = 1 << 16
MAX_BATCH = 1 << 20  # sequences in one batch
MAX_TOKENS = 1 << 24  # tokens of one sequence, prompt and output together (16,777,216)

# serving
MAX_REQUESTS = 10_000_000  # about 80 s and 3 GB to simulate
MAX_INSTANCES = 1024  # replicas of one serving setup
MAX_STEP_RESOLUTION = 64  # step shapes simulated per doubling of the step's tokens
RATE_RANGE_PER_S = (1e-6, 1e6)  # mean arrivals per second
CV_RANGE = (1e-3, 1e3)  # coefficient of variation of gamma inter-arrival gaps
TIME_SCALE_RANGE = (1e-6, 1e6)
MAX_SLO_S = 86_400.0  # a latency objective of more than a day is a unit mistake
MAX_SEED = 2**63 - 1
MAX_ARRIVAL_S = 1e9  # 31 years of arrivals

# sweeps
MAX_SWEEP_POINTS = 1_000_000  # resolved lazily, but each is simulated: days of CPU time
MAX_EXPR_CHARS = 4096  # an expression of a sweep spec
MAX_EXPR_DEPTH = 100  # nesting of an expression
MAX_EXPR_INT_BITS = 4096  # bits of a whole number inside an expression (far past any float)

# one op's program: the entries (tile steps) the compiler would produce
MAX_PROGRAM_ENTRIES = 1 << 25  # 33,554,432: a 128k-token prefill attention of Llama-3-8B is 16.8M
SHORTLIST_SPREAD = 16  # a GEMM's shortlisted tiles are down to a quarter of the widest edge (128 of 512)


def gemm_entries(op, chip) -> int:
    """Entries the largest of a GEMM's candidate programs holds (each candidate tiling that
    `archsim.compiler.gemm.candidate_tilings` shortlists is compiled and played): one work item
    per output tile and K slice, a few distinct core sequences of K steps (identical cores are
    stored once), and the stream-K tail of up to two waves whose K steps are dealt per core.

    Ranking the candidates itself lays out every output tile of each, so a GEMM whose tiles at
    the widest edge, SHORTLIST_SPREAD times over, already pass the limit is counted that way,
    without ranking."""
    from archsim.compiler.gemm import TILE_SIZES, Tiling, candidate_tilings

    edge = max(TILE_SIZES)
    widest = op.groups * ceil_div(op.m, edge) * ceil_div(op.n, edge)
    if widest * SHORTLIST_SPREAD > MAX_PROGRAM_ENTRIES:
        return widest * SHORTLIST_SPREAD
    cores, worst = chip.cores, 0
    for t in candidate_tilings(op, chip) or [Tiling(8, 8, 32)]:
        tm, tn, tk, split = t.tm, t.tn, t.tk, t.split
        items = op.groups * ceil_div(op.m, tm) * ceil_div(op.n, tn) * max(1, split)
        ksteps = ceil_div(op.k, tk)
        per_item = ceil_div(ksteps, max(1, split))
        worst = max(worst, items + 3 * ceil_div(items, cores) * per_item + min(items, 2 * cores) * ksteps)
    return worst


def attention_entries(op, chip) -> int:
    """KV blocks streamed by all work items of a flash-attention op: (sequence, query head or
    KV head, query block) items, each one entry per K/V block it reads (the compiler walks every
    block even where the engine plays them k at a time: compiler/attention.py)."""
    from archsim.compiler.attention import _blocks

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
    from archsim.graph.ops import OpKind

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
    from archsim.compiler.tiles import matrix_format

    matrix_format(op, chip, what)
    entries = program_entries(op, chip)
    if entries > MAX_PROGRAM_ENTRIES:
        name = what or op.name or op.kind.value
        raise TooLargeError(
            f"{name} is too large to simulate: about {entries:,} program entries "
            f"(tile steps) on {chip.name}, more than the limit of {MAX_PROGRAM_ENTRIES:,} ({describe(op)})"
        )


def check_steps_size(w, system, steps, parallelism=None) -> None:
    """Every op of the given steps (`archsim.graph.builder.Step`) supported and within
    MAX_PROGRAM_ENTRIES on the busiest chip of `parallelism`: refused before any of them is
    simulated."""
    from archsim.graph.builder import build_step
    from archsim.graph.parallel import shard_step

    for step in steps:
        single = parallelism is None or parallelism.is_single
        ops = build_step(w, step) if single else shard_step(w, step, parallelism).ops
        for op in ops:
            check_op(op, system.chip, f"the {step.phase.value} step's {op.name or op.kind.value}")


def check_run_size(w, system, parallelism=None) -> None:
    """The prefill and the last decode step of the workload's scenario within the bound (the
    largest ops of a run); nothing to check if the scenario does not fit in memory anyway, or
    if the layout is refused (the run reports either)."""
    from archsim.graph.builder import Step
    from archsim.graph.model import Phase
    from archsim.graph.parallel import ParallelismError
    from archsim.runner.memory import footprint

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
    from archsim.graph.builder import Step
    from archsim.graph.model import Phase

    chunk = max(1, min(longest_prompt, max_batched_tokens))
    steps = [
        Step(Phase.PREFILL, 1, chunk, max(0, longest_prompt - chunk)),
        Step(Phase.DECODE, 1, 1, max(1, longest_context - 1)),
    ]
    for system in systems:
        check_steps_size(w, system, steps)


def describe(op) -> str:
    """The shape of an op in a few words, for messages."""
    from archsim.graph.ops import OpKind

    if op.kind is OpKind.GEMM:
        return f"M {op.m:,} x K {op.k:,} x N {op.n:,}" + (f" x {op.groups} groups" if op.groups > 1 else "")
    if op.kind is OpKind.ATTENTION:
        return f"batch {op.batch:,}, {op.heads:,} heads, {op.q_len:,} queries over {op.kv_len:,} keys"
    if op.bytes:
        return f"{op.bytes:,} bytes"
    return f"{op.m:,} x {op.n:,} elements"


def within(value: float, low: float, high: float) -> bool:
    """`low <= value <= high` for a finite value."""
    return math.isfinite(value) and low <= value <= high
