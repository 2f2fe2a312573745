"""What a sweep's worker processes load before their first point, loaded once for all of them.

A local pool's workers are forked from a server process (executors.py) that imports this module
first: importing it runs `warm()` there, so every worker starts with the modules a point uses,
Numba loaded without scipy's BLAS (archsim/jit.py: no kernel calls it; importing it costs
0.4-0.5 s) and the compiled kernels read from Numba's disk cache, as a process of archsim's own
does. Each worker otherwise loads them itself before its first point (0.9-1.0 s of CPU). The
warm-up times one small GEMM on the shipped H200 with the op cache off (nothing is written), and
is only a warm-up: where it fails, each worker loads what it needs itself, as before.
"""

from __future__ import annotations

import contextlib

WARM_GEMM = (256, 512, 512)  # M, K, N: large enough for the compiled kernels, quick to play


def warm() -> None:
    """Load the runner, Numba and the compiled kernels into this process."""
    from archsim import jit, opcache
    from archsim.choose import time_op
    from archsim.config.loader import load_system
    from archsim.graph.ops import Op, OpKind
    from archsim.runner.energy import run_energy  # noqa: F401  (what evaluate_point imports)
    from archsim.sweep.metrics import design_facts, run_metrics  # noqa: F401

    jit.for_command_line()
    jit.load()
    enabled = opcache.enabled()
    opcache.set_enabled(False)
    try:
        m, k, n = WARM_GEMM
        time_op(Op(OpKind.GEMM, m=m, k=k, n=n), load_system("h200")[0].chip)
    finally:
        opcache.set_enabled(enabled)


with contextlib.suppress(Exception):  # a warm-up only: each worker then loads what it needs itself
    warm()
