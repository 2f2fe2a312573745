"""Re-play the program an op runs as, phase by phase, keeping every entry's cycles for traces.

`simulate_op` keeps the fastest of `compile_candidates(op, chip)`: the one with the least
played cycles plus one kernel overhead per launched phase. `replay_op` makes the same choice
and plays the chosen program again with `trace_phase`, which keeps per entry when its load was
issued and done and when its compute ended (cycles from the start of the phase).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from archsim.compiler.compile import compile_candidates
from archsim.compiler.program import Phase, Program
from archsim.engine.simulate import PhaseTimeline, play_program, trace_phase
from archsim.graph.ops import Op
from archsim.hardware import Chip


@dataclass(frozen=True, eq=False)
class OpReplay:
    """The chosen program of one op, its phases' timelines, and how many candidates it beat."""

    program: Program
    timelines: tuple[PhaseTimeline, ...]
    candidates: int

    @property
    def played_cycles(self) -> int:
        """Cycles of one run of the program, without kernel overheads (as `play_program` sums them)."""
        return sum(int(t.total_cycles) for t in self.timelines)


def launches(program: Program) -> int:
    """Kernel launches of one run of the program: phases that start a new kernel."""
    return sum(1 for ph in program.phases if launches_kernel(ph))


def launches_kernel(phase: Phase) -> bool:
    """Whether a phase is its own kernel (pays a launch), not the continuation of the last one."""
    return bool(getattr(phase, "new_kernel", True))


def chosen_program(op: Op, chip: Chip) -> tuple[Program, int]:
    """The candidate `simulate_op` keeps (least cycles / clock + launches x kernel overhead; the
    first of equals) and the number of candidates."""
    candidates = compile_candidates(op, chip)
    best_s, best = float("inf"), None
    for program in candidates:
        total_s = play_program(program, chip)["cycles"] / chip.clock_hz + chip.overheads.program_s(
            launches(program), program.matrix
        )
        if best is None or total_s < best_s:
            best_s, best = total_s, program
    return best, len(candidates)


@lru_cache(maxsize=256)
def replay_op(op: Op, chip: Chip) -> OpReplay:
    """The chosen program of `op` with every phase played on a timeline."""
    program, n = chosen_program(op, chip)
    return OpReplay(program, tuple(trace_phase(ph, chip) for ph in program.phases), n)
