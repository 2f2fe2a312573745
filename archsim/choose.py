"""Choose the program an op runs as, as a tuned library would, and time it: the one place above
the compiler and the engine.

`choose(op, chip)` compiles every candidate mapping of the op (archsim.compiler), plays each on
the engine (archsim.engine) and keeps the fastest, counting its fixed costs: one kernel overhead
per launched phase and the prologue of a matrix-unit kernel (`Overheads.program_s`), as an
autotuning library picks the kernel that is fastest end to end. The first of equals wins.
`simulate_op` turns the choice into an OpTiming: the op's `kernels` launches, the extra cost of a
lone launch when `standalone`, and the bound (compute, memory or overhead: whichever the
critical core spent most of its time on). Runner, serving, validation, traces and reports all go
through here, so every caller sees the same program. Results are memoised by (op, chip): ops are
frozen and compare by kind and shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from archsim.compiler.compile import compile_candidates
from archsim.compiler.program import Program
from archsim.engine.simulate import PhaseTimeline, ProgramResult, play_program
from archsim.engine.timing import Bound, OpTiming
from archsim.graph.ops import Op
from archsim.hardware import Chip, System


@dataclass(frozen=True, eq=False)
class Choice:
    """The program an op runs as, how it played, and how many candidates it was chosen from."""

    program: Program
    played: ProgramResult
    candidates: int

    @property
    def launches(self) -> int:
        """Kernels one run of the program launches (phases that start a new kernel)."""
        return sum(1 for ph in self.program.phases if ph.new_kernel)


def program_time_s(program: Program, played: ProgramResult, chip: Chip) -> float:
    """One run of a played program: its cycles at the clock plus its fixed costs."""
    launches = sum(1 for ph in program.phases if ph.new_kernel)
    return played.cycles / chip.clock_hz + chip.overheads.program_s(launches, program.matrix)


@lru_cache(maxsize=65536)
def choose(op: Op, chip: Chip) -> Choice:
    """The fastest of the op's candidate programs on `chip` (fixed costs included)."""
    if op.kind.is_collective:
        raise ValueError(f"{op.kind.value} runs over the interconnect: time it with simulate_collective")
    candidates = compile_candidates(op, chip)
    best: tuple[float, Program, ProgramResult] | None = None
    for program in candidates:
        played = play_program(program, chip)
        total_s = program_time_s(program, played, chip)
        if best is None or total_s < best[0]:
            best = (total_s, program, played)
    assert best is not None, "every op compiles to at least one program"
    return Choice(best[1], best[2], len(candidates))


@lru_cache(maxsize=65536)
def simulate_op(op: Op, chip: Chip, standalone: bool = False) -> OpTiming:
    """Time of one execution of `op` on `chip`; `standalone` adds the cost of a lone launch."""
    c = choose(op, chip)
    r, k = c.played, op.kernels
    overhead_s = k * chip.overheads.program_s(c.launches, c.program.matrix)
    overhead_s += chip.overheads.launch_s if standalone else 0.0
    overhead = round(overhead_s * chip.clock_hz)
    waiting = r.cycles - r.compute_cycles
    parts = ((r.compute_cycles, Bound.COMPUTE), (waiting, Bound.MEMORY), (overhead / k, Bound.OVERHEAD))
    bound = max(parts, key=lambda x: x[0])[1]
    total_cycles = k * r.cycles + overhead
    return OpTiming(
        cycles=total_cycles,
        time_s=total_cycles / chip.clock_hz,
        compute_cycles=k * r.compute_cycles,
        stall_cycles=k * r.stall_cycles,
        overhead_cycles=overhead,
        busy_core_cycles=k * r.busy_core_cycles,
        core_cycles=k * r.core_cycles,
        hbm_bytes=k * r.hbm_bytes,
        l2_bytes=k * r.l2_bytes,
        flops=k * c.program.flops,
        min_bytes=k * c.program.min_bytes,
        kernels=k * c.launches,
        active_cores=r.active_cores,
        bound=bound,
    )


@lru_cache(maxsize=256)
def replay(op: Op, chip: Chip) -> tuple[Choice, tuple[PhaseTimeline, ...]]:
    """The chosen program of `op` played again keeping every entry's cycles (for traces)."""
    c = choose(op, chip)
    played = play_program(c.program, chip, trace=True)
    timelines = tuple(p.timeline for p in played.phases if p.timeline is not None)
    return c, timelines


@lru_cache(maxsize=4096)
def simulate_collective(op: Op, system: System) -> OpTiming:
    """Time of a collective op on the system's interconnect (archsim.hardware.collectives), as an
    OpTiming: all of it link time (counted as overhead cycles: no core computes or loads), bound
    by communication."""
    from archsim.hardware.collectives import Collective, collective_time, system_fabric

    t = collective_time(system_fabric(system, op.ranks), Collective(op.kind.value), op.ranks, op.bytes, op.chunks)
    cycles = math.ceil(t.time_s * system.chip.clock_hz)
    return OpTiming(
        cycles=cycles,
        time_s=t.time_s,
        compute_cycles=0,
        stall_cycles=0,
        overhead_cycles=cycles,
        busy_core_cycles=0.0,
        core_cycles=0.0,
        hbm_bytes=0.0,
        l2_bytes=0.0,
        flops=0.0,
        min_bytes=0.0,
        kernels=op.chunks,
        active_cores=0,
        bound=Bound.COMMUNICATION,
    )


def clear_caches() -> None:
    """Forget every memoised choice and timing (benchmarks time simulations from scratch)."""
    from archsim.compiler.tiles import step_cycles, vector_step_cycles

    for f in (choose, simulate_op, replay, simulate_collective, step_cycles, vector_step_cycles):
        f.cache_clear()
