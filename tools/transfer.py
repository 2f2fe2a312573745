"""Leave one chip out: fit the constants every chip shares on one chip's set, predict the other.

    python3 tools/calibrate.py --transfer            # both ways; writes archsim/data/transfer.json

Shared are the software constants no chip's datasheet gives (`SHARED_CHIP`: the fixed cost of a
kernel, of a lone launch, of a matrix or attention kernel's prologue) and the collective library's
costs (`SHARED_COLLECTIVES`: NCCL's per-protocol overhead and step, the hop; the payload efficiency
of each protocol is the system's own, the rate its NVLink generation sustains);
the code's constants are shared by construction. For each direction the source chip's shared
constants are fitted on its own fitting cases (its file's values as the start; one its cases do
not move stays at its file's value), then the target chip is predicted with them and with its own
file's values for everything else. A source with no all-reduce cases lends its system file's
collective costs unfitted (h200x8: NCCL's published tuning constants).

Every target value that is not shared and is still tagged [CAL] in its file was fitted on the
target's own set: the prediction is then not blind in it, and the result lists it (`own_fitted`).

The result (per target set and role, own fit beside transfer per kind, each case's transfer
error, and provenance) is written as package data for `archsim validate all`, which shows it, and
for `archsim validate --interval`, which takes its intervals from the transfer errors.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from calibrate import (
    ALSO_FITTED,
    CHIP_PARAMS,
    DATA,
    HELD_OUT_MOD,
    NCCL_PARAMS,
    ROOT,
    Param,
    also_fitted,
    chip_lines,
    fit,
    load_set,
    objective_sets,
)

from archsim.config.loader import load_system
from archsim.config.resolved import config_hash
from archsim.hardware import System
from archsim.memo import clear_all
from archsim.opcache import code_version
from archsim.runner.validation import CaseFile, CaseResult, summarise, validate_cases

OUT = DATA / "transfer.json"
SHARED_CHIP = [p for p in CHIP_PARAMS if p.path.startswith("chip.overheads.")]
SHARED_COLLECTIVES = NCCL_PARAMS


@dataclass(frozen=True)
class ChipSets:
    """A chip's measurements: its calibration set (and the split held out of it), the kinds its
    chip fit uses, a second held-out set, and the system its all-reduce cases ran on."""

    chip: str
    calibration: str
    held_out_split: bool  # cases with index % 4 == 2 never fitted
    fit_kinds: tuple[str, ...] | None  # None: every kind but all-reduce
    development: str | None = None  # a held-out set of its own (never fitted)
    collectives: str | None = None  # the system of its all-reduce cases
    lends_collectives: str | None = None  # the system whose collective costs it lends, unfitted


CHIPS = {
    "h200": ChipSets("h200", "h200_calibration", False, None, "h200_holdout", lends_collectives="h200x8"),
    "a100_pcie": ChipSets("a100_pcie", "a100_calibration", True, ("gemm", "vector"), collectives="a100x8"),
}
DIRECTIONS = (("h200", "a100_pcie"), ("a100_pcie", "h200"))


def roles(sets: ChipSets, kinds: list[str] | None) -> list[tuple[str, str, list[dict], CaseFile]]:
    """A chip's cases as (role, set, cases, meta): its calibration set's fitting cases, its further
    sets fitted beside them (calibrate.py `ALSO_FITTED`: every case, its unfitted kinds shown),
    and held out, the split of its calibration set or its set of its own."""
    cases, meta = load_set(sets.calibration)
    chosen = [(i, c) for i, c in enumerate(cases) if not kinds or c["kind"] in kinds]
    mod, rest = HELD_OUT_MOD
    fitting = [c for i, c in chosen if not sets.held_out_split or i % mod != rest]
    out = [("calibration", sets.calibration, fitting, meta)]
    for name, _fitted in ALSO_FITTED.get(sets.chip, ()):
        more, more_meta = load_set(name)
        out.append(("calibration", name, [c for c in more if not kinds or c["kind"] in kinds], more_meta))
    if sets.held_out_split:
        out.append(("held out", sets.calibration, [c for i, c in chosen if i % mod == rest], meta))
    if sets.development:
        dev, dev_meta = load_set(sets.development)
        out.append(("held out", sets.development, [c for c in dev if not kinds or c["kind"] in kinds], dev_meta))
    return out


def with_shared(system: System, params: list[Param], values: dict[str, float]) -> System:
    for p in params:
        if p.path in values:
            system = p.put(system, values[p.path])
    return system


def fit_shared(sets: ChipSets, kinds: list[str] | None, rounds: int, stride: int, only: list[str] | None) -> dict:
    """The source chip's shared constants fitted on its fitting cases (all-reduce apart)."""
    params = [p for p in SHARED_CHIP if not only or p.path in only]
    _, _, cases, meta = roles(sets, kinds)[0]
    fit_kinds = sets.fit_kinds or sorted({c["kind"] for c in cases} - {"allreduce"})
    chosen = [c for c in cases if c["kind"] in fit_kinds][::stride]
    groups = [("", chosen, meta), *also_fitted(sets.chip, stride, kinds)]
    start = load_system(sets.chip)[0]
    system = fit(start, params, lambda s: objective_sets(s, groups, None), rounds) if chosen else start
    values = {p.path: p.get(system) for p in SHARED_CHIP}
    moved = [p.path for p in params if p.get(system) != p.get(start)]
    lender = sets.lends_collectives or sets.collectives
    if lender:
        coll = load_system(lender)[0]
        values |= {p.path: p.get(coll) for p in SHARED_COLLECTIVES}
    fitted_on = sorted({c["kind"] for c in chosen} | {f"{c['kind']} ({n})" for n, cs, _ in groups[1:] for c in cs})
    return {"values": values, "moved": moved, "fitted_on": fitted_on, "collectives": lender}


