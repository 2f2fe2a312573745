"""Choose the program an op runs as, as a tuned library would, and time it: the one place above
the compiler and the engine. Runner, serving, validation, traces and reports all go through
here, so every caller sees the same program.

    pick.py        the fastest of the op's candidate programs, fixed costs included (`choose`)
    tilings.py     a GEMM's candidate tilings, kept in the on-disk op cache
    conditions.py  how an op's time is measured (`Condition`) and the fixed costs under each
    clock.py       the clock a kernel's power holds (`play_held`)
    writeback.py   the L2 write-back a kernel timed alone after an L2 flush pays
    timed.py       an op's OpTiming, energy and kernel durations under a condition (`time_op`)
    collective.py  a collective's time and energy on the interconnect (`time_collective`)

Results are memoised by (op, chip) (archsim/memo.py): ops are frozen and compare by kind and shape.
"""

from archsim.choose.clock import play_held, played_activity
from archsim.choose.collective import collective_energy, simulate_collective, time_collective
from archsim.choose.conditions import Condition
from archsim.choose.pick import choose, same_play
from archsim.choose.tilings import cached_tilings
from archsim.choose.timed import OpCost, TimedOp, kernel_durations_s, op_cost, op_energy, replay, simulate_op, time_op
from archsim.choose.writeback import dirty_evicted_bytes

__all__ = [
    "Condition",
    "OpCost",
    "TimedOp",
    "cached_tilings",
    "choose",
    "collective_energy",
    "dirty_evicted_bytes",
    "kernel_durations_s",
    "op_cost",
    "op_energy",
    "play_held",
    "played_activity",
    "replay",
    "same_play",
    "simulate_collective",
    "simulate_op",
    "time_collective",
    "time_op",
]
