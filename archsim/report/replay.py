"""The program an op runs as, played again with every entry's cycles kept, for traces.

`archsim.choose.replay` plays the program `choose` picked (the one every timing comes from) with
the engine's per-entry timeline on; this wraps it for the trace and counter code.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.choose import replay
from archsim.engine.simulate import PhaseTimeline
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.program import Program


@dataclass(frozen=True, eq=False)
class OpReplay:
    """The chosen program of one op, its phases' timelines, and how many candidates it beat."""

    program: Program
    timelines: tuple[PhaseTimeline, ...]
    candidates: int
    launches: int

    @property
    def played_cycles(self) -> int:
        """Cycles of one run of the program, without kernel overheads."""
        return round(sum(t.total_cycles for t in self.timelines))


def replay_op(op: Op, chip: Chip) -> OpReplay:
    """The chosen program of `op` with every phase played on a timeline."""
    choice, timelines = replay(op, chip)
    return OpReplay(choice.program, timelines, choice.candidates, choice.launches)
