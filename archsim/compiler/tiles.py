"""Cycles of one tile step on a core: its matrix units working together, fed from local SRAM.

A core's `A` arrays split a tile between them along N or along M, whichever is faster (or
along M only where the hardware's matrix instruction does: a Hopper warpgroup MMA gives each
of the four tensor cores 16 of its 64 rows, and the GEMM library runs a product with the larger
side on M, transposed as C^T = B^T A^T where N is the larger: cuBLAS's batch-1 decode GEMMs on the
H200 are 128 x 8 tiles, the weights' rows on the MMA's M and the token on its N, which PTX's
wgmma.m64nNk16 takes in multiples of 8), each computing its share with the systolic
formula of `archsim.hardware.systolic`; the step takes the longer of that and the time the
SRAM needs to deliver the operands, plus the vector lanes' conversion of an operand stored in
another format than the one the arrays multiply in (archsim/compiler/formats.py: the warps that
issue the matrix instructions convert the tile before they can use it).
"""

from __future__ import annotations

import numpy as np

from archsim.compiler.formats import convert_lane_ops, wider
from archsim.errors import UnsupportedError
from archsim.hardware import Chip, Core, DType
from archsim.hardware.systolic import array_cycles, block_install_cycles
from archsim.memo import memo
from archsim.units import ceil_div


def matmul_cycles(
    core: Core,
    m,
    k,
    n,
    a_dtype: DType,
    b_dtype: DType | None = None,
    install_bytes_per_cycle: float = 0.0,
    chained: bool = False,
    transposable: bool = False,
):
    """Cycles for one core to compute an m x k x n product (vectorised over arrays of shapes);
    `transposable`: a GEMM library's product, which runs transposed where that puts the larger
    side on a warpgroup MMA's rows (an attention kernel keeps its query rows there);
    `install_bytes_per_cycle` > 0: the arrays install their folds' weights at that rate between
    them (`block_install_cycles`, the chip family's: archsim/compiler/chip_family.py), else a row
    a cycle. `chained`: the folds follow the previous step's without the skew and install without
    rounding each (`systolic.array_cycles`; the chip family's `chains_folds`)."""
    b_dtype = b_dtype or a_dtype
    arr = core.array
    kpc = arr.k_rate(compute_dtype(a_dtype, b_dtype))
    if kpc == 0:  # `matrix_format` refuses such ops before they are compiled
        raise UnsupportedError(f"the matrix units have no {compute_dtype(a_dtype, b_dtype).value} rate")
    units = core.matrix_units
    m, k, n = (np.asarray(x, dtype=np.int64) for x in (m, k, n))

    def on_arrays(rows_each, cols_each):
        """One array's cycles on its share (`rows_each` x k x `cols_each`), its folds' weights
        installed at its share of the rate (`block_install_cycles`: a partial fold's bytes)."""
        load = 0
        if install_bytes_per_cycle > 0:
            rate = install_bytes_per_cycle / units
            load = block_install_cycles(
                k, cols_each, arr.rows, arr.cols, arr.dataflow, kpc, b_dtype.bytes, rate, chained
            )
        shape = (arr.rows, arr.cols, arr.dataflow, arr.fold_mode, kpc, load, chained)
        return array_cycles(rows_each, k, cols_each, *shape)

    split_m = on_arrays(ceil_div(m, units), n)
    if arr.split_m_only and transposable and install_bytes_per_cycle == 0:  # the larger side on the MMA's M
        cycles = np.minimum(split_m, on_arrays(ceil_div(n, units), m))
    elif arr.split_m_only:
        cycles = split_m
    else:
        split_n = on_arrays(m, ceil_div(n, units))
        cycles = np.minimum(split_n, split_m)
    operand_bytes = m * k * a_dtype.bytes + k * n * b_dtype.bytes
    sram_cycles = np.ceil(operand_bytes / core.sram.bandwidth_bytes_per_cycle).astype(np.int64)
    step = np.maximum(cycles, sram_cycles)
    convert_a, convert_b = convert_lane_ops(arr, a_dtype, b_dtype)
    if convert_a or convert_b:
        return step + conversion_cycles(core, m * k * convert_a + k * n * convert_b)
    return step


def conversion_cycles(core: Core, lane_ops):
    """Cycles of the vector lanes converting operands: lane ops / issue width, rounded up."""
    return np.ceil(np.asarray(lane_ops, dtype=np.float64) / core.vector.issue_per_cycle).astype(np.int64)


def compute_dtype(a: DType, b: DType) -> DType:
    """The MAC format: the wider of the two operands (fp8 x fp8 runs at the fp8 rate; W4A16 in
    bf16, its int4 weights converted in each tile step)."""
    return wider(a, b)


def matrix_format(op, chip: Chip, what: str = "") -> DType | None:
    """The format an op's matrix products run in (GEMM: the wider operand; attention: its K/V
    format), or None for ops without them; UnsupportedError, naming the formats the array does
    have, where it has no rate for it or for a GEMM's activations. archsim never costs one
    format at another's rate: an fp8 model on a chip without fp8 MMA is a different kernel
    (weight-only, dequantised in SRAM) that the workload must ask for (`dtypes.activations:
    bf16`); weights narrower than the activations are such a kernel, activations are never
    dequantised."""
    from archsim.graph.ops import OpKind

    array = chip.core.array
    if op.kind is OpKind.GEMM:
        fmt = compute_dtype(op.dtype, op.b_dtype)
        if array.k_rate(op.dtype) == 0:  # activations in a format the MMA does not take
            fmt = op.dtype
    elif op.kind is OpKind.ATTENTION:
        fmt = op.dtype
    else:
        return None
    if array.k_rate(fmt) == 0:
        rates = ", ".join(name for name, _ in array.k_per_cycle)
        raise UnsupportedError(
            f"{what or op.name or op.kind.value}: {chip.name}'s matrix units have no {fmt.value} rate "
            f"(k_per_cycle has {rates}); choose dtypes it runs"
        )
    return fmt


def vector_cycles(core: Core, lane_ops, special_ops):
    """Cycles of the vector unit for that many lane and special-function operations."""
    lane = np.ceil(np.asarray(lane_ops, dtype=np.float64) / core.vector.issue_per_cycle)
    special = np.ceil(np.asarray(special_ops, dtype=np.float64) / core.vector.special_per_cycle)
    return (lane + special).astype(np.int64)


@memo(maxsize=None)
def step_cycles(
    core: Core,
    m: int,
    k: int,
    n: int,
    a_dtype: DType,
    b_dtype: DType | None = None,
    install_bytes_per_cycle: float = 0.0,
    chained: bool = False,
) -> int:
    """`matmul_cycles` of one GEMM tile step (scalar, memoised: the same steps recur in every item)."""
    return int(matmul_cycles(core, m, k, n, a_dtype, b_dtype, install_bytes_per_cycle, chained, transposable=True))


@memo(maxsize=None)
def vector_step_cycles(core: Core, lane_ops: float, special_ops: float) -> int:
    """`vector_cycles` of one streaming entry (scalar, memoised)."""
    return int(vector_cycles(core, lane_ops, special_ops))
