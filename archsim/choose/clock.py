"""The clock a kernel runs at: the chip's, unless its power would pass the chip's limit there, then
the highest that keeps it under (archsim/hardware/power.py `held_clock_hz`), found by playing the
program again at the clock estimated. Clocks in Hz, power in W.
"""

from __future__ import annotations

from dataclasses import replace

from archsim.choose.fidelity import HOLD_TOLERANCE
from archsim.engine.simulate import ProgramResult, play_program
from archsim.hardware import Chip
from archsim.hardware.power import Activity, held_clock_hz, power_w
from archsim.hashing import copy_with
from archsim.program import Program

MAX_HELD_PLAYS = 8  # plays of a kernel on the way to the clock its power holds, at most (see play_held)


def at_clock(chip: Chip, clock_hz: float) -> Chip:
    """The chip running at `clock_hz` (its memory system and overheads in seconds unchanged)."""
    return chip if clock_hz == chip.clock_hz else replace(chip, clock_hz=clock_hz)


def played_activity(program: Program, played: ProgramResult) -> Activity:
    """The program's actions with the bytes it moved when played (every byte to or from the
    cores passes the L2)."""
    return copy_with(program.activity, l2_bytes=played.hbm_bytes + played.l2_bytes, hbm_bytes=played.hbm_bytes)


def play_held(program: Program, chip: Chip, played: ProgramResult, screen: bool = False) -> tuple[float, ProgramResult]:
    """The program played at the clock its power holds (archsim/hardware/power.py): the highest
    clock at which its power, computed from a play at that clock, stays at or under the limit
    (`played`: its play at the chip's clock). The time at another clock f is estimated as
    the critical core's compute scaling as 1/f and the rest as fixed; the program is played again
    at the clock found, each play correcting the estimate, at most MAX_HELD_PLAYS times. Where the
    last play still draws more than the limit (the estimate errs high, as the stalls shrink too at
    a lower clock), `under_the_limit` steps down to a clock that is under it for certain."""
    p, f_max = chip.power, chip.clock_hz
    if p is None or played.cycles == 0:
        return f_max, played
    a = played_activity(program, played)
    if power_w(p, a, played.cycles / f_max, f_max) <= p.limit_w:
        return f_max, played
    clock = f_max
    for replays in range(MAX_HELD_PLAYS - 1):
        compute_s, total_s = played.compute_cycles / clock, played.cycles / clock
        if replays >= 2 and power_w(p, a, total_s, clock) <= p.limit_w:
            break
        if screen and replays == 1 and close_under(power_w(p, a, total_s, clock), p.limit_w):
            return clock, played

        def time_at(
            f: float, compute_s: float = compute_s, other_s: float = total_s - compute_s, at: float = clock
        ) -> float:
            return compute_s * at / f + other_s

        before, clock = clock, held_clock_hz(p, a, time_at, f_max)
        if clock == before:  # the same clock plays the same: nothing to correct
            break
        played = play_program(program, at_clock(chip, clock))
        a = played_activity(program, played)
    return under_the_limit(program, chip, clock, played)


def close_under(power: float, limit_w: float) -> bool:
    """Whether `power` is at or under `limit_w` by at most HOLD_TOLERANCE of it (screen fidelity's
    test that a held clock's first replay has landed)."""
    return limit_w * (1.0 - HOLD_TOLERANCE) <= power <= limit_w


def under_the_limit(program: Program, chip: Chip, clock: float, played: ProgramResult) -> tuple[float, ProgramResult]:
    """The program at `clock` (`played` there) if its power is at or under the limit, else at a
    lower clock whose power is, found without estimating: a kernel's time never grows with its
    clock, so at any f below `clock` it takes at least the time T played there, and its power
    at f is at most its actions' energy over T plus the floor at f. The highest f where that
    bound meets the limit is under it for certain; it is played, and stepped down again in the
    rare case that the play moved other bytes (or the lowest clock is reached, where the floor
    holds: memory traffic whose power no clock lowers)."""
    p = chip.power
    assert p is not None
    for _ in range(MAX_HELD_PLAYS):
        a, time_s = played_activity(program, played), played.cycles / clock
        if clock <= p.min_clock_hz or power_w(p, a, time_s, clock) <= p.limit_w:
            break

        def at_least(_f: float, time_s: float = time_s) -> float:
            return time_s

        clock = held_clock_hz(p, a, at_least, clock)
        played = play_program(program, at_clock(chip, clock))
    return clock, played
