"""A generation: prefill of the prompt, then decode steps with a KV cache that grows each token.

Ops that do not change between decode steps (every GEMM and vector op: their shapes depend on
the batch only) are simulated once; attention, which reads a longer cache every step, is
simulated at KV lengths every `kv_stride` tokens and interpolated linearly between them
(exact at the sampled lengths; its cost is linear in the KV blocks it streams).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from archsim.engine.simulate import simulate_op
from archsim.engine.timing import OpTiming
from archsim.graph.builder import Step, build_step
from archsim.graph.model import Phase, Workload
from archsim.graph.ops import Op, OpKind
from archsim.hardware import System
from archsim.runner.memory import Footprint, check_fits

KV_STRIDE = 64  # decode KV lengths between simulated attention samples


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

    @property
    def time_s(self) -> float:
        return sum(r.time_s for r in self.ops)

    @property
    def hbm_bytes(self) -> float:
        return sum(r.op.repeat * r.timing.hbm_bytes for r in self.ops)

    @property
    def flops(self) -> float:
        return sum(r.op.repeat * r.timing.flops for r in self.ops)


@dataclass(frozen=True)
class RunResult:
    prefill: StepResult
    decode: StepResult | None  # the first decode step, op by op
    decode_kv_lens: np.ndarray = field(repr=False)  # KV length of every decode step
    decode_step_s: np.ndarray = field(repr=False)  # time of every decode step
    footprint: Footprint = None
    batch: int = 1
    prompt_tokens: int = 0
    output_tokens: int = 0
    interrupted: bool = False

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
    def generated_tokens(self) -> int:
        return self.batch * (1 + len(self.decode_step_s))

    @property
    def throughput_tokens_per_s(self) -> float:
        """Generated tokens over the whole run's time (prefill included)."""
        return self.generated_tokens / self.total_time_s if self.total_time_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.batch / self.tpot_s if self.tpot_s else 0.0


def simulate_step(w: Workload, system: System, step: Step) -> StepResult:
    chip = system.chip
    return StepResult(step, tuple(OpRecord(op, simulate_op(op, chip)) for op in build_step(w, step)))


def _attention_time(w: Workload, system: System, batch: int, kv_len: int) -> float:
    step = Step(Phase.DECODE, batch, 1, kv_len - 1)
    ops = [op for op in build_step(w, step) if op.kind is OpKind.ATTENTION]
    return sum(op.repeat * simulate_op(op, system.chip).time_s for op in ops)


def run_generation(w: Workload, system: System, kv_stride: int = KV_STRIDE,
                   progress: Callable[[int, int], None] | None = None) -> RunResult:
    """Simulate the workload's scenario; raises DoesNotFitError if it does not fit in memory."""
    s = w.scenario
    fp = check_fits(w, system)
    prefill = simulate_step(w, system, Step(Phase.PREFILL, s.batch, s.prompt_tokens, 0))
    steps = s.output_tokens - 1
    kv_lens = s.prompt_tokens + 1 + np.arange(steps, dtype=np.int64)
    if steps == 0:
        return RunResult(prefill, None, kv_lens, np.zeros(0), fp, s.batch, s.prompt_tokens, s.output_tokens)
    first = simulate_step(w, system, Step(Phase.DECODE, s.batch, 1, s.prompt_tokens))
    fixed = sum(r.time_s for r in first.ops if r.op.kind is not OpKind.ATTENTION)
    samples = np.unique(np.concatenate([kv_lens[::max(1, kv_stride)], kv_lens[-1:]]))
    attn = np.zeros(len(samples))
    interrupted = False
    try:
        for i, kv in enumerate(samples):
            attn[i] = _attention_time(w, system, s.batch, int(kv))
            if progress:
                progress(i + 1, len(samples))
    except KeyboardInterrupt:
        interrupted = True
        samples, attn = samples[:i], attn[:i]
        kv_lens = kv_lens[kv_lens <= samples[-1]] if len(samples) else kv_lens[:0]
    step_s = fixed + np.interp(kv_lens, samples, attn) if len(samples) else np.zeros(0)
    return RunResult(prefill, first, kv_lens, step_s, fp, s.batch, s.prompt_tokens, s.output_tokens,
                     interrupted)
