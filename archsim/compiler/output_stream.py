"""A statically scheduled dataflow chip's GEMM tile, its outputs streamed out a block at a time.

A dataflow compiler pipelines a tile at a fine grain: its compute units stream each block of
results onward (to memory units and off-chip) as it is finished, and operands stream into the
compute as they arrive (Prabhakar et al., "Plasticine", ISCA 2017: pattern compute units stream
their outputs to pattern memory units, which take writes while they are read; SambaNova's SN40L,
Prabhakar et al., MICRO 2024 and Hot Chips 2024: a compute unit runs as a systolic array, its
memory units are scratchpads read and written at once, and the AGCUs carry tiles to and from
off-chip memory while the pipeline runs; Groq's TSP, Abts et al., ISCA 2020: the MXM's results
flow out on the streams to the memory slices as they are produced). So the loop over a tile's
output columns runs outside its K loop: the core's arrays finish one block of an array's width
of columns over the whole of K (`output_block_cols`; its arrays share the block's rows), the
block's outputs drain while the next block computes, and only the last block's drain is left
after the tile's last compute. The tile's A panel (tm x K) stays in SRAM while its blocks pass,
loaded with the first block's K steps; every later block loads only its B columns. Same bytes,
same MACs as the K-outer order: a 512 x 1024 tile over K = 1,024 on 128 x 128 arrays drains
128 of its 1,024 columns after its last compute, not all of them; its first compute waits for
512 x 128 of A and 128 x 128 of B (160 KiB), not 512 x 128 and 128 x 1,024 (384 KiB).

Entries as the engine plays them (archsim/engine: a tile's entries load in order, compute once
loaded, and post their stores into a backlog that drains without blocking), one per (block, K
step), cycles as a step shape's index (`gemm_phases.PhasePlan`). Units: bytes, columns, steps.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from archsim.compiler.tiles import step_cycles
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.program import entries
from archsim.units import ceil_div


class Tile(Protocol):
    """A tiling's tile as this module reads it (a `gemm_phases.Tiling`, which builds on this
    module): tm x tn outputs, tk of K a step, K in `split` slices."""

    @property
    def tm(self) -> int: ...
    @property
    def tn(self) -> int: ...
    @property
    def tk(self) -> int: ...
    @property
    def split(self) -> int: ...


def item_k(op: Op, tk: int, split: int) -> int:
    """K of a tiling's longest item: the whole of K, or a K slice of `split` (whole steps of tk)."""
    return min(op.k, ceil_div(ceil_div(op.k, tk), split) * tk)


def feed_floor_cycles(op: Op, chip: Chip, t: Tile, cores: int) -> float:
    """Cycles each tile step of a core takes at least while main memory feeds the GEMM: its
    compulsory bytes over main-memory bandwidth, spread over the K steps one of `cores` runs
    (its waves of items, each of its K slice's steps).

    E.g. 4096 x 1024 x 4096 bf16 (50,331,648 B) from 614.4 GB/s at 1.08 GHz: 88,474 cycles;
    512 x 4096 x 128 tiles in 2 K slices are 16 items on 32 cores, one wave of 4 steps: 22,118."""
    items = op.groups * ceil_div(op.m, t.tm) * ceil_div(op.n, t.tn) * t.split
    steps = ceil_div(items, cores) * ceil_div(item_k(op, t.tk, t.split), t.tk)
    return op.min_bytes() / chip.hbm.peak_bandwidth_bytes_per_s * chip.clock_hz / steps


