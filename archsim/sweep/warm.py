"""What a sweep's worker processes load before their first point, loaded once for all of them.

A local pool's workers are forked from a server process (executors.py) that imports this
module first: every worker then starts with the modules a point uses, and loads the kernels
compiled ahead of time (archsim/aot.py, a few milliseconds) when its first point needs a kernel,
or where there are none Numba, without scipy's BLAS (archsim/jit.py: no kernel calls it, and
importing it cost each worker 0.45 s), as a process of archsim's own does. The kernels are left
to the workers: a sweep whose ops are all in the op cache never needs them, and Numba loaded
here (0.4-0.7 s) would hold back every worker's start. A sweep starts the server before it
loads its spec (executors.py `start_pool_server`), so these imports run beside its own. A
worker gets its points' designs built: neither the config schemas nor pydantic are imported
here (0.2 s), nor anywhere a point is evaluated.
"""

from __future__ import annotations

import numpy.ma  # noqa: F401  (what np.unique imports at its first call: 8 ms)

import archsim.report.energy  # what run_metrics imports (rich's tables among them)
import archsim.report.export  # noqa: F401
from archsim import jit
from archsim.runner import energy, generation  # noqa: F401  (what evaluate_point imports)
from archsim.sweep import evaluate, metrics  # noqa: F401

jit.for_command_line()
