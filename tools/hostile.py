"""Hostile inputs on every surface of archsim, each run in a subprocess with a time and memory limit.

Where `tools/fuzz_configs.py` mutates the shipped hardware and workload files, this suite
covers everything else a user (or an attacker) can hand archsim: Hugging Face configs, request
traces (CSV, JSONL, Azure), sweep specs and results folders, validate case files, every flag,
output paths, signals, names with escape sequences or markup, and sizes at and past every
limit. The inputs are built by `tools/hostile_cases.py`.

Each case says what a correct archsim does with it: refuse it (exit 2 with a message naming
the input), run it (exit 0, with properties of the result checked), or either. A run is
judged into one verdict:

    ok         as expected
    hang       still running at its time limit (killed)
    memory     over its memory limit (MemoryError, or killed by the kernel)
    internal   exit 1 with "internal error" (a bad input must be exit 2)
    traceback  a Python traceback reached the user
    crash      killed by a signal, or an exit code archsim never uses
    unlocated  refused, but the message does not name what is wrong
    wrong      a silent wrong answer: ran where it must refuse, or a result that is not plausible
    data       an output or a file the user had was lost, clobbered or left half-written
    security   raw control characters reached the terminal, or a file's content was echoed

Children are forked from a warm parent (archsim imported, kernels loaded), so a case costs
what archsim does with it, not an interpreter start; `--exec` runs `python -m archsim` instead.

    python3 tools/hostile.py                      # the full suite (thousands of inputs)
    python3 tools/hostile.py --ci                 # the CI subset
    python3 tools/hostile.py --surface trace --show-all --workers 4
    python3 tools/hostile.py --only 'flags/serve-*' --verbose
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fnmatch
import io
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.modules.setdefault("hostile", sys.modules[__name__])  # run as a script, the cases import this module
for _pool in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # no native pools to fork
    os.environ.setdefault(_pool, "1")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MEMORY_BYTES = 1536 << 20  # address space a case may add to the warm parent's
EXEC_BASE_BYTES = 4 << 30  # address space of a fresh interpreter with numba loaded, with room
EXEC_STARTUP_S = 10.0  # a fresh interpreter imports archsim and loads its kernels first
POLL_S = 0.01
CONTROL = {c for c in range(32) if c not in (9, 10)} | {127}  # C0 controls (tab, newline allowed) and DEL
SELF_EXPLAINING = re.compile(r"does not fit on |fits a KV cache of|too large to simulate")
INVISIBLE = {*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)}  # C1, bidi overrides


class Expect(str, Enum):
    REFUSE = "refuse"  # exit 2, a message that names the input
    RUN = "run"  # exit 0
    EITHER = "either"  # exit 0 or a located refusal
    STOP = "stop"  # a signal: exit 130 (SIGINT) or 128 + signal


class Verdict(str, Enum):
    OK = "ok"
    HANG = "hang"
    MEMORY = "memory"
    INTERNAL = "internal"
    TRACEBACK = "traceback"
    CRASH = "crash"
    UNLOCATED = "unlocated"
    WRONG = "wrong"
    DATA = "data"
    SECURITY = "security"


@dataclass(frozen=True)
class Outcome:
    """What a child did: exit code (or the signal that killed it), output, time and memory."""

    rc: int | None
    killed_by: int | None
    timed_out: bool
    elapsed_s: float
    stdout: bytes
    stderr: bytes
    max_rss_bytes: int

    @property
    def text(self) -> str:
        return (self.stdout + b"\n" + self.stderr).decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")


Check = Callable[[Path, Outcome], str | None]  # None if the property holds, else what is wrong


@dataclass(frozen=True)
class Prop:
    """A property of a run: `check` returns None when it holds; a failure counts as `verdict`."""

    name: str
    check: Check
    verdict: Verdict = Verdict.WRONG


Setup = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    """One hostile input: the command line, the files it needs, and what archsim must do."""

    id: str  # surface/name
    argv: tuple[str, ...]  # archsim's arguments; '{dir}' stands for the case's folder
    expect: Expect = Expect.EITHER
    files: tuple[tuple[str, bytes | str], ...] = ()  # written into the folder before the run
    setup: Setup | None = None  # anything else the folder needs (FIFOs, sparse files, links)
    where: str | None = None  # what a refusal must name (a file, a key, a flag)
    props: tuple[Prop, ...] = ()  # checked after the run whatever the exit code
    secret: str | None = None  # text of a non-config file that must never be echoed
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    send: tuple[float, int] | None = None  # (after seconds, signal) sent to the run
    send_once: str | None = None  # the signal also waits for a file matching this glob (work done)
    known: str | None = None  # a problem the core owns, with its reason: reported as known
    failed_ok: bool = False  # exit 1 is a right answer (a sweep whose failed points are recorded)
    stdin: bytes = b""
    env: tuple[tuple[str, str], ...] = ()
    ci: bool = True  # part of the CI subset
    target: Callable[[list[str]], int] | None = None  # instead of archsim's main (harness self-test)

    @property
    def surface(self) -> str:
        return self.id.split("/", 1)[0]


@dataclass
class Result:
    case: Case
    outcome: Outcome
    verdicts: list[tuple[Verdict, str]] = field(default_factory=list)
    retried: bool = False  # hung when forked, so run again in a fresh interpreter

    @property
    def verdict(self) -> Verdict:
        return self.verdicts[0][0] if self.verdicts else Verdict.OK

    @property
    def why(self) -> str:
        return "; ".join(w for _, w in self.verdicts)

    @property
    def known(self) -> bool:
        return self.case.known is not None and self.verdict is not Verdict.OK


# ---------------------------------------------------------------------------------------- judging


def _expand(text: str, folder: Path) -> str:
    return text.replace("{dir}", str(folder))


def raw_controls(data: bytes) -> list[str]:
    """Control characters, C1 codes and bidi overrides in output: what a terminal would act on."""
    text = data.decode("utf-8", "replace")
    found = sorted({ord(c) for c in text if ord(c) in CONTROL or ord(c) in INVISIBLE})
    return [f"U+{c:04X}" for c in found]


def _located(case: Case, outcome: Outcome, folder: Path) -> str | None:
    """Why a refusal is not a located one-line answer, or None if it is."""
    err = outcome.err.strip()
    if not err:
        return "exit 2 with nothing on stderr"
    if SELF_EXPLAINING.search(err):  # an answer about the input as a whole: the model does not fit
        return None
    if case.where is not None:
        want = _expand(case.where, folder)
        if want not in outcome.text and want.replace(str(folder) + "/", "") not in outcome.text:
            return f"the message does not name {want!r}: {err.splitlines()[-1][:160]!r}"
    return None


def judge(case: Case, outcome: Outcome, folder: Path) -> list[tuple[Verdict, str]]:
    """Every way the run went wrong, worst first; empty if it did what the case expects."""
    out: list[tuple[Verdict, str]] = []
    last = outcome.err.strip().splitlines()[-1][:200] if outcome.err.strip() else ""
    if outcome.timed_out:
        return [(Verdict.HANG, f"still running after {case.timeout_s:g} s")]
    if "MemoryError" in outcome.text or "Unable to allocate" in outcome.text or "std::bad_alloc" in outcome.text:
        out.append((Verdict.MEMORY, last))
    elif outcome.killed_by in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS) and (
        case.send is None or case.send[1] != outcome.killed_by
    ):
        out.append(
            (
                Verdict.MEMORY if outcome.killed_by == signal.SIGKILL else Verdict.CRASH,
                f"killed by signal {outcome.killed_by}",
            )
        )
    if "Traceback (most recent call last)" in outcome.text:
        out.append((Verdict.TRACEBACK, last))
    if outcome.rc == 1 and "internal error" in outcome.err:
        out.append((Verdict.INTERNAL, last))
    controls = raw_controls(outcome.stdout + outcome.stderr)
    if controls:
        out.append((Verdict.SECURITY, f"raw control characters in the output: {', '.join(controls[:6])}"))
    if case.secret and case.secret in outcome.text:
        out.append((Verdict.SECURITY, f"echoed the content of a file that is not a config ({case.secret!r})"))
    if out:
        return out
    rc, sig = outcome.rc, outcome.killed_by
    if case.expect is Expect.STOP:
        want = 130 if case.send and case.send[1] == signal.SIGINT else 128 + (case.send[1] if case.send else 0)
        if rc not in (want, 0, 2):
            out.append((Verdict.CRASH, f"exit {rc} (signal {sig}) after a signal; expected {want}"))
    elif sig is not None:
        out.append((Verdict.CRASH, f"killed by signal {sig}"))
    elif rc not in (0, 1, 2, 130):
        out.append((Verdict.CRASH, f"exit code {rc}"))
    elif case.expect is Expect.REFUSE and rc == 0:
        out.append((Verdict.WRONG, "ran to exit 0 where the input must be refused"))
    elif case.expect is Expect.RUN and rc != 0:
        out.append((Verdict.WRONG, f"exit {rc} where the input must run: {last!r}"))
    elif rc == 2 and case.expect in (Expect.REFUSE, Expect.EITHER):
        why = _located(case, outcome, folder)
        if why:
            out.append((Verdict.UNLOCATED, why))
    elif rc == 1 and case.expect is not Expect.STOP and not case.failed_ok:
        out.append((Verdict.WRONG, f"exit 1 (a failed run) on input that must run or be refused: {last!r}"))
    for prop in case.props:
        try:
            problem = prop.check(folder, outcome)
        except Exception as err:  # a property that cannot even be checked has failed
            problem = f"{type(err).__name__}: {err}"
        if problem:
            out.append((prop.verdict, f"{prop.name}: {problem}"))
    return out


# ------------------------------------------------------------------------------------------ running


def _prepare(case: Case, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in case.files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    if case.setup is not None:
        case.setup(folder)


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _child(case: Case, folder: Path, out_path: Path, err_path: Path, stdin_path: Path) -> None:
    """In the forked child: redirect, limit, run archsim's main, exit with its code."""
    code = 1
    try:
        import faulthandler

        faulthandler.disable()  # a host's handler (pytest's) would write a crash to the host's stderr
        os.setsid()  # its own process group: the timeout kills workers it started too
        for fd, path, flags in ((0, stdin_path, os.O_RDONLY), (1, out_path, os.O_WRONLY), (2, err_path, os.O_WRONLY)):
            os.dup2(os.open(path, flags), fd)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
        os.chdir(folder)
        os.umask(0o022)
        os.environ.update(dict(case.env))
        os.environ.setdefault("COLUMNS", "160")
        limit = _address_space() + case.memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if os.environ.get("ARCHSIM_HOSTILE_DUMP"):  # where a hanging case is, just before its limit
            faulthandler.dump_traceback_later(max(1.0, case.timeout_s - 2), file=sys.stderr)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        main = case.target or _archsim_main()
        argv = [_expand(a, folder) for a in case.argv]
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def _archsim_main():
    from archsim.cli import main

    return main


