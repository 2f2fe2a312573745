"""Where chunks of points are evaluated: in this process, in a local process pool, or on a Dask
cluster (`dask.distributed`, optional). Every executor yields each chunk's rows as it finishes,
in completion order, keeping a bounded number of chunks in flight (two per worker) so that a
sweep of millions of points does not queue them all at once. A chunk whose worker died comes
back with an error and no rows: it is not written, and a rerun evaluates it again.

Results always come back to this process, which alone writes the results folder: workers
need no shared file system, only archsim installed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archsim.errors import ConfigError

if TYPE_CHECKING:  # imported where chunks run: this module is imported before a sweep's pool starts
    from archsim.sweep.evaluate import Evaluation
    from archsim.sweep.points import PointTask

IN_FLIGHT_PER_WORKER = 2
ORPHAN_POLL_S = 1.0  # how often a pool worker checks that the sweep that started it is alive
CONNECT_TIMEOUT_S = 20  # waiting for a Dask scheduler before giving up
PROBE_TIMEOUT_S = 5.0  # a first TCP connection to the scheduler's port, before Dask's own retries
DASK_SCHEMES = ("tcp", "tls", "ws", "wss")


def check_dask_address(address: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a scheduler address `scheme://host:port`; ExecutorUnavailable
    with what is wrong if it is not one, if the host has no address, or if nothing listens on
    the port (found in seconds, not after Dask's connection retries)."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(address if "://" in address else "")
        scheme, host, port = parts.scheme, parts.hostname, parts.port
    except ValueError as err:
        raise ExecutorUnavailable(f"--dask: {address!r:.80} is not scheme://host:port ({err})") from None
    if scheme not in DASK_SCHEMES or not host or port is None:
        raise ExecutorUnavailable(
            f"--dask: {address!r:.80} is not scheme://host:port with a scheme of {', '.join(DASK_SCHEMES)} "
            "(e.g. tcp://scheduler:8786)"
        )
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        raise ExecutorUnavailable(f"--dask: cannot resolve the host {host!r:.80} ({err})") from None
    last: OSError | None = None
    for family, kind, proto, _name, where in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(PROBE_TIMEOUT_S)
                s.connect(where)
            return scheme, host, port
        except OSError as err:
            last = err
    raise ExecutorUnavailable(f"--dask: nothing answers at {host}:{port} ({last})")


@dataclass(frozen=True)
class ChunkOutcome:
    tasks: list[PointTask]
    rows: list[dict] | None  # None: the chunk was lost (its worker died); `error` says why
    error: str | None = None
    cpu_s: float = 0.0  # CPU time the worker spent on the chunk


class ExecutorUnavailable(ConfigError):
    """The executor asked for cannot start (dask not installed, no scheduler at the address)."""


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def executor_for(workers: int | None = None, dask: str | None = None, dask_local: int | None = None):
    """Where a sweep's points run: this process (workers=1), a local pool (the CPUs available by
    default), or Dask (a scheduler address, or a local cluster of `dask_local` workers)."""
    if dask:
        return DaskExecutor(address=dask)
    if dask_local:
        return DaskExecutor(local_workers=dask_local)
    workers = workers or default_workers()
    return SerialExecutor() if workers == 1 else PoolExecutor(workers)


class SerialExecutor:
    """Evaluate in this process (`--workers 1`): no start-up cost, easiest to debug."""

    workers = 1
    label = "in process"

    def run(self, chunks: Iterable[list[PointTask]], ev: Evaluation) -> Iterator[ChunkOutcome]:
        from archsim.sweep.evaluate import evaluate_chunk

        for chunk in chunks:
            yield ChunkOutcome(chunk, *_rows_and_cpu(evaluate_chunk(chunk, ev)))


def _rows_and_cpu(result: tuple[list[dict], float]) -> tuple[list[dict], None, float]:
    rows, cpu_s = result
    return rows, None, cpu_s


def _worker_init(sweep_pid: int) -> None:
    """Pool workers leave Ctrl-C to the sweep, and exit when the sweep is gone (even by kill -9)."""
    import signal
    import threading
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(ORPHAN_POLL_S)
            try:
                os.kill(sweep_pid, 0)
            except ProcessLookupError:
                os._exit(0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True, name="orphan-watch").start()


def _bounded(submit, collect, chunks: Iterable[list[PointTask]], limit: int) -> Iterator[ChunkOutcome]:
    """Keep up to `limit` chunks submitted; yield each as `collect` returns it."""
    it = iter(chunks)
    pending: dict = {}
    exhausted = False
    while True:
        while not exhausted and len(pending) < limit:
            chunk = next(it, None)
            if chunk is None:
                exhausted = True
            else:
                pending[submit(chunk)] = chunk
        if not pending:
            return
        for future, outcome in collect(pending):
            pending.pop(future)
            yield outcome


WORKER_PRELOAD = ["archsim.sweep.evaluate", "archsim.sweep.warm"]  # what the pool's server imports


def start_pool_server():
    """The start method of a local pool's workers, its server process started now where it has
    one (forkserver): the workers fork from it once it has imported what a point uses (warm.py,
    0.3 s of CPU), so a sweep that starts it before loading its spec and resolving its first points
    has it ready when the first chunk is, its imports run beside this process's. Called again, it
    finds the server running."""
    import multiprocessing as mp

    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(WORKER_PRELOAD)
        forkserver.ensure_running()
    return ctx


class PoolExecutor:
    """A local pool of `workers` processes (forkserver where available: workers start from a
    process that has already imported what a point uses, warm.py)."""

    label = "process pool"

    def __init__(self, workers: int):
        self.workers = workers

    def run(self, chunks: Iterable[list[PointTask]], ev: Evaluation) -> Iterator[ChunkOutcome]:
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        from archsim.sweep.evaluate import evaluate_chunk

        ctx = start_pool_server()
        pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),))
        broken: list[str] = []

        def submit(chunk):
            return pool.submit(evaluate_chunk, chunk, ev)

        def collect(pending):
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for f in done:
                try:
                    yield f, ChunkOutcome(pending[f], *_rows_and_cpu(f.result()))
                except BrokenProcessPool:
                    broken.append("a worker process died (killed, or out of memory)")
                    yield f, ChunkOutcome(pending[f], None, broken[0])
                except Exception as err:
                    yield f, ChunkOutcome(pending[f], None, f"{type(err).__name__}: {err}")

        try:
            for outcome in _bounded(submit, collect, chunks, self.workers * IN_FLIGHT_PER_WORKER):
                yield outcome
                if broken:
                    return
        finally:
            _stop(pool)


def _stop(pool) -> None:
    """Shut the pool down now: queued chunks cancelled, running workers terminated. A worker
    already gone (a signal sent to the whole process group stops the workers too, and the pool's
    own thread may have reaped them) is stopped: asking after it is no error."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            if p.is_alive():
                p.terminate()
    for p in processes:
        with contextlib.suppress(ChildProcessError):
            p.join(timeout=5)