def own_fitted(chip: str) -> list[str]:
    """`section.key` of every value the chip's file tags [CAL] that is not a shared constant."""
    shared_keys = {"overheads." + k for k in ("kernel", "launch", "matrix_setup", "attention_setup")}
    return [key for key, comment in chip_lines(chip).items() if "[CAL]" in comment and key not in shared_keys]


def own_fitted_collectives(system: str) -> list[str]:
    """`interconnect.protocols.<name>.<key>` of every protocol value the system's file tags [CAL]
    (its payload efficiencies, fitted on its own all-reduce cases)."""
    protocol, found = "", []
    for line in (ROOT / "hw_configs" / f"{system}.yaml").read_text().splitlines():
        m = re.match(r"^    ([A-Za-z_0-9]+):", line)
        if m:
            protocol = m.group(1)
        m = re.match(r"^      ([A-Za-z_0-9]+):.*\[CAL\]", line)
        if m and protocol:
            found.append(f"interconnect.protocols.{protocol}.{m.group(1)}")
    return found


def run_cases(system: System, cases: list[dict], meta: CaseFile, collectives: System | None) -> list[CaseResult]:
    clear_all()
    results, errors = validate_cases(cases, system, meta, collectives)
    if errors:
        raise SystemExit("\n".join(f"{cid}: {why}" for cid, why in errors))
    return results


def predict_target(target: ChipSets, shared: dict, kinds: list[str] | None) -> dict:
    """The target's cases by role: own fit and transfer per kind, and each case's transfer error."""
    own_chip = load_system(target.chip)[0]
    own_coll = load_system(target.collectives)[0] if target.collectives else None
    moved_chip = with_shared(own_chip, SHARED_CHIP, shared["values"])
    moved_coll = with_shared(own_coll, SHARED_COLLECTIVES, shared["values"]) if own_coll else None
    out: dict = {"sets": {}, "cases": []}
    for role, name, cases, meta in roles(target, kinds):
        if not cases:
            continue
        own = run_cases(own_chip, cases, meta, own_coll)
        moved = run_cases(moved_chip, cases, meta, moved_coll)
        out["sets"].setdefault(name, {})[role] = {"own": summarise(own, cases), "transfer": summarise(moved, cases)}
        out["cases"] += [[r.id, r.kind, role, round(r.error_pct, 4)] for r in moved]
    return out


def provenance(rounds: int, stride: int, kinds: list[str] | None) -> dict:
    names = {"h200", "h200x8", "a100_pcie", "a100x8"}
    sets = {s for c in CHIPS.values() for s in (c.calibration, c.development) if s}
    sets |= {name for more in ALSO_FITTED.values() for name, _ in more}
    return {
        "made_by": "python3 tools/calibrate.py --transfer",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "code_version": code_version(),
        "rounds": rounds,
        "stride": stride,
        "kinds": kinds,
        "configs": {n: config_hash(load_system(n)[1]) for n in sorted(names)},
        "sets": {s: hashlib.sha256((DATA / f"{s}.json").read_bytes()).hexdigest()[:16] for s in sorted(sets)},
    }


def transfer(rounds: int, stride: int, kinds: list[str] | None, only: list[str] | None, out: Path) -> dict:
    """Both directions, written to `out`; each target's own fit and transfer printed per kind."""
    result = {"meta": provenance(rounds, stride, kinds), "directions": []}
    for source, target in DIRECTIONS:
        t0 = time.time()
        print(f"{source} -> {target}: fitting {source}'s shared constants", flush=True)
        shared = fit_shared(CHIPS[source], kinds, rounds, stride, only)
        predicted = predict_target(CHIPS[target], shared, kinds)
        result["directions"].append(
            {
                "source": source,
                "target": target,
                "target_collectives": CHIPS[target].collectives,
                "shared": shared,
                "own_fitted": own_fitted(target)
                + (own_fitted_collectives(CHIPS[target].collectives) if CHIPS[target].collectives else []),
                **predicted,
            }
        )
        print(f"{source} -> {target} in {time.time() - t0:.0f} s", flush=True)
        print_direction(result["directions"][-1])
    out.write_text(as_text(result))
    print(f"wrote {out}")
    return result


def as_text(result: dict) -> str:
    """The result as JSON, one case to a line."""
    text = json.dumps(result, indent=1)
    return CASE_ROW.sub(lambda m: "[" + ", ".join(m.groups()) + "]", text) + "\n"


CASE_ROW = re.compile(r'\[\n\s*("[^"\n]*"),\n\s*("[^"\n]*"),\n\s*("[^"\n]*"),\n\s*(-?[0-9.e+-]+)\n\s*\]')


def print_direction(d: dict) -> None:
    for name, by_role in d["sets"].items():
        for role, parts in by_role.items():
            for kind, own in parts["own"].items():
                moved = parts["transfer"][kind]
                print(
                    f"  {d['target']} {name} ({role}) {kind}: own {own['mean_abs_error_pct']:.1f}%, "
                    f"transfer from {d['source']} {moved['mean_abs_error_pct']:.1f}% "
                    f"(worst {moved['max_abs_error_pct']:.0f}%, n {moved['n']})",
                    flush=True,
                )
    if d["own_fitted"]:
        print(f"  not blind: {d['target']} values fitted on its own set: {', '.join(d['own_fitted'])}")
