"""Cycles of a matrix multiply on a systolic array, with fill and drain, per dataflow.

For a GEMM of an `M x K` by a `K x N` operand on an `R x C` array (SCALE-Sim's conventions,
Samajdar et al., "SCALE-Sim", arXiv:1811.02883):

  weight-stationary (WS):  ceil(K/R) * ceil(N/C) folds of (2R + C + M - 2) cycles
  output-stationary (OS):  ceil(M/R) * ceil(N/C) folds of (R + C + K - 2) cycles
  input-stationary  (IS):  ceil(K/R) * ceil(M/C) folds of (2R + C + N - 2) cycles

Serial folds run one after another (SCALE-Sim reports this sum minus one). Pipelined folds
preload the next fold's stationary operand while the current one streams, as double-buffered
PEs do: each fold costs max(stream length, R) and the skew of fill and drain, R + C - 2, is
paid once; a chip whose arrays install a fold's stationary operand over wider streams than a
row a cycle preloads it in `load_cycles` (`fold_install_cycles`) instead of R. `k_per_cycle` > 1 (fp8 at twice the bf16 rate) shortens the reduction dimension.
All functions take numpy arrays or ints and are vectorised.
"""

from __future__ import annotations

import numpy as np

from archsim.hardware.chip import Dataflow, FoldMode
from archsim.units import ceil_div


def fold_geometry(m, k, n, rows: int, cols: int, dataflow: Dataflow):
    """(folds, stream length per fold) of an M x K x N product on an R x C array."""
    if dataflow is Dataflow.WS:
        return ceil_div(k, rows) * ceil_div(n, cols), m
    if dataflow is Dataflow.OS:
        return ceil_div(m, rows) * ceil_div(n, cols), k
    return ceil_div(k, rows) * ceil_div(m, cols), n


def fold_install_cycles(rows: int, cols: int, k_per_cycle: int, weight_bytes: float, bytes_per_cycle: float) -> int:
    """Cycles to install one fold's stationary operand (R x k_per_cycle x C elements of
    `weight_bytes`) over streams of `bytes_per_cycle`, at least 1 and at most R (a row a cycle,
    the array's own load path): ceil(R x kpc x C x bytes / rate).

    E.g. a 320 x 320 array, bf16 (kpc 1, 2 B), fed 88,889 B a cycle: 204,800 / 88,889 -> 3
    cycles; at 1,024 B a cycle 200 cycles; at 100 B a cycle capped at 320."""
    return int(min(rows, max(1, np.ceil(rows * k_per_cycle * cols * weight_bytes / bytes_per_cycle))))


def array_cycles(
    m, k, n, rows: int, cols: int, dataflow: Dataflow, mode: FoldMode, k_per_cycle: int = 1, load_cycles: int = 0
):
    """Cycles for one array to compute an M x K x N product (zero where any dimension is zero);
    a pipelined fold's stationary operand loads in `load_cycles` (0: R, a row a cycle)."""
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (m, k, n))
    k_eff = ceil_div(k, k_per_cycle)
    folds, stream = fold_geometry(m, k_eff, n, rows, cols, dataflow)
    if mode is FoldMode.SERIAL:
        extra = rows if dataflow is not Dataflow.OS else 0  # stationary-operand preload
        out = folds * (extra + rows + cols + stream - 2)
    else:
        out = folds * np.maximum(stream, load_cycles or rows) + rows + cols - 2
    return np.where((m > 0) & (k > 0) & (n > 0), out, 0)


def scalesim_cycles(m: int, k: int, n: int, rows: int, cols: int, dataflow: Dataflow) -> int:
    """SCALE-Sim's reported compute cycles for a whole GEMM: serial folds, minus one."""
    return int(array_cycles(m, k, n, rows, cols, dataflow, FoldMode.SERIAL)) - 1
