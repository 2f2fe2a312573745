"""How much of the model a simulation plays: `full` (every candidate, the power limit's clock found
by its fixed point, decode attention at every KV length asked for) or `screen`, for exploring many
designs quickly:

- a GEMM's tilings: only the compiler's first SCREEN_TILINGS of its shortlist are compiled and
  played (the shortlist is ranked best first by the compiler's own estimate; archsim.compiler.gemm).
  It is the longest shortlist, 8, the leanest tiling and (where the compiler ranks by main
  memory's feed too, compiler/gemm.py) the best by the estimate without it, so every tiling is
  still played: trusting the ranking to its first 4 put a GEMM 24% off on the A100 (the best tiling
  5th or later) and its first 2 a 128-token prefill step 6.5% off on the H200
  (docs/performance.md, "Screen fidelity");
- the power-limited clock: the fixed point stops at its first replay when that play's power is
  within HOLD_TOLERANCE under the limit (clock.py `play_held`; full fidelity replays at least
  twice), and otherwise goes on as at full fidelity. It takes no play over the limit, however
  close (a kernel's time moves in steps with its clock: one 0.35% over put an A100 GEMM 3.1%
  off), and no clock estimated without a replay (8.6% off; docs/performance.md);
- decode attention: at the KV lengths on each side of every KV_GRID boundary (a multiple of every
  K/V block edge a flash kernel offers, archsim/compiler/attention.py), and linearly between them
  (archsim/runner/generation.py `attention_samples`): between two boundaries the block count, and
  so the kernels' items, stay the same and only the last block's valid rows grow.

tools/screen_check.py measures screen against full on every shipped validate set and sweep.

The fidelity is a process-wide setting read by the memoised functions as part of their key
(`current()`), so results of the two never mix; screen results are kept in the on-disk op cache
under keys of their own. Full fidelity is the default and computes exactly what it did before.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager


class Fidelity(enum.Enum):
    FULL = "full"
    SCREEN = "screen"


SCREEN_TILINGS = 10  # a GEMM's shortlisted tilings played at screen (best first; 4 or 8 and two kept apart: all)
HOLD_TOLERANCE = 0.01  # screen: a held clock's first replay drawing within 1% under the limit stands
KV_GRID = 16  # tokens: screen samples decode attention on each side of every multiple (the least block edge)

_current = Fidelity.FULL


def current() -> Fidelity:
    """The fidelity simulations run at now."""
    return _current


def screening() -> bool:
    return _current is Fidelity.SCREEN


@contextmanager
def at_fidelity(fidelity: Fidelity | str) -> Iterator[Fidelity]:
    """Simulate at `fidelity` inside the block (restored after it, whatever happens)."""
    global _current
    before, _current = _current, Fidelity(fidelity)
    try:
        yield _current
    finally:
        _current = before
