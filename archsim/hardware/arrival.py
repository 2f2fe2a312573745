"""The wait for the last rank inside a collective kernel launched on idle chips, in seconds.

Each rank's host process launches its own collective kernel. Where the chips are idle (a
collective timed on its own: a profiler's kernel time or the host's wall clock around one
collective), a rank's kernel starts when its host's launch reaches the chip, and the first step
of the collective cannot complete before every rank has arrived: the kernel a rank's profiler
times lasts from its own start to the end, so it holds the wait for the last rank to start.
Inside a model step the kernels are queued ahead of the chip, each collective starts when the
work before it ends, and the launch jitter is hidden (no wait is charged there).

A rank's launch delay is taken as exponentially distributed with mean `jitter_s` (independent
per rank), so the expected wait of one rank for the last of n, E[max of n] - E[its own], is

    wait = jitter x (H_n - 1),       H_n = 1 + 1/2 + ... + 1/n  (the n-th harmonic number)

(the maximum of n independent exponentials of mean θ has mean θ H_n: Rényi's representation of
exponential order statistics). Two ranks wait θ/2, four 13θ/12, eight about 1.72θ: the wait grows
as the logarithm of the rank count. The jitter is a property of the host's launch path (driver,
PCIe doorbell, the process's synchronize and return), the same on every NVIDIA system:
`interconnect.launch_jitter` in a system file.
"""

from __future__ import annotations


def harmonic(n: int) -> float:
    """H_n = sum_{k=1..n} 1/k (H_1 = 1)."""
    return sum(1.0 / k for k in range(1, n + 1))


def arrival_wait_s(ranks: int, jitter_s: float) -> float:
    """Expected wait of one rank for the last of `ranks` to start, each rank's launch delay
    exponential with mean `jitter_s`: jitter x (H_ranks - 1); 0 for one rank."""
    if ranks < 1 or jitter_s < 0:
        raise ValueError(f"ranks must be at least 1 and the jitter not negative (got {ranks}, {jitter_s})")
    return jitter_s * (harmonic(ranks) - 1.0)
