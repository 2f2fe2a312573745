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
these. Bad input raises `archsim.ConfigError` (every problem located as `file:line: key: why`);
a run that does not fit in memory raises `archsim.DoesNotFitError`.
"""

from archsim.api.calls import generate_requests, load_requests, load_sweep, run, serve, sweep
from archsim.api.inputs import Hardware, Workload, load_system, load_workload, with_params
from archsim.api.more import compare, explain, find_capacity, scale
from archsim.api.ops import op
from archsim.api.plots import plot_breakdown, plot_compare, plot_decode_kv, plot_memory, plot_roofline
from archsim.api.results import RunReport, ServeReport, SweepResults
from archsim.errors import ConfigError, DoesNotFitError
from archsim.serving.options import (
    DisaggregationOptions,
    KvPoolOptions,
    LayoutOptions,
    SchedulerOptions,
    ServeOptions,
    SloOptions,
    SpeculativeOptions,
)

__all__ = [
    "ConfigError",
    "DisaggregationOptions",
    "DoesNotFitError",
    "Hardware",
    "KvPoolOptions",
    "LayoutOptions",
    "RunReport",
    "SchedulerOptions",
    "ServeOptions",
    "ServeReport",
    "SloOptions",
    "SpeculativeOptions",
    "SweepResults",
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
    "with_params",
]
