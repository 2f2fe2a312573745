"""How large an input archsim takes: the bounds every reader, schema and flag applies before any
work starts (the check of an op's size against MAX_PROGRAM_ENTRIES, which lays out its tiles, is
the runner's: archsim/runner/size.py).

Every bound is physical or practical, never a tuning knob: no model has more than MAX_LAYERS
layers or a context longer than MAX_TOKENS, no serving trace of interest has more than
MAX_REQUESTS requests, and a program of more than MAX_PROGRAM_ENTRIES entries (about 4 GB and
a minute to simulate) is the wrong input for a cycle-approximate simulator. README's "Bad input"
section lists them.
"""

from __future__ import annotations

import math

MAX_COUNT = 2**31 - 1  # a count (in a file, a flag or an option) times another still fits int64 arithmetic

# sizes of files read whole
MAX_JSON_BYTES = 64 << 20  # a config.json or a case file (the shipped ones are a few kB)
MAX_TRACE_BYTES = 2 << 30  # a request trace (ten million requests are about 300 MB of CSV)
MAX_JSON_DEPTH = 64  # nesting of a JSON document (a config nests three deep)

# models and scenarios (workload files, Hugging Face configs, sweep points)
MAX_LAYERS = 4096  # the largest models have about 130
MAX_WIDTH = 1 << 24  # hidden, FFN, head and vocabulary sizes (the largest vocabularies are ~256k)
MAX_HEADS = 1 << 16
MAX_EXPERTS = 1 << 16
MAX_BATCH = 1 << 20  # sequences in one batch
MAX_TOKENS = 1 << 24  # tokens of one sequence, prompt and output together (16,777,216)

# serving
MAX_REQUESTS = 10_000_000  # about 80 s and 3 GB to simulate
MAX_INSTANCES = 1024  # replicas of one serving setup
MAX_STEP_RESOLUTION = 64  # step shapes simulated per doubling of the step's tokens
RATE_RANGE_PER_S = (1e-6, 1e6)  # mean arrivals per second
CV_RANGE = (1e-3, 1e3)  # coefficient of variation of gamma inter-arrival gaps
TIME_SCALE_RANGE = (1e-6, 1e6)
MAX_SLO_S = 86_400.0  # a latency objective of more than a day is a unit mistake
MAX_SEED = 2**63 - 1
MAX_ARRIVAL_S = 1e9  # 31 years of arrivals

# sweeps
MAX_SWEEP_POINTS = 1_000_000  # resolved lazily, but each is simulated: days of CPU time
MAX_EXPR_CHARS = 4096  # an expression of a sweep spec
MAX_EXPR_DEPTH = 100  # nesting of an expression
MAX_EXPR_INT_BITS = 4096  # bits of a whole number inside an expression (far past any float)

# one op's program: the entries (tile steps) the compiler would produce
MAX_PROGRAM_ENTRIES = 1 << 25  # 33,554,432: a 128k-token prefill attention of Llama-3-8B is 16.8M


def within(value: float, low: float, high: float) -> bool:
    """`low <= value <= high` for a finite value."""
    return math.isfinite(value) and low <= value <= high
