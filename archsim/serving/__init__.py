"""Serving: a stream of requests (a trace or generated) on one or more instances of a chip.

requests.py and arrivals.py make the stream, kvpool.py sizes the paged KV cache, scheduler.py
(vllm, sarathi, orca) and static.py decide each step's batch, the runner's step model
(archsim/runner/steps.py) times each step, engine.py runs one instance, simulate.py co-locates or
disaggregates instances, metrics.py and capacity.py judge the run, report.py and plots.py
present it.
"""
