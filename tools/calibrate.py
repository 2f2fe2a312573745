"""Fit a chip's physical parameters to its calibration cases (coordinate descent).

Only physical parameters of the chip move (each marked [CAL] in its file): HBM latency unloaded
and under queueing, the refresh and turnaround time that set streaming efficiency, the bytes and
requests a core keeps in flight, L2 latency and bandwidth, the share of the L2 a flush leaves
dirty, the fixed costs per kernel, and the energy of a multiply-accumulate (which sets the clock
the power limit holds). A chip's further sets (`ALSO_FITTED`: the H200's per-kernel durations)
count beside its cases, each of their kinds as one more kind. A multi-chip
system's bulk protocols' payload efficiencies are fitted on its all-reduce cases (NCCL's
latency constants are published, never fitted). No per-shape number exists
to fit. The objective is the mean over case kinds of the mean absolute error (every kind counts
the same), plus a tenth of the mean over kinds of the worst error beyond one step of the case
file's timer resolution (`meta.resolution`; none: the worst error).

    python3 tools/calibrate.py --chip h200              # archsim/data/h200_calibration.json (and h200_kernels.json)
    python3 tools/calibrate.py --chip a100_pcie         # archsim/data/a100_calibration.json
    python3 tools/calibrate.py --chip a100x8            # its all-reduce cases
    python3 tools/calibrate.py --chip h200 --cases my_cases.json   # a case file of your own
    python3 tools/calibrate.py --transfer          # leave one chip out, both ways (tools/transfer.py)

A100 cases whose index is 2 mod 4 are held out: never fitted, reported apart. The fitted values
are printed to be put in the chip file (with the [CAL] tag).

Fits stay physical. A parameter is fitted only where its chip file tags the value [CAL], and that
line declares the value's physical range (`[CAL] fitted on h200_calibration, range 0.5-4 us`); a
value the file gives from a datasheet or a measurement is never fitted (naming one with --params
exits 2). A fit that leaves a declared range is refused (exit 3), each line naming the mechanism
the data suggest is missing, for which the value stands in (`MISSING`). `--check` does the same
for the values the file holds now:

    python3 tools/calibrate.py --chip h200 --check   # every [CAL] value of h200.yaml in its range?
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from archsim.config.loader import load_system
from archsim.hardware import System
from archsim.memo import clear_all
from archsim.runner.validation import CaseFile, summarise, validate_cases
from archsim.units import Dim, parse_quantity

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
    Param("chip.core.loads_per_warp", 1, 64, integer=True),
    Param("chip.l2.latency_s", 80e-9, 800e-9),
    Param("chip.l2.bandwidth_bytes_per_s", 2e12, 20e12),
    Param("chip.l2.flush_dirty", 0.05, 1.0),
    Param("chip.overheads.kernel_s", 0.1e-6, 5e-6),
    Param("chip.overheads.launch_s", 0.1e-6, 12e-6),
    Param("chip.overheads.matrix_setup_cycles", 100, 16000),
    Param("chip.overheads.attention_setup_cycles", 100, 24000),
    Param("mac_scale", 0.3, 3.0),
]


@dataclass(frozen=True)
class Fitted:
    """Where a fitted parameter lives in a chip file (`section.key`, its section the file's
    top-level one), the dimension its range is written in (None: a count), and the mechanism a fit
    under or over its range stands in for."""

    key: str
    dim: Dim | None
    below: str
    above: str


FEED = "the rate a core feeds itself (outstanding requests per SM, NoC bandwidth per SM, the far L2 partition)"
CHAIN = (
    "the per-step cost of a chain-of-loads kernel beyond its access latency"
    " (cold L2 and TLB misses after a flush, a block's synchronisation between steps)"
)
MISSING = {  # every fitted chip parameter: its line and what a value beyond its range stands in for
    "chip.hbm.latency_s": Fitted("hbm.latency", Dim.SECONDS, "prefetch the model lacks", f"{FEED}, or {CHAIN}"),
    "chip.hbm.queue_latency_s": Fitted(
        "hbm.queue_latency",
        Dim.SECONDS,
        "-",
        "queueing beyond an M/D/1 controller: bank conflicts, a flush's write-back",
    ),
    "chip.hbm.refresh_s": Fitted(
        "hbm.refresh_time",
        Dim.SECONDS,
        "a stream faster than refresh allows: the flush write-back",
        f"a stream slower than the DRAM: {FEED}",
    ),
    "chip.hbm.turnaround_s": Fitted(
        "hbm.turnaround",
        Dim.SECONDS,
        "a copy faster than bus turnaround allows",
        "read/write mixing beyond bus turnaround: the flush write-back",
    ),
    "chip.core.max_requests": Fitted(
        "cores.max_requests", None, FEED, "latency hidden beyond what requests explain: prefetch or a shorter latency"
    ),
    "chip.core.loads_per_warp": Fitted(
        "cores.loads_per_warp",
        None,
        "a kernel feeding itself beyond its registers: bulk (TMA) loads",
        "latency hidden beyond what a warp's loads explain: prefetch or a shorter latency",
    ),
    "chip.l2.latency_s": Fitted("l2.latency", Dim.SECONDS, "L2 reuse the model lacks", f"{FEED}, or {CHAIN}"),
    "chip.l2.bandwidth_bytes_per_s": Fitted(
        "l2.bandwidth", Dim.BYTES_PER_S, FEED, "reuse inside the cores the model lacks"
    ),
    "chip.l2.flush_dirty": Fitted(
        "l2.flush_dirty",
        None,
        "a flush's write-back hidden under the kernel's reads (bus slack of a read stream)",
        "a flush's cost beyond its write-back: cold TLB or L2 tag state",
    ),
    "chip.overheads.kernel_s": Fitted(
        "overheads.kernel",
        Dim.SECONDS,
        "kernels overlapping their neighbours (programmatic launch)",
        f"a per-kernel cost that grows with the kernel: tail or wave quantisation, {CHAIN}",
    ),
    "chip.overheads.launch_s": Fitted(
        "overheads.launch",
        Dim.SECONDS,
        "a launch hidden by the launches queued before it",
        "a host round trip: the host's launch-and-synchronise cost",
    ),
    "chip.overheads.matrix_setup_cycles": Fitted(
        "overheads.matrix_setup", Dim.CYCLES, "-", "a GEMM library's policy (split-K, stream-K, tile shape)"
    ),
    "chip.overheads.attention_setup_cycles": Fitted(
        "overheads.attention_setup", Dim.CYCLES, "-", "an attention library's KV split or pipeline"
    ),
    **{
        f"protocol.{name}.efficiency": Fitted(
            f"interconnect.protocols.{name}.efficiency",
            None,
            "a per-collective cost beyond the protocol's constants: the wait for the last rank, a host round trip",
            "a path faster than a ring of the links: in-switch reduction (NVLS) or a tree",
        )
        for name in ("ll128", "simple")
    },
    "mac_scale": Fitted(
        "power.mac",
        Dim.JOULES,
        "a clock held higher than the power limit explains",
        "a clock held lower than it explains",
    ),
}
RANGE = re.compile(r"range\s+([-+0-9.eE]+)\s*(?:-|–|to)\s*([-+0-9.eE]+)\s*([A-Za-zµ/]*)")


def chip_lines(chip: str) -> dict[str, str]:
    """The comment of every valued line of hw_configs/<chip>.yaml by `section.key` (its section
    the file's top-level one: `cores.max_requests`, `hbm.latency`), and of a line nested deeper
    also by its whole path (`interconnect.protocols.ll128.efficiency`), where `section.key`
    would name the first of several."""
    found: dict[str, str] = {}
    path: list[tuple[int, str]] = []  # (indent, key) of the lines enclosing this one
    for line in (ROOT / "hw_configs" / f"{chip}.yaml").read_text().splitlines():
        m = re.match(r"^(\s*)([A-Za-z_0-9]+):", line)
        if not m:
            continue
        indent, key = len(m.group(1)), m.group(2)
        path = [(i, k) for i, k in path if i < indent]
        comment = line.split("#", 1)[1] if "#" in line else ""
        names = [k for _i, k in path] + [key]
        found.setdefault(key if len(names) == 1 else f"{names[0]}.{key}", comment)
        if len(names) > 2:
            found.setdefault(".".join(names), comment)
        path.append((indent, key))
    return found


def declared_range(comment: str, dim: Dim | None) -> tuple[float, float] | None:
    """The physical range a [CAL] comment declares (`range 0.5-4 us`, `range 32-1024`), in the
    canonical unit of `dim`; None if it declares none."""
    m = RANGE.search(comment)
    if not m:
        return None
    lo, hi, unit = m.groups()
    if dim is None:
        return float(lo), float(hi)
    return parse_quantity(f"{lo} {unit}", dim), parse_quantity(f"{hi} {unit}", dim)


def _first_mac_j(chip: str) -> float:
    power = load_system(chip)[0].chip.power
    assert power is not None and power.energies.mac_j, f"{chip} states no MAC energy"
    return power.energies.mac_j[0][1]


def fitted_ranges(chip: str, params: list[Param]) -> dict[str, tuple[float, float]]:
    """Of `params`, those the chip file tags [CAL], with their declared ranges (exit 2 naming a
    [CAL] line that declares none). A parameter the file gives from a source is left out."""
    lines, out, bad = chip_lines(chip), {}, []
    for p in params:
        if p.path not in MISSING:
            continue
        comment = lines.get(MISSING[p.path].key, "")
        if "[CAL]" not in comment:
            continue
        got = declared_range(comment, MISSING[p.path].dim)
        if got is not None and p.path == "mac_scale":  # fitted as a factor over the file's first MAC energy
            got = (got[0] / _first_mac_j(chip), got[1] / _first_mac_j(chip))
        if got is None:
            bad.append(f"hw_configs/{chip}.yaml: {MISSING[p.path].key}: a [CAL] value declares no range")
        else:
            out[p.path] = got
    if bad:
        _fail("\n".join(bad))
    return out


def measured(chip: str, params: list[Param]) -> list[str]:
    """The paths of `params` whose chip file line gives a source, not a fit: never fitted."""
    lines = chip_lines(chip)
    return [
        p.path
        for p in params
        if p.path in MISSING and MISSING[p.path].key in lines and "[CAL]" not in lines[MISSING[p.path].key]
    ]


def unstated(chip: str, params: list[Param]) -> list[str]:
    """The paths of `params` the chip file does not state (a mechanism it leaves off): never fitted."""
    lines = chip_lines(chip)
    return [p.path for p in params if p.path in MISSING and MISSING[p.path].key not in lines]


def unphysical(system: System, base: System, ranges: dict[str, tuple[float, float]]) -> list[str]:
    """One line per value of `system` (fitted from `base`) outside its declared range, naming
    the mechanism the data suggest is missing (the value stands in for it)."""
    problems = []
    for path, (lo, hi) in ranges.items():
        v = _value(path, system, base)
        if not lo <= v <= hi:
            side, missing = ("under", MISSING[path].below) if v < lo else ("over", MISSING[path].above)
            problems.append(f"{path} = {v:.4g} is {side} its physical range {lo:.4g}-{hi:.4g}: missing {missing}")
    return problems


def refuse_unphysical(system: System, base: System, ranges: dict[str, tuple[float, float]]) -> None:
    """Refuse values outside their declared ranges: their lines on stderr, exit 3."""
    problems = unphysical(system, base, ranges)
    if problems:
        print("refused, a value is outside its physical range:\n  " + "\n  ".join(problems), file=sys.stderr)
        raise SystemExit(3)


def _value(path: str, system: System, base: System) -> float:
    """A fitted value; the MAC energy as its factor over the base chip's."""
    if path != "mac_scale":
        return Param(path, 0.0, 0.0).get(system)
    now, was = system.chip.power, base.chip.power
    if now is None or was is None or not was.energies.mac_j:
        return 1.0
    return now.energies.mac_j[0][1] / was.energies.mac_j[0][1]


NCCL_PARAMS = [
    Param(f"protocol.{name}.{attr}", lo, hi)
    for name in ("ll", "ll128", "simple")
    for attr, lo, hi in (("overhead_s", 1e-6, 80e-6), ("step_s", 0.0, 20e-6))
] + [Param("interconnect.link_latency_s", 0.1e-6, 10e-6)]  # NCCL's tuning constants: one set on every NVIDIA system
# the payload rate of the bulk protocols: the NVLink generation's, set by the system (NCCL's own
# model reads it per architecture from the topology); LL's is NCCL's llMaxBw, published per architecture
NCCL_EFFICIENCIES = [Param(f"protocol.{name}.efficiency", 0.3, 0.95) for name in ("ll128", "simple")]
SETS = {  # chip or system: (cases, held-out split, system for all-reduce cases, parameters, kinds)
    "h200": ("h200_calibration", False, None, CHIP_PARAMS, None),
    "a100_pcie": ("a100_calibration", True, "a100x8", CHIP_PARAMS, ["gemm", "vector"]),
    "a100x8": ("a100_calibration", True, "a100x8", NCCL_EFFICIENCIES, ["allreduce"]),
}
# a chip's further sets, each timed its own way, fitted beside its cases: (set, kinds fitted). The
# H200's per-kernel durations fit its matrix and attention kernels; their vector kernels are
# shown, not fitted: a tiny vectorised kernel (1.07 us) and a strided one of the same size (1.6-1.8
# us) differ by more than the one fixed cost per kernel the model has
ALSO_FITTED: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "h200": (("h200_kernels", ("gemm", "attention_decode", "attention_prefill")),),
}


