"""archsim: a cycle-approximate accelerator architecture simulator for LLM inference.

The pipeline (see README): YAML configs -> typed hardware and workload -> operator graph
-> compiled Program per op -> event-driven engine -> step and run results -> reports.

The Python API (`archsim.api`, documented in README and docs/api.md) is available from here:
`archsim.load_system`, `load_workload`, `with_params`, `run`, `op`, `explain`, `compare`, `scale`,
`serve`, `find_capacity`, `sweep`, `sweep_template`, `load_sweep`, the `plot_*` functions.
It is imported on first use, so `archsim --help` stays instant.
"""

__version__ = "0.1.0"

_API = (
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
)
__all__ = ["__version__", *_API]

# `archsim.sweep` names both the package of the sweep layer (archsim/sweep/) and the API's
# `sweep()`: the package is made callable, so `archsim.sweep(spec, out_dir)` runs a sweep and
# `archsim.sweep.driver` and the like stay importable as ever. Its __init__ is a docstring.
import types as _types  # noqa: E402

import archsim.sweep as _sweep_package  # noqa: E402


class _CallableSweepPackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        """archsim.api.sweep: run a sweep spec into a results folder."""
        from archsim.api import sweep

        return sweep(*args, **kwargs)


_sweep_package.__class__ = _CallableSweepPackage


def __getattr__(name: str):
    if name in _API:
        import archsim.api

        return getattr(archsim.api, name)
    raise AttributeError(f"module 'archsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