# How a local Dask cluster starts its workers (docs/sweeps.md starts remote ones the same way):
# - without Dask's statistical profiler: it samples the running task's stack every 10 ms, 3 ms of
#   CPU a point of h200_halton_1000 (52 against 49 ms);
# - with glibc's malloc as every other process has it: the nanny sets MALLOC_TRIM_THRESHOLD_=65536
#   before it starts a worker, so that memory freed goes back to the system at once, and that turns
#   off glibc's adaptive mmap threshold too: a point's arrays are then mapped and unmapped and their
#   pages faulted in again, 3 ms of a point's 41 in one process (a value of None unsets it);
# - with its event loop's checks every 1 s, not 20 ms (the tick that warns of a blocked loop), and
#   5 s, not 0.5 s (the system monitor, which feeds the dashboard: a local cluster has none): each
#   wakes the loop's thread, which takes the interpreter from the point being evaluated, about 1 ms
#   of CPU a point.
LOCAL_DASK_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


class DaskExecutor:
    """Chunks as tasks on a Dask cluster: an existing scheduler (`address`) or a local cluster
    of `local_workers` single-threaded worker processes started for this sweep."""

    def __init__(self, address: str | None = None, local_workers: int | None = None):
        self.address, self.local_workers = address, local_workers
        self.workers = local_workers or 0
        self.label = f"dask {address}" if address else "dask local cluster"  # the command adds its workers

    def run(self, chunks: Iterable[list[PointTask]], ev: Evaluation) -> Iterator[ChunkOutcome]:
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise ExecutorUnavailable(
                "--dask needs dask.distributed: python3 -m pip install 'dask[distributed]'"
            ) from None
        import logging

        cluster = None
        try:
            if self.address:
                check_dask_address(self.address)
                client = Client(self.address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
            else:
                import dask

                with dask.config.set(LOCAL_DASK_WORKERS):
                    cluster = LocalCluster(
                        n_workers=self.local_workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.ERROR,
                    )
                client = Client(cluster, set_as_default=False)
        except ExecutorUnavailable:
            raise
        except Exception as err:  # dask reports a bad address or a refused handshake in many types
            raise ExecutorUnavailable(
                f"cannot reach the Dask scheduler at {self.address}: {type(err).__name__}: {str(err)[:120]}"
            ) from None
        from archsim.sweep.evaluate import evaluate_chunk

        try:
            self.workers = max(1, sum(client.nthreads().values()))
            finished = as_completed(loop=client.loop, raise_errors=False)

            def submit(chunk):
                future = client.submit(evaluate_chunk, chunk, ev, pure=False)
                finished.add(future)
                return future

            def collect(pending):
                future = next(finished)
                if future.status == "finished":
                    yield future, ChunkOutcome(pending[future], *_rows_and_cpu(future.result()))
                else:
                    err = future.exception()
                    yield future, ChunkOutcome(pending[future], None, f"{type(err).__name__}: {err}")

            yield from _bounded(submit, collect, chunks, self.workers * IN_FLIGHT_PER_WORKER)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
