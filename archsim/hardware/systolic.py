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
row a cycle preloads it in `load_cycles` (`fold_install_cycles`) instead of R. Chained folds (a
statically scheduled chip's: one fold follows another across tile steps without the array
draining) pay the skew once per kernel, where the compiler adds it (`fill_drain_cycles`), and
install at the streams' rate without rounding each fold to whole cycles (`fold_install_exact`).
`k_per_cycle` > 1 (fp8 at twice the bf16 rate) shortens the reduction dimension.
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


def fold_install_exact(rows: int, cols: int, k_per_cycle: int, weight_bytes: float, bytes_per_cycle: float) -> float:
    """`fold_install_cycles` of folds installed back to back from streams (a fold's last bytes
    share a cycle with the next fold's first): R x kpc x C x bytes / rate, at most R.

    E.g. a 320 x 320 array, bf16, fed 88,889 B a cycle: 204,800 / 88,889 = 2.304 cycles."""
    return float(min(rows, rows * k_per_cycle * cols * weight_bytes / bytes_per_cycle))


def block_install_cycles(
    k, n, rows: int, cols: int, dataflow: Dataflow, k_per_cycle: int, weight_bytes: float, bytes_per_cycle: float,
    exact: bool,
):  # fmt: skip
    """Cycles to install each fold of a product's stationary operand over streams of
    `bytes_per_cycle`. Weight-stationary: the folds hold the product's K x N weights between
    them, a fold at an edge of K or N only what is left there (its bytes, not a whole array's),
    on average K x N x bytes / folds / rate a fold: rounded up per fold
    (`fold_install_cycles`) or, `exact`, not (`fold_install_exact`); other dataflows a whole
    array's. Vectorised over K and N.

    E.g. a 256 x 256 array, bf16, fed 5,682 B a cycle: a K x N block of 8,192 x 128 in 32 folds
    of 256 x 128, 65,536 B each, ceil(11.5) = 12 cycles a fold (a whole array's 131,072 B: 24)."""
    if dataflow is not Dataflow.WS:
        install = fold_install_exact if exact else fold_install_cycles
        return install(rows, cols, k_per_cycle, weight_bytes, bytes_per_cycle)
    k, n = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    folds = np.maximum(1, ceil_div(ceil_div(k, k_per_cycle), rows) * ceil_div(n, cols))
    per_fold = k * n * weight_bytes / folds / bytes_per_cycle
    if exact:
        return np.minimum(rows, per_fold)
    return np.minimum(rows, np.maximum(1, np.ceil(per_fold))).astype(np.int64)


def fill_drain_cycles(rows: int, cols: int) -> int:
    """The skew of a pipelined weight-stationary array, R + C - 2: the first input's walk down
    its rows and the last sum's out of its columns (a 320 x 320 array: 638)."""
    return rows + cols - 2


def array_cycles(
    m,
    k,
    n,
    rows: int,
    cols: int,
    dataflow: Dataflow,
    mode: FoldMode,
    k_per_cycle: int = 1,
    load_cycles=0,
    chained: bool = False,
):
    """Cycles for one array to compute an M x K x N product (zero where any dimension is zero);
    a pipelined fold's stationary operand loads in `load_cycles` (0: R, a row a cycle).
    `chained` (pipelined folds only): the product's folds follow the previous product's on the
    array, so its skew is not paid here (`fill_drain_cycles`, once per kernel) and the folds'
    cycles are rounded up once: ceil(folds x max(stream, load)).

    E.g. 1 x 8192 x 8192 on a 320 x 320 array (bf16 installed in 2.304 cycles a fold): 26 x 26
    folds of max(1, 2.304): ceil(1,557.5) = 1,558 chained; 676 x 3 + 638 = 2,666 with the
    load rounded to 3 and the skew."""
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (m, k, n))
    k_eff = ceil_div(k, k_per_cycle)
    folds, stream = fold_geometry(m, k_eff, n, rows, cols, dataflow)
    if mode is FoldMode.SERIAL:
        extra = rows if dataflow is not Dataflow.OS else 0  # stationary-operand preload
        out = folds * (extra + rows + cols + stream - 2)
    elif chained:
        out = np.ceil(folds * np.maximum(stream, _or_rows(load_cycles, rows))).astype(np.int64)
    else:
        out = folds * np.maximum(stream, _or_rows(load_cycles, rows)) + rows + cols - 2
    return np.where((m > 0) & (k > 0) & (n > 0), out, 0)


def _or_rows(load_cycles, rows: int):
    """The fold's load cycles (scalar or per shape), or R (a row a cycle) where none is given."""
    if np.ndim(load_cycles) == 0:
        return load_cycles or rows
    return load_cycles


def scalesim_cycles(m: int, k: int, n: int, rows: int, cols: int, dataflow: Dataflow) -> int:
    """SCALE-Sim's reported compute cycles for a whole GEMM: serial folds, minus one."""
    return int(array_cycles(m, k, n, rows, cols, dataflow, FoldMode.SERIAL)) - 1