@dataclass
class _Running:
    case: Case
    pid: int
    start: float
    folder: Path
    out_path: Path
    err_path: Path
    signalled: bool = False
    timed_out: bool = False


def _start_fork(case: Case, folder: Path) -> _Running:
    out_path, err_path, stdin_path = folder.parent / "stdout", folder.parent / "stderr", folder.parent / "stdin"
    out_path.write_bytes(b"")
    err_path.write_bytes(b"")
    stdin_path.write_bytes(case.stdin)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(case, folder, out_path, err_path, stdin_path)
    return _Running(case, pid, time.monotonic(), folder, out_path, err_path)


def _start_exec(case: Case, folder: Path) -> _Running:
    """The case as `python -m archsim` in a process of its own; forked where exec cannot run it:
    a case with a `target` of its own (a file-size limit set in the child before archsim's
    main), or more argument bytes than exec takes."""
    import subprocess

    if case.target is not None:
        return _start_fork(case, folder)

    out_path, err_path, stdin_path = folder.parent / "stdout", folder.parent / "stderr", folder.parent / "stdin"
    stdin_path.write_bytes(case.stdin)
    env = {**os.environ, "COLUMNS": "160", "PYTHONPATH": str(ROOT), **dict(case.env)}
    limit = EXEC_BASE_BYTES + case.memory_bytes

    def limits() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    argv = [sys.executable, "-m", "archsim", *(_expand(a, folder) for a in case.argv)]
    with open(stdin_path, "rb") as i, open(out_path, "wb") as o, open(err_path, "wb") as e:
        try:
            proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=i, stdout=o, stderr=e, preexec_fn=limits)
        except OSError as err:
            if err.errno != errno.E2BIG:
                raise
            return _start_fork(case, folder)
    proc.returncode = 0  # reaped by os.wait4 in run_cases, not by Popen
    return _Running(case, proc.pid, time.monotonic(), folder, out_path, err_path)


