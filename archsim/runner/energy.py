"""Energy and power of steps and runs: joules by unit, average and peak watts, tokens per joule.

Each op's energy is `archsim.choose.time_op`'s: its kernels' actions at the clock its power held,
and the chip's floor (static and idle power) over its cycles and its fixed costs. A step's energy
adds its ops' as its time adds their times: the floor of collective time hidden under compute is
counted once, and a pipeline step runs its micro-batches' ops and idles at the floor for the rest
of the step (its bubble). The decode steps after the first change only in attention, whose energy
is taken at the KV lengths the runner simulated and interpolated between them as its time is.

Energies are those of the busiest chip; a run on a multi-chip layout draws that on each of its
`chips` (the other chips of a pipeline or an expert layout do at most as much). Units: joules,
watts, seconds, hertz.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from archsim.choose import TimedOp, time_collective
from archsim.choose.fidelity import at_fidelity
from archsim.graph.model import Workload
from archsim.graph.ops import OpKind
from archsim.graph.parallel import Parallelism
from archsim.hardware import System
from archsim.hardware.power import ENERGY_PARTS, Activity, EnergySplit, energy_split
from archsim.runner.generation import (
    OpRecord,
    RunResult,
    StepResult,
    attention_samples,
    cached_time_op,
    decode_ops_at,
    op_cost_reader,
    op_costs,
)


@dataclass(frozen=True)
class KindEnergy:
    """The ops of one kind in a step: their energy, time and the clock their power held."""

    kind: OpKind
    energy: EnergySplit
    time_s: float
    clock_hz: float  # time-weighted mean of the clocks its ops ran at
    min_clock_hz: float  # the lowest of them


@dataclass(frozen=True)
class StepEnergy:
    """One step on one chip: its energy by unit, its time, and the highest power of its kernels."""

    energy: EnergySplit
    time_s: float
    peak_power_w: float
    kinds: tuple[KindEnergy, ...] = ()

    @property
    def energy_j(self) -> float:
        return self.energy.total_j

    @property
    def average_power_w(self) -> float:
        return self.energy_j / self.time_s if self.time_s > 0 else 0.0


def floor_split(system: System, time_s: float) -> EnergySplit:
    """The chip's static and idle energy over `time_s` at its highest clock (no kernel running);
    negative for time counted twice (collectives hidden under the compute producing them)."""
    p = system.chip.power
    if p is None:
        return EnergySplit()
    f = system.chip.clock_hz
    return energy_split(p, Activity(), time_s, f)


def timed(r: OpRecord, system: System) -> TimedOp:
    """The memoised timing and energy of a step's op (as `time_ops` timed it: from the on-disk
    op cache where it holds the op)."""
    if r.op.kind.is_collective:
        return time_collective(r.op, system)
    return cached_time_op(r.op, system.chip)


def records_energy(records: Sequence[OpRecord], system: System, hidden_s: float = 0.0) -> EnergySplit:
    """Energy of all executions of the ops (each `repeat` times), hidden collective time once."""
    return energy_sum(((r.op.repeat, timed(r, system).energy) for r in records), system, hidden_s)


def energy_sum(parts: Iterable[tuple[int, EnergySplit]], system: System, hidden_s: float = 0.0) -> EnergySplit:
    """Energy of ops each run `repeat` times, as (repeat, one run's energy), and of the floor
    less the hidden collective time (counted once: the ops' times overlap there)."""
    total = floor_split(system, -hidden_s)
    for repeat, energy in parts:
        total = total + energy.scaled(repeat)
    return total


def energy_rows(parts: Sequence[tuple[Sequence[tuple[int, EnergySplit]], float]], system: System) -> np.ndarray:
    """`energy_sum` of each (ops, hidden time) in `parts`, as a row of joules (ENERGY_PARTS order):
    the rows of as many ops at once, as arrays, with the same additions in the same order (the
    floor, then each op's energy times its repeat), so the same numbers as `energy_sum`'s."""
    rows = np.zeros((len(parts), len(ENERGY_PARTS)))
    floors: dict[tuple[float, float], tuple[float, ...]] = {}  # of each hidden time (its sign: 0.0 is not -0.0)
    by_count: dict[int, list[int]] = {}
    for i, (ops, _hidden) in enumerate(parts):
        by_count.setdefault(len(ops), []).append(i)
    for count, at in by_count.items():
        hidden = [(h, math.copysign(1.0, h)) for h in (parts[i][1] for i in at)]
        for key in hidden:
            if key not in floors:
                floors[key] = _joules(floor_split(system, -key[0]))
        total = np.array([floors[key] for key in hidden])
        for k in range(count):
            repeat = np.array([parts[i][0][k][0] for i in at], dtype=np.float64)
            total = total + repeat[:, None] * np.array([_joules(parts[i][0][k][1]) for i in at])
        rows[at] = total
    return rows


def _kinds(records: Sequence[OpRecord], system: System) -> tuple[KindEnergy, ...]:
    by_kind: dict[OpKind, list[OpRecord]] = {}
    for r in records:
        by_kind.setdefault(r.op.kind, []).append(r)
    out = []
    for kind, rs in by_kind.items():
        time_s = sum(r.time_s for r in rs)
        clocks = [r.timing.clock_hz for r in rs]
        mean = sum(r.time_s * r.timing.clock_hz for r in rs) / time_s if time_s > 0 else max(clocks)
        clock = min(max(clocks), max(min(clocks), mean))  # no rounding past the ops' own clocks
        out.append(KindEnergy(kind, records_energy(rs, system), time_s, clock, min(r.timing.clock_hz for r in rs)))
    return tuple(out)


def step_energy(step: StepResult, system: System) -> StepEnergy:
    """A step's energy on its (busiest) chip; see the module docstring."""
    busy_s = sum(r.time_s for r in step.ops) - step.comm_hidden_s
    busy = records_energy(step.ops, system, step.comm_hidden_s)
    micro = step.pipeline.micro_batches if step.pipeline is not None else 1
    energy = busy.scaled(micro) + floor_split(system, step.time_s - micro * busy_s)
    peak = max((timed(r, system).kernel_power_w for r in step.ops), default=0.0)
    return StepEnergy(energy, step.time_s, peak, _kinds(step.ops, system))


@dataclass(frozen=True)
class RunEnergy:
    """A generation's energy: its prefill and first decode step, every decode step's joules, the
    split over the whole run, on one chip; `chips` draw it."""

    prefill: StepEnergy
    decode: StepEnergy | None
    decode_step_j: np.ndarray  # each decode step, one chip
    energy: EnergySplit  # the whole run, one chip
    peak_power_w: float
    limit_w: float
    chips: int
    time_s: float
    generated_tokens: int
    decode_tokens: int
    decode_time_s: float = 0.0

    @property
    def chip_energy_j(self) -> float:
        return self.energy.total_j

    @property
    def energy_j(self) -> float:
        """Joules of the whole run on every chip it uses."""
        return self.chips * self.chip_energy_j

    @property
    def average_power_w(self) -> float:
        """Mean power of one chip over the run."""
        return self.chip_energy_j / self.time_s if self.time_s > 0 else 0.0

    @property
    def decode_energy_j(self) -> float:
        return self.chips * float(np.sum(self.decode_step_j))

    @property
    def decode_power_w(self) -> float:
        """Mean power of one chip over the decode steps."""
        return float(np.sum(self.decode_step_j)) / self.decode_time_s if self.decode_time_s > 0 else 0.0

    @property
    def tokens_per_j(self) -> float:
        """Generated tokens per joule, prefill included (as end-to-end tokens/s counts time)."""
        return self.generated_tokens / self.energy_j if self.energy_j > 0 else 0.0

    @property
    def decode_j_per_token(self) -> float:
        """Joules per token of the decode steps (every chip's)."""
        return self.decode_energy_j / self.decode_tokens if self.decode_tokens else 0.0

    @property
    def decode_tokens_per_j(self) -> float:
        return 1.0 / self.decode_j_per_token if self.decode_j_per_token > 0 else 0.0


_joules = operator.attrgetter(*(f"{part}_j" for part in ENERGY_PARTS))  # an EnergySplit's, in ENERGY_PARTS order


def _parts(split: EnergySplit) -> np.ndarray:
    return np.array(_joules(split))


def _as_split(values: np.ndarray) -> EnergySplit:
    return EnergySplit(*(float(v) for v in values))


def decode_energies(
    result: RunResult, w: Workload, system: System, kv_stride: int, par: Parallelism | None
) -> tuple[np.ndarray, EnergySplit, float]:
    """Joules of each decode step, their split summed over the steps, and the highest kernel power
    of their attention samples (see the module docstring)."""
    first, steps = result.decode, len(result.decode_step_s)
    if first is None or steps == 0:
        return np.zeros(0), EnergySplit(), 0.0
    kv_lens = result.decode_kv_lens[:steps]
    sends = [r for r in first.ops if r.op.kind is OpKind.SEND] if par is not None else []
    rest = [r for r in first.ops if r.op.kind is not OpKind.ATTENTION and r not in sends]
    hidden = first.comm_hidden_s if par is not None else 0.0
    fixed_s = sum(r.time_s for r in rest) - hidden
    fixed = _parts(records_energy(rest, system, hidden))
    samples = attention_samples(kv_lens, kv_stride)
    attn_s, peak = np.zeros(len(samples)), 0.0
    on_chip = op_cost_reader(system.chip)
    sampled = []
    for i, kv in enumerate(samples.tolist()):
        costs, sample_hidden = op_costs(decode_ops_at(w, result.batch, int(kv), par), system, on_chip)
        attn_s[i] = sum(op.repeat * c.time_s for op, c in costs) - sample_hidden
        sampled.append(([(op.repeat, c.energy) for op, c in costs], sample_hidden))
        peak = max([peak] + [c.kernel_power_w for _op, c in costs])
    attn = energy_rows(sampled, system)
    stage_s = fixed_s + np.interp(kv_lens, samples, attn_s)
    stage = fixed + np.column_stack([np.interp(kv_lens, samples, attn[:, j]) for j in range(attn.shape[1])])
    micro = first.pipeline.micro_batches if first.pipeline is not None else 1
    send_s = sum(r.time_s for r in sends)
    send = _parts(records_energy(sends, system))
    per_step = micro * (stage + send)
    idle_s = result.decode_step_s - micro * (stage_s + send_s)
    floor = _parts(floor_split(system, 1.0))
    per_step = per_step + np.outer(idle_s, floor)
    return per_step.sum(axis=1), _as_split(per_step.sum(axis=0)), peak


def run_energy(
    result: RunResult, w: Workload, system: System, kv_stride: int, parallelism: Parallelism | None = None
) -> RunEnergy | None:
    """The run's energy (see RunEnergy); None when the chip has no power model."""
    p = system.chip.power
    if p is None:
        return None
    par = parallelism if parallelism is not None and not parallelism.is_single else None
    with at_fidelity(result.fidelity):  # every op's energy at the fidelity the run was simulated at
        prefill = step_energy(result.prefill, system)
        decode = step_energy(result.decode, system) if result.decode is not None else None
        step_j, decode_split, attn_peak = decode_energies(result, w, system, kv_stride, par)
    peaks = [prefill.peak_power_w, attn_peak] + ([decode.peak_power_w] if decode else [])
    return RunEnergy(
        prefill=prefill,
        decode=decode,
        decode_step_j=step_j,
        energy=prefill.energy + decode_split,
        peak_power_w=max(peaks),
        limit_w=p.limit_w,
        chips=par.chips if par is not None else 1,
        time_s=result.total_time_s,
        generated_tokens=result.generated_tokens,
        decode_tokens=result.batch * len(step_j),
        decode_time_s=result.decode_time_s,
    )
