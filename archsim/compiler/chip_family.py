"""What a chip family's mapper provides: the GEMM tile menu and the decode attention item, as
the family's compiler forms them. A family is a file of archsim/compiler/families/ keyed by its
`ChipFamily`, chosen by the chip file's `family:`; a method left as it is here (returning None)
keeps the kernel-library mapping of archsim/compiler/gemm.py and attention.py, which is the GPU
family's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np

from archsim.graph.ops import Op
from archsim.hardware import Chip, ChipFamily

TileGrid = tuple[np.ndarray, np.ndarray, np.ndarray]  # legal (tm, tn, tk) of a GEMM, one per row


def tile_grid(tms: Iterable[int], tns: Iterable[int], tks: Iterable[int]) -> TileGrid:
    """Every (tm, tn, tk) of the given edges and K steps, as the arrays of a `TileGrid`."""
    grid = np.array(list(itertools.product(tms, tns, tks)), dtype=np.int64)
    return grid[:, 0], grid[:, 1], grid[:, 2]


class FamilyRule:
    """A chip family's mapper (archsim/compiler/families/); the defaults are the GPU library's."""

    family: ChipFamily = ChipFamily.GPU

    def gemm_tiles(self, op: Op, chip: Chip) -> TileGrid | None:
        """The GEMM tiles the family's compiler may choose, each legal on the chip (fits its
        buffers), or None for the kernel library's menu (`gemm.library_tiles`)."""
        return None

    def decode_item(self, shape: Op, chip: Chip, score_ops: tuple[int, int]) -> tuple[int, int, int, float] | None:
        """(query rows per item, bq, bk, cycles of one K/V block) of a decode attention op
        (`shape`: its KV length 0; `score_ops`: lane and special-function operations per score,
        the softmax's and its variants'), or None for the flash kernel's
        (`attention.item_shape`)."""
        return None

    def kv_stages(self, chip: Chip, block_bytes: float) -> int | None:
        """K/V buffers a decode attention kernel cycles through (one computing, the rest loading)
        for blocks of `block_bytes`, or None for the flash kernel's (`attention.KV_STAGES`)."""
        return None

    def weight_install_bytes_per_cycle(self, chip: Chip) -> float:
        """Bytes a cycle the core's matrix units take a fold's stationary weights at
        (`systolic.fold_install_cycles`), or 0 for a row a cycle, the array's own load path."""
        return 0.0

    def searches_tilings(self) -> bool:
        """Whether the family's compiler, which compiles ahead of time for one chip, searches
        the tilings around the best its cost model and timing found (`archsim.choose`'s
        neighbourhood search: a tile edge or K step doubled or halved, another mapping) until
        none is faster; False: a kernel library's heuristic list, timed as it is (cuBLASLt's
        and hipBLASLt's algorithm heuristics, the GPU family's)."""
        return False

    def chains_folds(self, chip: Chip) -> bool:
        """Whether the compiler's schedule runs a kernel's folds back to back on each array,
        across tile steps, without draining it between them (a static schedule), so that the
        arrays' skew is paid once per kernel (`gemm_phases.with_skew_once`) and folds install
        without rounding each to whole cycles; False: each tile step fills and drains the array
        (a GPU's MMA instructions, a library's kernels)."""
        return False
