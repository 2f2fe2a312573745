"""Design-space sweeps: many (chip, workload, scenario) points, each keyed by the hash of its
resolved configuration, evaluated in chunks on a process pool or a Dask cluster and written as
Parquet parts so that a sweep resumes where it stopped; Pareto fronts over the results.

schema.py and spec.py read a spec; sampling.py picks the points (grid, random, Halton);
expr.py evaluates derived values, constraints and objectives; design.py and points.py resolve
each point through the normal config schemas; metrics.py names what expressions can read;
evaluate.py runs a point; executors.py, store.py and driver.py run a sweep; pareto.py and
plot.py find and draw the front. Neither layer reaches into the engine: points call the runner.
`shipped_spec` is here, so that the command line finds a spec without importing the API.
"""

from __future__ import annotations

from pathlib import Path


def shipped_spec(name_or_path: str) -> str:
    """A sweep spec as given if it is a file, else a shipped spec of that name (`h200_variants`)."""
    from archsim.config.loader import shipped_dir

    if Path(name_or_path).exists() or "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return name_or_path
    shipped = shipped_dir("hw_configs") / "sweeps" / f"{name_or_path}.yaml"
    return str(shipped) if shipped.is_file() else name_or_path
