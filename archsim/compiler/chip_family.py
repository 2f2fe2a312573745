"""What a chip family's mapper provides: the GEMM tile menu and the decode attention item, as
the family's compiler forms them. A family is a file of archsim/compiler/families/ keyed by its
`ChipFamily`, chosen by the chip file's `family:`; a method left as it is here (returning None)
keeps the kernel-library mapping of archsim/compiler/gemm.py and attention.py, which is the GPU
family's.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable

import numpy as np

from archsim.graph.ops import Op
from archsim.hardware import Chip, ChipFamily

TileGrid = tuple[np.ndarray, np.ndarray, np.ndarray]  # legal (tm, tn, tk) of a GEMM, one per row


class SearchMove(enum.Enum):
    """A move of the tiling search around a GEMM's shortlist (archsim/choose/tilings.py
    `neighbours`)."""

    TILE = "tile"  # a tile edge doubled or halved, or its aspect doubled one way and halved the other
    K_STEP = "k"  # the K step doubled or halved
    MAPPING = "mapping"  # the same tile under another mapping
    CORES = "cores"  # its items dealt over half the cores, or back to twice as many


EVERY_MOVE = frozenset(SearchMove)


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

    def search_moves(self) -> frozenset[SearchMove]:
        """The moves of the search around a GEMM's shortlisted tilings (archsim/choose/pick.py
        `_search`): none for a kernel library, whose heuristic list is timed as it is (cuBLASLt's
        and hipBLASLt's, the GPU family's); `EVERY_MOVE` for a compiler that compiles ahead of
        time for one chip and tunes its tiling by timing candidates around its cost model's."""
        return frozenset()

    def estimates_feed(self) -> bool:
        """Whether the cost model that ranks a GEMM's tilings (archsim/compiler/gemm.py
        `shortlist`) counts the time main memory takes to feed each (`gemm.feed_s`): a compiler
        that compiles for one chip and searches its tilings (`search_moves`) does; a kernel
        library's heuristic list, timed as it is, is the GPU family's."""
        return bool(self.search_moves())

    def tries_half_the_cores(self) -> bool:
        """Whether the autotuner also times the GEMM tiling it picked dealt over half the cores
        where its tiles fill one wave (archsim/choose/pick.py `_over_half_the_cores`): a kernel
        library's persistent kernels, launched with the workgroups found fastest (the GPU
        family's); a family that searches its tilings (`search_moves`) has the move already."""
        return False

    def chains_folds(self, chip: Chip) -> bool:
        """Whether the compiler's schedule runs a kernel's folds back to back on each array,
        across tile steps, without draining it between them (a static schedule), so that the
        arrays' skew is paid once per kernel (`gemm_phases.with_skew_once`) and folds install
        without rounding each to whole cycles; False: each tile step fills and drains the array
        (a GPU's MMA instructions, a library's kernels)."""
        return False
