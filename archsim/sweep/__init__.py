"""Design-space sweeps: many (chip, workload, scenario) points, each keyed by the hash of its
resolved configuration, evaluated in chunks on a process pool or a Dask cluster and written as
Parquet parts so that a sweep resumes where it stopped; Pareto fronts over the results.

schema.py and spec.py read a spec; sampling.py picks the points (grid, random, Halton);
expr.py evaluates derived values, constraints and objectives; design.py and points.py resolve
each point through the normal config schemas; metrics.py names what expressions can read;
evaluate.py runs a point; executors.py, store.py and driver.py run a sweep; pareto.py and
plot.py find and draw the front. Neither layer reaches into the engine: points call the runner.
"""
