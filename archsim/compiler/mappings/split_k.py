"""Split-K GEMM mapping: each output tile's K range cut into `split` slices, one work item each,
for a GEMM with fewer output tiles than cores; the slices' fp32 partial sums are written (to L2
where they fit) and summed by a reduction kernel after (`reduce_phase`)."""

from __future__ import annotations

import numpy as np

from archsim.compiler.gemm_mapping import Estimate, GemmMappingRule
from archsim.compiler.gemm_phases import GemmMapping, Phase, Tiling, reduce_phase
from archsim.compiler.program import PARTIAL_BYTES
from archsim.graph.ops import Op
from archsim.hardware import Chip

SPLITS = (2, 3, 4, 6, 8, 12, 16)  # K slices per tile a split-K kernel offers


class SplitK(GemmMappingRule):
    mapping = GemmMapping.SPLIT_K
    order = 30

    def splits(self, e: Estimate) -> tuple[int, ...]:
        """Offered only where some tile shape leaves cores without a tile."""
        return SPLITS if (e.tiles < e.chip.cores).any() else ()

    def estimate(self, e: Estimate, split: int) -> tuple[np.ndarray, np.ndarray]:
        """One item per tile slice (`sliced_times`), plus the reduction kernel: a launch, and
        every fp32 partial written and read once more at the cores' load rate; no more slices
        than K steps."""
        est, compute_s = e.sliced_times(split)
        op = e.op
        partial_bytes = 2 * split * op.groups * op.m * op.n * PARTIAL_BYTES
        est = est + e.chip.overheads.kernel_s + partial_bytes / (e.chip.cores * e.rate)
        return np.where(split <= e.ksteps, est, np.inf), compute_s

    def phases(self, op: Op, chip: Chip, t: Tiling) -> list[Phase]:
        gemm = self.plain_phase(op, chip, t)
        return [gemm, reduce_phase(op, chip, t.split)] if t.split > 1 else [gemm]


RULE = SplitK()