def output_block_cols(op: Op, chip: Chip, t: Tile, install: float, cores: int = 0) -> int:
    """Columns of a tile's output the core's arrays finish together over the whole of K, where
    the tile is wider than the block and its SRAM holds two A panels (this tile's and the
    next's, tm x K) beside two blocks' B steps (tk x cols); else 0 (the K-outer order, outputs
    drained after the tile's last step). The tile streams where a block of an array's width
    times a power of two, up to its arrays side by side (units x cols), has steps that take no
    longer than the tile's whole step on the arrays (their weights installed at `install` bytes
    a cycle, folds chained: a block of few rows an array leaves the arrays waiting on installs);
    its block is then the narrowest whose steps take no longer than that, or than main memory
    takes to feed a step on `cores` (0: the chip's; `feed_floor_cycles`): a wider block is fed
    no sooner and only coarsens the pipeline, its first compute waiting on a larger load and
    its last left after the loads.

    E.g. the Dataflow-2S (2 arrays of 128 x 128, 16 MiB, 2,048 B a cycle): 128 columns of a
    512 x 1024 x 128 tile, K = 1,024, bf16: 8 blocks of 256 cycles take the tile step's 2,048,
    and 2 x 1 MiB + 2 x 32 KiB fits; a 32-row tile's 8 blocks of 32 cycles would take 256 > 132,
    its 4 of 256 columns 4 x 36 = 144: it drains in the K-outer order."""
    core, cols = chip.core, chip.core.array.cols
    em, en, k = min(t.tm, op.m), min(t.tn, op.n), min(t.tk, op.k)
    panel = t.tm * item_k(op, t.tk, t.split) * op.dtype.bytes
    whole, paced, fed = 0, 0.0, 0
    while cols < en and cols <= core.matrix_units * core.array.cols:
        if 2 * panel + 2 * t.tk * cols * op.b_dtype.bytes > core.sram.capacity_bytes:
            return 0
        if not whole:
            whole = step_cycles(core, em, k, en, op.dtype, op.b_dtype, install, True)
            paced = max(whole, feed_floor_cycles(op, chip, t, cores or chip.cores))
        blocks, last = divmod(en, cols)
        parts = blocks * step_cycles(core, em, k, cols, op.dtype, op.b_dtype, install, True)
        if last:
            parts += step_cycles(core, em, k, last, op.dtype, op.b_dtype, install, True)
        fed = fed or (cols if parts <= paced else 0)
        if parts <= whole:
            return fed or cols
        cols *= 2
    return 0


def streamed_stages(op: Op, t: Tile, cols: int, capacity_bytes: int) -> int:
    """SRAM buffers of a streamed tile's B steps: what two A panels leave, in blocks' B steps
    (tk x cols), at most a tile's entries (a core prefetches into one next panel, no further).

    E.g. 512 x 1024 x 128 tiles, K = 1,024, 128 columns, bf16, 8 MiB: (8 MiB - 2 MiB) / 32 KiB
    = 192, at most 8 blocks x 8 steps = 64."""
    k = item_k(op, t.tk, t.split)
    panel = t.tm * k * op.dtype.bytes
    per_tile = ceil_div(k, t.tk) * ceil_div(t.tn, cols)
    return int(max(1, min(per_tile, (capacity_bytes - 2 * panel) // (t.tk * cols * op.b_dtype.bytes))))


def streamed_item(
    em: int,
    en: int,
    ks: np.ndarray,
    cols: int,
    moved: tuple[float, float],
    hbm_share: float,
    out: tuple[str, float],
    shapes: dict[tuple[int, int, int], int],
) -> np.ndarray:
    """The entries of one em x en tile over K steps `ks`, its columns in blocks of `cols`, each
    block's K steps in order: loads of its B step (tk x block columns) and, in the first block,
    the A step (em x tk) into the panel, `moved` bytes an element of A and of B (a multicast
    share moved per core), `hbm_share` of them from HBM and the rest from L2; each step's cycles
    the index of its shape (em, K step, block columns) in `shapes` (added in order of first use);
    the block's em x columns outputs (`out`: the column they go to, bytes an element) stored at
    its last step.

    E.g. 512 x 1024 over 8 steps of 128, blocks of 128, bf16: 64 entries; the first 8 load
    512 x 128 x 2 + 128 x 128 x 2 = 163,840 B, the other 56 32,768 B; entries 7, 15, ..., 63
    store 512 x 128 x 2 = 131,072 B."""
    a, b = moved
    widths = np.minimum(cols, en - cols * np.arange(ceil_div(en, cols)))
    steps = len(ks)
    k_of = np.tile(ks, len(widths))
    w_of = np.repeat(widths, steps)
    load = k_of * w_of * b
    load[:steps] += ks * em * a
    seq = entries(len(k_of), hbm_bytes=load * hbm_share, l2_bytes=load * (1.0 - hbm_share))
    seq["cycles"] = [shapes.setdefault((em, int(k), int(w)), len(shapes)) for k, w in zip(k_of, w_of, strict=True)]
    column, out_bytes = out
    seq[column][steps - 1 :: steps] = em * widths * out_bytes
    return seq


def drained_cols(en: np.ndarray, chip: Chip, chained: bool) -> np.ndarray:
    """Columns of a tile's output (`en`, of every tile shape) left to drain after its last
    compute, as the autotuner's estimate takes them: an array's width where a `chained` schedule
    streams the rest out as it computes (whether its SRAM holds the A panels left out), else all
    of them (`en` itself). E.g. 1,024 columns on 128 x 128 arrays: 128."""
    return np.minimum(en, chip.core.array.cols) if chained else en
