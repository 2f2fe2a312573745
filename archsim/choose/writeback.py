"""The L2 write-back a matrix kernel pays when it is timed alone after an L2 flush
(`Condition.STANDALONE`): the lines its loads and stores allocate evict dirty lines, written
back to HBM. Bytes in bytes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from archsim.program import Program


def dirty_evicted_bytes(allocated_bytes: float, capacity_bytes: float, dirty_share: float = 1.0) -> float:
    """Dirty bytes written back while `allocated_bytes` of new lines enter an L2 of
    `capacity_bytes` of which a flush left `dirty_share` dirty, the victim of each allocation taken
    at random (the L2's slices hash addresses and do not keep an LRU order across them): a dirty
    line survives each allocation with probability 1 - line/C, so after A bytes D exp(-A/C) of the
    D = share x C dirty bytes remain dirty and D (1 - exp(-A/C)) were written back. Like share x A
    for A << C; all of D once A >> C."""
    if capacity_bytes <= 0:
        return 0.0
    return dirty_share * capacity_bytes * -math.expm1(-allocated_bytes / capacity_bytes)


def with_writeback(program: Program, capacity_bytes: float, dirty_share: float = 1.0) -> Program:
    """The program after an L2 write-flush that left `dirty_share` of the L2 dirty: the bytes its
    loads from HBM and its stores allocate in L2 evict dirty lines, written back to HBM
    (`dirty_evicted_bytes`); the write-backs are spread over the entries in proportion to what
    they allocate."""
    allocated = sum(float(np.sum((ph.hbm_bytes + ph.store_bytes) * ph.entry_weights)) for ph in program.phases)
    if allocated <= 0:
        return program
    share = dirty_evicted_bytes(allocated, capacity_bytes, dirty_share) / allocated
    phases = tuple(
        replace(ph, store_bytes=ph.store_bytes + share * (ph.hbm_bytes + ph.store_bytes)) for ph in program.phases
    )
    return replace(program, phases=phases)
