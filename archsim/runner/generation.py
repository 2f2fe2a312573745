"""A generation: prefill of the prompt, then decode steps with a KV cache that grows each token.

Every op's timing is also kept in the on-disk op cache (archsim/opcache.py) under its chip, so
a later run, serve or sweep worker that meets the same op on the same chip reads it back.

Ops that do not change between decode steps (every GEMM and vector op: their shapes depend on
the batch only) are simulated once; attention, which reads a longer cache every step, is
simulated at every decode step's own KV length (the default, `kv_stride` 1: exact), or with a
larger `kv_stride` at KV lengths that many tokens apart and interpolated linearly between them
(exact at the sampled lengths). Its time is a staircase in the KV blocks with a ramp inside
each block (the last block moves only its valid rows), so interpolation is biased: +0.46% TPOT
at a stride of 64 for Llama-3-8B at batch 64 on the H200. Every length costs little: how the
attention items land on the cores is compiled once per KV block count (archsim/compiler/attention.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

import numpy as np

from archsim import opcache
from archsim.choose import OpCost, TimedOp, op_cost, simulate_collective, time_collective, time_op
from archsim.choose.fidelity import KV_GRID, Fidelity, at_fidelity, current, screening
from archsim.engine.timing import OpTiming, TimeByCause
from archsim.graph.builder import Step, build_step
from archsim.graph.mixed import decode_attention_ops
from archsim.graph.model import Phase, Workload
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.graph.parallel import (
    Parallelism,
    ParallelismError,
    PipelineSchedule,
    best_chunks,
    max_chunks,
    pipeline_step_s,
    shard_step,
)
from archsim.hardware import Chip, System
from archsim.hardware.collectives import system_fabric
from archsim.memo import memo
from archsim.runner.memory import Footprint, check_fits

KV_STRIDE = 1  # decode KV lengths between simulated attention samples (1: every step, exact)


@dataclass(frozen=True)
class OpRecord:
    op: Op
    timing: OpTiming

    @property
    def time_s(self) -> float:
        """Time of all `repeat` executions in the step."""
        return self.op.repeat * self.timing.time_s


@dataclass(frozen=True)
class StepResult:
    step: Step
    ops: tuple[OpRecord, ...]
    comm_hidden_s: float = 0.0  # collective time run under the compute that produces it
    pipeline: PipelineSchedule | None = None  # pipeline parallel: the ops are one micro-batch's

    @property
    def time_s(self) -> float:
        if self.pipeline is not None:
            return self.pipeline.step_s
        total = sum(r.time_s for r in self.ops)
        return total - self.comm_hidden_s if self.comm_hidden_s else total

    @property
    def comm_s(self) -> float:
        """Time of the collectives (one micro-batch's under pipeline parallelism)."""
        return sum(r.time_s for r in self.ops if r.op.kind.is_collective)

    @property
    def hbm_bytes(self) -> float:
        return sum(r.op.repeat * r.timing.hbm_bytes for r in self.ops)

    @property
    def flops(self) -> float:
        return sum(r.op.repeat * r.timing.flops for r in self.ops)

    @property
    def by_cause(self) -> TimeByCause:
        """The step's time by cause: its ops' (times their repeat), and what its schedule adds
        (`schedule_s`: the step's time less their sum: hidden collectives, a pipeline's bubble);
        adds up to time_s."""
        ops = sum((r.timing.by_cause.scaled(r.op.repeat) for r in self.ops), TimeByCause())
        return ops + TimeByCause(schedule_s=self.time_s - sum(r.time_s for r in self.ops))


@dataclass(frozen=True)
class RunResult:
    prefill: StepResult
    decode: StepResult | None  # the first decode step, op by op
    decode_kv_lens: np.ndarray = field(repr=False)  # KV length of every decode step
    decode_step_s: np.ndarray = field(repr=False)  # time of every decode step
    footprint: Footprint
    batch: int = 1
    prompt_tokens: int = 0
    output_tokens: int = 0
    interrupted: bool = False
    fidelity: Fidelity = Fidelity.FULL  # the fidelity it was simulated at (archsim/choose/fidelity.py)

    @property
    def ttft_s(self) -> float:
        """Time to first token: the prefill step (which yields the first token)."""
        return self.prefill.time_s

    @property
    def decode_time_s(self) -> float:
        return float(np.sum(self.decode_step_s))

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first (one decode step)."""
        return float(np.mean(self.decode_step_s)) if len(self.decode_step_s) else 0.0

    @property
    def total_time_s(self) -> float:
        return self.ttft_s + self.decode_time_s

    @property
    def by_cause(self) -> TimeByCause:
        """The run's time by cause: the prefill step's, and every decode step's as the first
        decode step splits it, its ops whose time grows with the KV length (`Scaling.KV_LENGTH`, as
        `run_generation` samples them: attention, and MLA's latent expansions) scaled
        to what the later steps add (as the bound's shares, archsim/report/comparison.py), and
        the rest as the schedule's (`schedule_s`); adds up to total_time_s."""
        decode, steps = self.decode, len(self.decode_step_s)
        if decode is None or steps == 0:
            return self.prefill.by_cause
        attention = [r for r in decode.ops if r.op.scaling is Scaling.KV_LENGTH]
        fixed = [r for r in decode.ops if r.op.scaling is not Scaling.KV_LENGTH]
        fixed_s, first = sum(r.time_s for r in fixed), sum(r.time_s for r in attention)
        grows = max(0.0, self.decode_time_s - fixed_s * steps) / first if first else 0.0
        by = sum((r.timing.by_cause.scaled(r.op.repeat * steps) for r in fixed), self.prefill.by_cause)
        by = sum((r.timing.by_cause.scaled(r.op.repeat * grows) for r in attention), by)
        return by + TimeByCause(schedule_s=self.total_time_s - by.total_s)

    @property
    def generated_tokens(self) -> int:
        return self.batch * (1 + len(self.decode_step_s))

    @property
    def throughput_tokens_per_s(self) -> float:
        """Generated tokens over the whole run's time (prefill included)."""
        return self.generated_tokens / self.total_time_s if self.total_time_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.batch / self.tpot_s if self.tpot_s else 0.0


V = TypeVar("V")  # what an op-cache entry holds: a TimedOp or an OpCost


def cached_time_op(op: Op, chip: Chip) -> TimedOp:
    """`time_op` of `op` on `chip` (its timing and energy), read from the on-disk op cache where
    an earlier process put it (and put there otherwise)."""
    cache = opcache.cache_for_chip(chip)
    if cache is None:
        return time_op(op, chip)
    return _disk_time_op(op, chip, cache, current())


def _through_cache(
    cache: opcache.OpCache,
    op: Op,
    kind: str,
    at: Fidelity,
    read: Callable[[object], V | None],
    compute: Callable[[], V],
    write: Callable[[V], object],
) -> V:
    """The entry of `op` under `kind` (at fidelity `at`) in `cache` as `read` makes it of the
    stored value, or else `compute()`, put there as `write` stores it."""
    key = opcache.ops_key((op,), kind if at is Fidelity.FULL else f"{kind}|screen")
    got = read(cache.get(key))
    if got is not None:
        return got
    value = compute()
    cache.put(key, write(value))
    return value


@memo(maxsize=65536)
def _disk_time_op(op: Op, chip: Chip, cache: opcache.OpCache, at: Fidelity) -> TimedOp:
    def read(value: object) -> TimedOp | None:
        parts = opcache.timed_from_value(value, chip)
        return None if parts is None else TimedOp(*parts)

    def write(t: TimedOp) -> object:
        return opcache.timed_value(t.timing, t.energy, t.kernel_power_w)

    return _through_cache(cache, op, "time_op", at, read, lambda: time_op(op, chip), write)


def cached_op_cost(op: Op, chip: Chip) -> OpCost:
    """`op_cost` of `op` on `chip` (the time, energy and kernel power of `cached_time_op`, the same
    numbers), read from the on-disk op cache where an earlier process put it (and put there
    otherwise)."""
    cache = opcache.cache_for_chip(chip)
    if cache is None:
        return op_cost(op, chip)
    return _disk_op_cost(op, chip, cache, current())


def op_cost_reader(chip: Chip) -> Callable[[Op, Chip], OpCost]:
    """`cached_op_cost` on `chip` with its cache and the fidelity looked up once, for a loop that
    costs many ops on the chip (a decode's attention at every KV length): the same numbers."""
    cache, at = opcache.cache_for_chip(chip), current()
    if cache is None:
        return op_cost

    def read(op: Op, on: Chip) -> OpCost:
        return _disk_op_cost(op, on, cache, at) if on is chip else cached_op_cost(op, on)

    return read


@memo(maxsize=65536)
def _disk_op_cost(op: Op, chip: Chip, cache: opcache.OpCache, at: Fidelity) -> OpCost:
    def read(value: object) -> OpCost | None:
        parts = opcache.cost_from_value(value, chip)
        return None if parts is None else OpCost(*parts)

    def write(c: OpCost) -> object:
        return opcache.cost_value(c.time_s, c.energy, c.kernel_power_w)

    return _through_cache(cache, op, "op_cost", at, read, lambda: op_cost(op, chip), write)


def op_timing(op: Op, chip: Chip) -> OpTiming:
    """The timing of `cached_time_op`."""
    return cached_time_op(op, chip).timing


def time_ops(ops: Sequence[Op], system: System) -> tuple[tuple[OpRecord, ...], float]:
    """Every op timed on the system's chip, each collective on its links, and the collective time
    hidden under compute (`scheduled`): the one rule by which a step's ops add up, for `archsim
    run` and serving alike."""
    records, hidden = scheduled(ops, system, op_timing, simulate_collective)
    return tuple(OpRecord(op, timing) for op, timing in records), hidden


def op_costs(
    ops: Sequence[Op], system: System, on_chip: Callable[[Op, Chip], OpCost] = cached_op_cost
) -> tuple[list[tuple[Op, OpCost]], float]:
    """`time_ops` of the ops as each one's time, energy and kernel power alone (`cached_op_cost`,
    or `op_cost_reader`'s, and `collective_cost`: the same numbers): what a step's time and
    energy need."""
    return scheduled(ops, system, on_chip, collective_cost)


def collective_cost(op: Op, system: System) -> OpCost:
    """A collective's time, energy and power on the system's links (`time_collective`)."""
    t = time_collective(op, system)
    return OpCost(t.timing.time_s, t.energy, t.kernel_power_w)


class Timed(Protocol):
    @property
    def time_s(self) -> float: ...


T = TypeVar("T", bound=Timed)


def scheduled(
    ops: Sequence[Op], system: System, on_chip: Callable[[Op, Chip], T], on_links: Callable[[Op, System], T]
) -> tuple[list[tuple[Op, T]], float]:
    """Every op timed on the system's chip (`on_chip`), each collective on its links
    (`on_links`), and the collective time hidden under compute: a collective right after the op
    that produces it is cut into the pieces that best overlap that op (`best_chunks`, as the
    fabric's `chunk` allows)."""
    records: list[tuple[Op, T]] = []
    hidden = 0.0
    for op in ops:
        if not op.kind.is_collective:
            records.append((op, on_chip(op, system.chip)))
            continue
        producer = records[-1] if records and op.kind is not OpKind.SEND else None
        if producer is not None and not producer[0].kind.is_collective:

            def pieces_s(c: int, op: Op = op) -> float:
                return simulate_collective(replace(op, chunks=c), system).time_s

            chunks, saved = best_chunks(producer[1].time_s, pieces_s, max_chunks(op, system_fabric(system).chunk_bytes))
            op, hidden = replace(op, chunks=chunks), hidden + saved * op.repeat
        records.append((op, on_links(op, system)))
    return records, hidden


def ops_time_s(ops: Sequence[Op], system: System, on_chip: Callable[[Op, Chip], OpCost] = cached_op_cost) -> float:
    """Time of all executions of `ops` (each `repeat` times), collective time hidden taken off
    (from each op's time alone: `op_costs`)."""
    records, hidden = op_costs(ops, system, on_chip)
    return sum(op.repeat * c.time_s for op, c in records) - hidden


def simulate_step(w: Workload, system: System, step: Step, parallelism: Parallelism | None = None) -> StepResult:
    if parallelism is not None and not parallelism.is_single:
        return simulate_parallel_step(w, system, step, parallelism)
    records, _ = time_ops(build_step(w, step), system)
    return StepResult(step, records)


def check_parallel_system(system: System, par: Parallelism) -> None:
    """Refuse a layout that needs more chips (or links) than the system has."""
    if par.chips > system.chips:
        raise ParallelismError(
            f"{par.label()} needs {par.chips} chips; the system has {system.chips} "
            f"({system.chip.name} x{system.chips})"
            + ("" if system.chips > 1 else "; use a multi-chip system such as h200x8")
        )
    if system.interconnect is None:
        raise ParallelismError(f"{system.chip.name} has no interconnect section: {par.label()} needs links")


def simulate_parallel_step(w: Workload, system: System, step: Step, par: Parallelism) -> StepResult:
    """The busiest chip's step under `par`: its ops and collectives (`time_ops`), and the
    pipeline schedule."""
    check_parallel_system(system, par)
    plan = shard_step(w, step, par)
    records, hidden = time_ops(plan.ops, system)
    pipeline = None
    if plan.stages > 1:
        send_s = sum(r.time_s for r in records if r.op.kind is OpKind.SEND)
        stage_s = sum(r.time_s for r in records if r.op.kind is not OpKind.SEND) - hidden
        step_s = float(pipeline_step_s(stage_s, send_s, plan.stages, plan.micro_batches, step.phase))
        pipeline = PipelineSchedule(plan.stages, plan.micro_batches, stage_s, send_s, step_s)
    return StepResult(step, records, hidden, pipeline)


@memo(maxsize=4096)
def decode_ops_at(w: Workload, batch: int, kv_len: int, par: Parallelism | None) -> tuple[Op, ...]:
    """The decode-attention ops of `batch` sequences at `kv_len` (the busiest chip's under
    `par`), built once for the run's time and again asked for by its energy."""
    return tuple(decode_attention_ops(w, batch, kv_len, par))


def _attention_time(
    w: Workload,
    system: System,
    batch: int,
    kv_len: int,
    par: Parallelism | None,
    on_chip: Callable[[Op, Chip], OpCost] = cached_op_cost,
) -> float:
    """Decode attention of `batch` sequences at `kv_len`: the step model's decode-attention part
    (the busiest chip's ops under `par`)."""
    return ops_time_s(decode_ops_at(w, batch, kv_len, par), system, on_chip)


def attention_samples(kv_lens: np.ndarray, kv_stride: int) -> np.ndarray:
    """The decode KV lengths whose attention is simulated: every `kv_stride`-th and the last;
    at screen fidelity with a stride of 1, `grid_samples` instead."""
    if kv_stride <= 1 and screening():
        return grid_samples(kv_lens)
    return np.unique(np.concatenate([kv_lens[:: max(1, kv_stride)], kv_lens[-1:]]))


def grid_samples(kv_lens: np.ndarray) -> np.ndarray:
    """The KV lengths on each side of every multiple of KV_GRID among `kv_lens` (g and g + 1),
    and the first and last: between two of them no K/V block edge falls (every edge a flash
    kernel offers is a multiple of KV_GRID), so attention's time moves only with the valid rows
    of the last block and is interpolated between them (archsim/choose/fidelity.py)."""
    if len(kv_lens) == 0:
        return kv_lens
    edges = kv_lens[(kv_lens % KV_GRID == 0) | (kv_lens % KV_GRID == 1)]
    return np.unique(np.concatenate([kv_lens[:1], edges, kv_lens[-1:]]))


def run_generation(
    w: Workload,
    system: System,
    kv_stride: int = KV_STRIDE,
    progress: Callable[[int, int], None] | None = None,
    parallelism: Parallelism | None = None,
    fidelity: Fidelity | str | None = None,
) -> RunResult:
    """Simulate the workload's scenario (on the chips `parallelism` spreads it over) at
    `fidelity` (archsim/choose/fidelity.py; None: the one simulations run at now); raises
    DoesNotFitError if it does not fit in memory, ParallelismError if the layout cannot be."""
    with at_fidelity(current() if fidelity is None else fidelity) as at, opcache.batched_writes():
        result = _run_generation(w, system, kv_stride, progress, parallelism)
    return result if at is Fidelity.FULL else replace(result, fidelity=at)


def _run_generation(
    w: Workload,
    system: System,
    kv_stride: int,
    progress: Callable[[int, int], None] | None,
    parallelism: Parallelism | None,
) -> RunResult:
    s = w.scenario
    par = parallelism if parallelism is not None and not parallelism.is_single else None
    if par is not None:
        check_parallel_system(system, par)
        shard_step(w, Step(Phase.DECODE, s.batch, 1, s.prompt_tokens), par)  # refuses a bad layout
    fp = check_fits(w, system, parallelism)
    prefill = simulate_step(w, system, Step(Phase.PREFILL, s.batch, s.prompt_tokens, 0), par)
    steps = s.output_tokens - 1
    kv_lens = s.prompt_tokens + 1 + np.arange(steps, dtype=np.int64)
    if steps == 0:
        return RunResult(prefill, None, kv_lens, np.zeros(0), fp, s.batch, s.prompt_tokens, s.output_tokens)
    first = simulate_step(w, system, Step(Phase.DECODE, s.batch, 1, s.prompt_tokens), par)
    # the ops whose time does not grow with the KV cache; the others are sampled below
    fixed = sum(r.time_s for r in first.ops if r.op.scaling is not Scaling.KV_LENGTH)
    if par is not None:  # the pipeline's send is scheduled apart; hidden collective time comes off
        fixed -= sum(r.time_s for r in first.ops if r.op.kind is OpKind.SEND) + first.comm_hidden_s
    samples = attention_samples(kv_lens, kv_stride)
    attn = np.zeros(len(samples))
    interrupted = False
    on_chip = op_cost_reader(system.chip)
    try:
        for i, kv in enumerate(samples):
            attn[i] = _attention_time(w, system, s.batch, int(kv), par, on_chip)
            if progress:
                progress(i + 1, len(samples))
    except KeyboardInterrupt:
        interrupted = True
        samples, attn = samples[:i], attn[:i]
        kv_lens = kv_lens[kv_lens <= samples[-1]] if len(samples) else kv_lens[:0]
    step_s = fixed + np.interp(kv_lens, samples, attn) if len(samples) else np.zeros(0)
    if par is not None and first.pipeline is not None and len(step_s):
        p = first.pipeline
        step_s = pipeline_step_s(step_s, p.send_s, p.stages, p.micro_batches, Phase.DECODE)
    return RunResult(prefill, first, kv_lens, step_s, fp, s.batch, s.prompt_tokens, s.output_tokens, interrupted)