def warm_up() -> None:
    """Import archsim and load its kernels once in the parent, so forked children start warm
    (with the op cache off, so that the kernels do run: Numba loads on the first kernel call)."""
    from archsim import opcache
    from archsim.cli import main

    was = opcache.enabled()
    opcache.set_enabled(False)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for argv in (
                ["op", "gemm", "--M", "64", "--K", "64", "--N", "64"],
                ["op", "attention", "--kv-len", "64"],
                ["run", "--prompt", "16", "--generate", "2", "--quiet"],
                ["serve", "--requests", "3", "--quiet"],
            ):
                main(argv)
    finally:
        opcache.set_enabled(was)
    # pyarrow is left to the children: its thread pools in the parent would be forked half-held


def run_cases(
    cases: Iterable[Case], workers: int = 2, mode: str = "fork", on_result: Callable[[Result], None] | None = None
) -> list[Result]:
    """Run every case, `workers` at a time; each is judged as it finishes. A forked case that
    hangs is run once more in a fresh interpreter (a child forked from a process with native
    threads can, rarely, inherit a lock one of them held): only a second hang is a hang."""
    results = _run(cases, workers, mode, on_result)
    hung = [r for r in results if r.verdict is Verdict.HANG and r.case.target is None and mode == "fork"]
    if hung:
        again = {r.case.id: r for r in _run([_exec_retry(r.case) for r in hung], workers, "exec", on_result)}
        for r in again.values():
            r.retried = True
        results = [again.get(r.case.id, r) if r in hung else r for r in results]
    return results


