"""Fit a chip's physical parameters to its calibration cases (coordinate descent).

Only physical parameters of the chip move (each marked [CAL] in its file): HBM latency unloaded
and under queueing, the refresh and turnaround time that set streaming efficiency, the bytes and
requests a core keeps in flight, L2 latency and bandwidth, the fixed costs per kernel, and the
energy of a multiply-accumulate (which sets the clock the power limit holds). A multi-chip
system's collective library costs are fitted on its all-reduce cases. No per-shape number exists
to fit. The objective is the mean over case kinds of the mean absolute error (every kind counts
the same), plus a tenth of the mean over kinds of the worst error beyond one step of the case
file's timer resolution (`meta.resolution`; none: the worst error).

    python3 tools/calibrate.py --chip h200              # archsim/data/h200_calibration.json
    python3 tools/calibrate.py --chip a100_pcie         # archsim/data/a100_calibration.json
    python3 tools/calibrate.py --chip a100x8            # its all-reduce cases
    python3 tools/calibrate.py --chip h200 --cases my_cases.json   # a case file of your own
    python3 tools/calibrate.py --transfer          # leave one chip out, both ways (tools/transfer.py)

A100 cases whose index is 2 mod 4 are held out: never fitted, reported apart. The fitted values
are printed to be put in the chip file (with the [CAL] tag).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from archsim.config.loader import load_system
from archsim.hardware import System
from archsim.memo import clear_all
from archsim.runner.validation import CaseFile, summarise, validate_cases

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "archsim" / "data"
HELD_OUT_MOD = (4, 2)  # A100 cases with index % 4 == 2 are never fitted


@dataclass(frozen=True)
class Param:
    """A physical parameter by its dotted path in the System, its search range and rounding."""

    path: str
    lo: float
    hi: float
    integer: bool = False

    def get(self, s: System) -> float:
        if self.path == "mac_scale":
            return 1.0
        if self.path.startswith("protocol."):  # protocol.<name>.<field> of the system's collective library
            _, name, attr = self.path.split(".")
            assert s.interconnect is not None
            return float(getattr(next(p for p in s.interconnect.protocols if p.name == name), attr))
        obj: Any = s
        for part in self.path.split("."):
            obj = getattr(obj, part)
        return float(obj)

    def put(self, s: System, value: float) -> System:
        if self.path == "mac_scale":
            p = s.chip.power
            assert p is not None
            macs = tuple((d, e * value) for d, e in p.energies.mac_j)
            power = replace(p, energies=replace(p.energies, mac_j=macs))
            return replace(s, chip=replace(s.chip, power=power))
        v: Any = round(value) if self.integer else value
        if self.path.startswith("protocol."):
            _, name, attr = self.path.split(".")
            link = s.interconnect
            protocols = tuple(replace(p, **{attr: v}) if p.name == name else p for p in link.protocols)
            return replace(s, interconnect=replace(link, protocols=protocols))
        return _put(s, self.path.split("."), v)


def _put(obj: Any, parts: list[str], value: Any) -> Any:
    if len(parts) == 1:
        return replace(obj, **{parts[0]: value})
    return replace(obj, **{parts[0]: _put(getattr(obj, parts[0]), parts[1:], value)})


CHIP_PARAMS = [
    Param("chip.hbm.latency_s", 200e-9, 1.5e-6),
    Param("chip.hbm.queue_latency_s", 1e-9, 1e-6),
    Param("chip.hbm.refresh_s", 20e-9, 900e-9),
    Param("chip.hbm.turnaround_s", 0.1e-9, 60e-9),
    Param("chip.core.max_requests", 16, 1024, integer=True),
    Param("chip.l2.latency_s", 80e-9, 800e-9),
    Param("chip.l2.bandwidth_bytes_per_s", 2e12, 20e12),
    Param("chip.overheads.kernel_s", 0.1e-6, 5e-6),
    Param("chip.overheads.launch_s", 0.1e-6, 12e-6),
    Param("chip.overheads.matrix_setup_s", 0.1e-6, 8e-6),
    Param("chip.overheads.attention_setup_s", 0.1e-6, 12e-6),
    Param("mac_scale", 0.3, 3.0),
]
NCCL_PARAMS = [
    Param(f"protocol.{name}.{attr}", lo, hi)
    for name in ("ll", "ll128", "simple")
    for attr, lo, hi in (("overhead_s", 1e-6, 80e-6), ("step_s", 0.0, 20e-6), ("efficiency", 0.1, 1.0))
] + [Param("interconnect.link_latency_s", 0.1e-6, 10e-6)]
SETS = {  # chip or system: (cases, held-out split, system for all-reduce cases, parameters, kinds)
    "h200": ("h200_calibration", False, None, CHIP_PARAMS, None),
    "a100_pcie": ("a100_calibration", True, "a100x8", CHIP_PARAMS, ["gemm", "vector"]),
    "a100x8": ("a100_calibration", True, "a100x8", NCCL_PARAMS, ["allreduce"]),
}


def objective(system: System, cases: list[dict], meta: CaseFile, collectives: System | None) -> tuple[float, dict]:
    """The mean over kinds of the mean absolute error, plus a tenth of the mean over kinds of the
    worst error beyond one step of the timer's resolution (a case read one step off is within
    what the timer can tell; the worst such would hold the fit hostage to the timer)."""
    clear_all()
    results, errors = validate_cases(cases, system, meta, collectives)
    if errors:
        _fail("\n".join(f"{cid}: {why}" for cid, why in errors))
    summary = summarise(results)
    resolution_ms = 1e3 * meta.resolution_s
    worst_beyond: dict[str, float] = {}
    for r in results:
        worst_beyond[r.kind] = max(worst_beyond.get(r.kind, 0.0), r.beyond_resolution_pct(resolution_ms))
    mean = sum(v["mean_abs_error_pct"] for v in summary.values()) / len(summary)
    worst = sum(worst_beyond.values()) / len(worst_beyond)
    return mean + 0.1 * worst, summary


def fit(system: System, params: list[Param], score, rounds: int) -> System:
    best, _ = score(system)
    print(f"start: objective {best:.2f}", flush=True)
    step = 0.35
    for rnd in range(rounds):
        for p in params:
            for direction in (+1, -1):
                while True:
                    value = (p.get(system) or 0.01 * p.hi) * math.exp(direction * step)
                    if not p.lo <= value <= p.hi:
                        break
                    trial = p.put(system, value)
                    got, _ = score(trial)
                    if got < best - 1e-3:
                        best, system = got, trial
                        print(
                            f"round {rnd} {p.path} -> {p.get(system) if p.path != 'mac_scale' else value:.4g}: "
                            f"objective {best:.2f}",
                            flush=True,
                        )
                    else:
                        break
        step /= 2
    return system


def split(cases: list[dict], held_out: bool) -> tuple[list[dict], list[dict]]:
    if not held_out:
        return cases, []
    mod, rest = HELD_OUT_MOD
    return [c for i, c in enumerate(cases) if i % mod != rest], [c for i, c in enumerate(cases) if i % mod == rest]


def report(label: str, summary: dict) -> None:
    print(
        f"{label}: "
        + ", ".join(f"{k} {v['mean_abs_error_pct']:.1f}%/{v['max_abs_error_pct']:.0f}%" for k, v in summary.items()),
        flush=True,
    )


def _case_file(path: str) -> tuple[list[dict], CaseFile]:
    """The cases and meta of a case file, read as `archsim validate` reads it; a bad file is one
    line naming what is wrong, and exit 2."""
    from archsim.commands.validate import load_case_file
    from archsim.errors import ConfigError

    try:
        cases, meta, _name = load_case_file(path)
    except ConfigError as err:
        _fail("\n".join(str(p) for p in err.problems) or str(err))
    return cases, meta


def _fail(message: str) -> NoReturn:
    """Bad input: its message on stderr, exit 2."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", choices=sorted(SETS), default="h200")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stride", type=int, default=1, help="fit on every n-th fitting case (faster search)")
    ap.add_argument("--kinds", nargs="*", help="fit on these case kinds only")
    ap.add_argument("--params", nargs="*", help="fit only these parameter paths")
    ap.add_argument("--cases", metavar="FILE", help="fit on this case file (archsim validate's schema), none held out")
    add_transfer_flags(ap)
    args = ap.parse_args()
    if args.transfer:
        return run_transfer(args)
    name, held_out, coll_name, params, kinds = SETS[args.chip]
    kinds = args.kinds or kinds
    if args.cases:
        cases, meta = _case_file(args.cases)
        held_out = False
    else:
        data = json.loads((DATA / f"{name}.json").read_text())
        cases, meta = data["cases"], CaseFile.from_meta(data.get("meta"))
    fitting, unseen = split(cases, held_out)
    chosen = [c for c in fitting if not kinds or c["kind"] in kinds][:: args.stride]
    collectives = load_system(coll_name)[0] if coll_name else None
    system = load_system(args.chip)[0]
    if args.chip == coll_name:  # fitting the system's collectives: its cases run on it
        fitting = [c for c in fitting if c["kind"] in (kinds or [])]
        unseen = [c for c in unseen if c["kind"] in (kinds or [])]

        def score(s: System) -> tuple[float, dict]:
            return objective(load_system("a100_pcie")[0], chosen, meta, s)
    else:

        def score(s: System) -> tuple[float, dict]:
            return objective(s, chosen, meta, collectives)

    if args.params:
        params = [p for p in params if p.path in args.params]
    t0 = time.time()
    system = fit(system, params, score, args.rounds)
    print(f"fitted in {time.time() - t0:.0f} s:")
    base = load_system(args.chip)[0]
    for p in params:
        if p.path == "mac_scale":
            print(f"  energy.mac x {p.get(system) and dict(system.chip.power.energies.mac_j)}")
        else:
            print(f"  {p.path} = {p.get(system):.4g} (was {p.get(base):.4g})")
    if args.chip == coll_name:
        chip, collectives = load_system("a100_pcie")[0], system
    else:
        chip = system
    report("calibration", objective(chip, fitting, meta, collectives)[1])
    if unseen:
        report("held out", objective(chip, unseen, meta, collectives)[1])


def add_transfer_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--transfer",
        action="store_true",
        help="leave one chip out: fit shared constants on each chip, predict the other",
    )
    ap.add_argument(
        "--out", metavar="FILE", help="--transfer: write the result here (default archsim/data/transfer.json)"
    )


def run_transfer(args: argparse.Namespace) -> None:
    """`--transfer` (tools/transfer.py): --rounds, --stride, --kinds and --params apply; --chip does not."""
    from transfer import OUT, transfer

    transfer(args.rounds, args.stride, args.kinds, args.params, Path(args.out) if args.out else OUT)


if __name__ == "__main__":
    main()
