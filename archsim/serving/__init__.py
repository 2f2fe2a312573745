"""Serving: a stream of requests (a trace or generated) on one or more instances of a chip or of
a layout of chips, as serving engines run it.

requests.py, request_fields.py and arrivals.py make the stream; kvpool.py sizes the paged KV cache
(by runner/memory.py's rule); scheduler.py (vllm, sarathi, trtllm, orca) and static.py decide each
step's batch over state.py's counters and blocks, prefix.py caches blocks by prefix (with a host
tier); the runner's step model (archsim/runner/steps.py) times each step's GPU work, host.py the
host's, speculative.py the draft's proposals and their verify; stepping.py and kernels.py play
the steps, engine.py runs one instance (instance.py: what it serves with and records);
setup.py holds how requests are served and builds each instance's pool and `Instance`,
admission.py refuses the requests that can never fit, simulate.py co-locates instances and
disaggregated.py splits prefill from decode, both returning result.py's records. options.py is
the user's options as one checked record (`ServeOptions`), build.py the setup made from them;
metrics.py, histogram.py and capacity.py judge the run, report.py and plots.py present it.
"""