def _ready(r: _Running) -> bool:
    """Whether the run has done what its signal waits for (`Case.send_once`)."""
    return r.case.send_once is None or next(r.folder.glob(r.case.send_once), None) is not None


def _exec_retry(case: Case) -> Case:
    from dataclasses import replace

    return replace(
        case,
        timeout_s=case.timeout_s + EXEC_STARTUP_S,
        send=case.send and (case.send[0] + EXEC_STARTUP_S, case.send[1]),
    )


def _run(
    cases: Iterable[Case], workers: int, mode: str, on_result: Callable[[Result], None] | None = None
) -> list[Result]:
    pending = list(cases)
    results: list[Result] = []
    running: dict[int, _Running] = {}
    start = _start_fork if mode == "fork" else _start_exec
    root = Path(tempfile.mkdtemp(prefix="archsim-hostile-"))
    try:
        n = 0
        while pending or running:
            while pending and len(running) < workers:
                case = pending.pop(0)
                n += 1
                folder = root / f"{n:05d}" / "work"
                _prepare(case, folder)
                r = start(case, folder)
                running[r.pid] = r
            now = time.monotonic()
            for r in list(running.values()):
                if r.case.send and not r.signalled and now - r.start >= r.case.send[0] and _ready(r):
                    r.signalled = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(r.pid, r.case.send[1])
                if now - r.start > r.case.timeout_s and not r.timed_out:
                    r.timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(r.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(-1, os.WNOHANG) if running else (0, 0, None)
            if pid == 0 or pid not in running:
                time.sleep(POLL_S)
                continue
            r = running.pop(pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # what it left running (pool workers)
            outcome = Outcome(
                rc=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                killed_by=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                timed_out=r.timed_out,
                elapsed_s=time.monotonic() - r.start,
                stdout=r.out_path.read_bytes(),
                stderr=r.err_path.read_bytes(),
                max_rss_bytes=usage.ru_maxrss * 1024,
            )
            result = Result(r.case, outcome, judge(r.case, outcome, r.folder))
            results.append(result)
            if on_result:
                on_result(result)
            shutil.rmtree(r.folder.parent, ignore_errors=True)
    finally:
        for r in running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
    return results


# ------------------------------------------------------------------------------------------ report


def summary(results: list[Result]) -> dict:
    """Counts by verdict (known problems apart) and by surface."""
    bad = [r for r in results if r.verdict is not Verdict.OK and not r.known]
    known = [r for r in results if r.known]
    return {
        "inputs": len(results),
        "ok": sum(r.verdict is Verdict.OK for r in results),
        "retried": sorted(r.case.id for r in results if r.retried),
        "problems": dict(Counter(r.verdict.value for r in bad)),
        "known": dict(Counter(r.verdict.value for r in known)),
        "by_surface": {
            s: {"inputs": n, "problems": sum(1 for r in bad if r.case.surface == s)}
            for s, n in sorted(Counter(r.case.surface for r in results).items())
        },
        "failures": [{"id": r.case.id, "verdict": r.verdict.value, "why": r.why} for r in bad],
        "known_failures": [
            {"id": r.case.id, "verdict": r.verdict.value, "why": r.why, "reason": r.case.known} for r in known
        ],
    }


def print_report(results: list[Result], elapsed_s: float, show_all: bool = False) -> None:
    s = summary(results)
    print(f"\n{s['inputs']} inputs in {elapsed_s:.0f} s: {s['ok']} ok")
    order = [v.value for v in Verdict if v is not Verdict.OK]
    print("problems: " + (", ".join(f"{s['problems'].get(v, 0)} {v}" for v in order)))
    if s["retried"]:
        print(f"hung when forked, run again in a fresh interpreter: {', '.join(s['retried'])}")
    if s["known"]:
        print("known (owned by the core, expected to fail): " + ", ".join(f"{n} {v}" for v, n in s["known"].items()))
    print(
        "by surface: "
        + ", ".join(
            f"{k} {v['inputs']}" + (f" ({v['problems']} bad)" if v["problems"] else "")
            for k, v in s["by_surface"].items()
        )
    )
    for f in s["failures"]:
        print(f"  {f['verdict']:9} {f['id']}: {f['why'][:300]}")
    if show_all:
        for f in s["known_failures"]:
            print(f"  known     {f['id']}: {f['verdict']}: {f['why'][:200]} [{f['reason']}]")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ci", action="store_true", help="the CI subset only")
    p.add_argument("--surface", action="append", help="only cases of this surface (repeatable)")
    p.add_argument("--only", metavar="GLOB", help="only cases whose id matches")
    p.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    p.add_argument("--exec", action="store_true", help="run `python -m archsim` per case instead of forking")
    p.add_argument("--seed", type=int, default=0, help="seed of the random variants")
    p.add_argument("--json", metavar="PATH", help="write the summary and every failure as JSON")
    p.add_argument("--show-all", action="store_true", help="list known problems too")
    p.add_argument("--verbose", action="store_true", help="print each case's verdict as it finishes")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    args = p.parse_args(argv)

    import hostile_cases

    cases = hostile_cases.all_cases(full=not args.ci, seed=args.seed)
    if args.surface:
        cases = [c for c in cases if c.surface in args.surface]
    if args.only:
        cases = [c for c in cases if fnmatch.fnmatch(c.id, args.only)]
    if args.list:
        for c in cases:
            print(c.id, c.expect.value, " ".join(c.argv))
        print(f"{len(cases)} cases")
        return 0
    if not args.exec:
        warm_up()
    start = time.monotonic()
    done = [0]

    def progress(r: Result) -> None:
        done[0] += 1
        if args.verbose:
            mark = r.verdict.value + (" (known)" if r.known else "")
            print(f"[{done[0]}/{len(cases)}] {mark:16} {r.outcome.elapsed_s:6.2f} s  {r.case.id}  {r.why[:150]}")
        elif done[0] % 100 == 0:
            print(f"{done[0]} of {len(cases)}", file=sys.stderr)

    results = run_cases(cases, args.workers, "exec" if args.exec else "fork", progress)
    print_report(results, time.monotonic() - start, args.show_all)
    if args.json:
        Path(args.json).write_text(json.dumps(summary(results), indent=1) + "\n")
    bad = [r for r in results if r.verdict is not Verdict.OK and not r.known]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
