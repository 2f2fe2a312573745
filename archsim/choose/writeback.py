"""The L2 write-back a matrix kernel pays when it is timed alone after an L2 flush
(`Condition.STANDALONE`): the lines its loads and stores allocate evict dirty lines, written
back to HBM. Bytes in bytes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from archsim.program import Program


def dirty_evicted_bytes(allocated_bytes: float, capacity_bytes: float) -> float:
    """Dirty bytes written back while `allocated_bytes` of new lines enter an L2 of
    `capacity_bytes` that a flush left all dirty, the victim of each allocation taken at random
    (the L2's slices hash addresses and do not keep an LRU order across them): a dirty line
    survives each allocation with probability 1 - line/C, so after A bytes C exp(-A/C) remain
    dirty and C (1 - exp(-A/C)) were written back. Like A for A << C; all of C once A >> C."""
    return capacity_bytes * -math.expm1(-allocated_bytes / capacity_bytes) if capacity_bytes > 0 else 0.0


def with_writeback(program: Program, capacity_bytes: float) -> Program:
    """The program after an L2 write-flush: the bytes its loads from HBM and its stores allocate
    in L2 evict dirty lines, written back to HBM (`dirty_evicted_bytes`); the write-backs are
    spread over the entries in proportion to what they allocate."""
    allocated = sum(float(np.sum((ph.hbm_bytes + ph.store_bytes) * ph.entry_weights)) for ph in program.phases)
    if allocated <= 0:
        return program
    share = dirty_evicted_bytes(allocated, capacity_bytes) / allocated
    phases = tuple(
        replace(ph, store_bytes=ph.store_bytes + share * (ph.hbm_bytes + ph.store_bytes)) for ph in program.phases
    )
    return replace(program, phases=phases)
