"""The Python API: load and change inputs (validated like files), simulate, read the results.

    import archsim
    hw = archsim.with_params(archsim.load_system("h200"), {"hbm.data_rate": "8 Gbps"})
    run = archsim.run(hw, archsim.load_workload("llama3_8b", scenario={"batch": 8}))
    run.tpot_s, run.to_dict(), run.to_pandas()

inputs.py: `Hardware`, `Workload`, `load_system`, `load_workload`, `with_params`; calls.py:
`run`, `serve` (its options: `ServeOptions`, archsim/serving/options.py), `sweep`, `load_sweep`,
`load_requests`, `generate_requests`; ops.py: `op`; more.py: `compare`, `scale`,
`find_capacity`, `explain`; plots.py: the `plot_*` functions; results.py: the
typed results (`RunReport`, `ServeReport`, `SweepResults`). The command line is a layer over
these. Bad input raises `archsim.ConfigError` (every problem located as `file:line: key: why`,
an argument as `archsim.run: tp: why`); every other refusal is a subclass of it, exported here:
a run that does not fit in memory raises `DoesNotFitError`, a layout the model or the system
cannot take `ParallelismError`, and so on (`REFUSALS`).
"""

import importlib

from archsim.api.calls import generate_requests, load_requests, load_sweep, run, serve, sweep, sweep_template
from archsim.api.inputs import Hardware, Workload, load_system, load_workload, with_params
from archsim.api.more import compare, explain, find_capacity, scale
from archsim.api.ops import op
from archsim.api.plots import plot_breakdown, plot_compare, plot_decode_kv, plot_memory, plot_roofline
from archsim.api.results import RunReport, ServeReport, SweepResults
from archsim.cache_folders import CacheFolderError
from archsim.errors import (
    ConfigError,
    DoesNotFitError,
    OutputError,
    RefusedError,
    TooLargeError,
    UnsupportedError,
)
from archsim.serving.options import (
    DisaggregationOptions,
    KvPoolOptions,
    LayoutOptions,
    SchedulerOptions,
    ServeOptions,
    SloOptions,
    SpeculativeOptions,
)

# The refusals defined beside what refuses: imported when first asked for, as their modules
# are heavy (`archsim.ParallelismError`, `except archsim.api.StoreError`).
_LAZY = {
    "ExecutorUnavailable": "archsim.sweep.executors",
    "ParallelismError": "archsim.graph.parallel",
    "ParetoError": "archsim.sweep.pareto",
    "ServeSetupError": "archsim.serving.setup",
    "StoreError": "archsim.sweep.store",
}
REFUSALS = (
    "CacheFolderError",
    "ConfigError",
    "DoesNotFitError",
    "ExecutorUnavailable",
    "OutputError",
    "ParallelismError",
    "ParetoError",
    "RefusedError",
    "ServeSetupError",
    "StoreError",
    "TooLargeError",
    "UnsupportedError",
)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'archsim.api' has no attribute {name!r}")


__all__ = [
    "CacheFolderError",
    "ConfigError",
    "DisaggregationOptions",
    "DoesNotFitError",
    "ExecutorUnavailable",
    "Hardware",
    "KvPoolOptions",
    "LayoutOptions",
    "OutputError",
    "ParallelismError",
    "ParetoError",
    "RefusedError",
    "RunReport",
    "SchedulerOptions",
    "ServeOptions",
    "ServeReport",
    "ServeSetupError",
    "SloOptions",
    "SpeculativeOptions",
    "StoreError",
    "SweepResults",
    "TooLargeError",
    "UnsupportedError",
    "Workload",
    "compare",
    "explain",
    "find_capacity",
    "generate_requests",
    "load_requests",
    "load_sweep",
    "load_system",
    "load_workload",
    "op",
    "plot_breakdown",
    "plot_compare",
    "plot_decode_kv",
    "plot_memory",
    "plot_roofline",
    "run",
    "scale",
    "serve",
    "sweep",
    "sweep_template",
    "with_params",
]