def load_set(name: str) -> tuple[list[dict], CaseFile]:
    """A shipped case set's cases and meta, read as `archsim validate` reads it."""
    return _case_file(name)


def also_fitted(chip: str, stride: int, kinds: list[str] | None = None) -> list[tuple[str, list[dict], CaseFile]]:
    """The chip's further sets as objective groups: each one's fitted kinds (of `kinds`, where
    given), every `stride`-th case."""
    groups = []
    for name, fitted in ALSO_FITTED.get(chip, ()):
        cases, meta = load_set(name)
        chosen = [c for c in cases if c["kind"] in fitted and (not kinds or c["kind"] in kinds)]
        groups.append((name, chosen[::stride], meta))
    return groups


def objective(system: System, cases: list[dict], meta: CaseFile, collectives: System | None) -> tuple[float, dict]:
    """The mean over kinds of the mean absolute error, plus a tenth of the mean over kinds of the
    worst error beyond one step of the timer's resolution (a case read one step off is within
    what the timer can tell; the worst such would hold the fit hostage to the timer)."""
    return objective_sets(system, [("", cases, meta)], collectives)


def objective_sets(
    system: System, groups: list[tuple[str, list[dict], CaseFile]], collectives: System | None
) -> tuple[float, dict]:
    """`objective` over case sets each timed its own way, every (set, kind) counting the same;
    the summary's kinds of a set with a name are written `kind (name)`."""
    clear_all()
    summary, worst_beyond = {}, {}
    for name, cases, meta in groups:
        results, errors = validate_cases(cases, system, meta, collectives)
        if errors:
            _fail("\n".join(f"{cid}: {why}" for cid, why in errors))
        suffix = f" ({name})" if name else ""
        summary |= {kind + suffix: v for kind, v in summarise(results).items()}
        resolution_ms = 1e3 * meta.resolution_s
        for r in results:
            key = r.kind + suffix
            worst_beyond[key] = max(worst_beyond.get(key, 0.0), r.beyond_resolution_pct(resolution_ms))
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
    ap.add_argument("--check", action="store_true", help="fit nothing: is every [CAL] value within its range?")
    add_transfer_flags(ap)
    args = ap.parse_args()
    if args.transfer:
        return run_transfer(args)
    name, held_out, coll_name, params, kinds = SETS[args.chip]
    kinds = args.kinds or kinds
    if args.cases:
        cases, meta = _case_file(args.cases)
        held_out, extra = False, []
    else:
        cases, meta = load_set(name)
        extra = also_fitted(args.chip, args.stride, args.kinds)
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
            return objective_sets(s, [("", chosen, meta), *extra], collectives)

    if args.params:
        named = [p for p in params if p.path in args.params]
        if measured(args.chip, named):
            _fail(f"{', '.join(measured(args.chip, named))}: given from a source in its chip file, never fitted")
        if unstated(args.chip, named):
            _fail(
                f"{', '.join(unstated(args.chip, named))}: not stated in hw_configs/{args.chip}.yaml;"
                " state it with a [CAL] range to fit it"
            )
        params = named
    sourced = set(measured(args.chip, params)) | set(unstated(args.chip, params))
    params = [p for p in params if p.path not in sourced]
    ranges = fitted_ranges(args.chip, params)
    if args.check:
        refuse_unphysical(system, system, ranges)
        print(f"{args.chip}: every fitted value within its declared range ({len(ranges)})")
        return
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
    report(
        "calibration",
        objective_sets(
            chip, [("", fitting, meta), *([] if args.cases else also_fitted(args.chip, 1, args.kinds))], collectives
        )[1],
    )
    if unseen:
        report("held out", objective(chip, unseen, meta, collectives)[1])
    refuse_unphysical(system, base, ranges)


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
