"""Data-parallel GEMM mapping: one work item per output tile, over all of K, dealt to the cores
in waves (a last partial wave leaves cores idle)."""

from __future__ import annotations

import numpy as np

from archsim.compiler.gemm_mapping import Estimate, GemmMappingRule
from archsim.compiler.gemm_phases import GemmMapping, Phase, Tiling
from archsim.graph.ops import Op
from archsim.hardware import Chip


class DataParallel(GemmMappingRule):
    mapping = GemmMapping.DATA_PARALLEL
    order = 20

    def splits(self, e: Estimate) -> tuple[int, ...]:
        return (1,)

    def estimate(self, e: Estimate, split: int) -> tuple[np.ndarray, np.ndarray]:
        return e.sliced_times(split)

    def phases(self, op: Op, chip: Chip, t: Tiling) -> list[Phase]:
        return [self.plain_phase(op, chip, t)]


RULE = DataParallel()
