"""`--interval LEVEL` on validate, op, run and compare: intervals at LEVEL % from the measured
transfer error per kind (archsim/runner/transfer.py) and the swing of the prediction over the
stated range of each [EST] or [CAL] parameter that counts on its chip
(archsim/runner/sensitivity.py), loaded only when the flag is given."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from archsim.commands import UsageError


def add_interval_flag(parser) -> None:
    """`--interval LEVEL`, the same on every command that takes it."""
    parser.add_argument(
        "--interval",
        type=float,
        metavar="LEVEL",
        help="intervals at LEVEL %% from the measured transfer error per kind and the stated ranges of [EST] and [CAL] values",
    )


def check_interval(args) -> None:
    """A usage error unless --interval, where given, is a level in percent, above 1 and below 100
    (a level of 1 or less is a fraction written for a percent: 0.9 for 90)."""
    level = getattr(args, "interval", None)
    if level is not None and not 1 < level < 100:
        raise UsageError(
            f"--interval: a level in percent, above 1 and below 100: 90 for a 90% interval (got {level:g})"
        )


def interval_text(record: dict | None, kind: str, level: float, unit: Callable[[float], str]) -> str:
    """`record` (transfer.interval's) as one clause for a command's line: its times' intervals,
    or that no stored transfer error has the kind."""
    if record is None:
        return f"; no {level:g}% interval: no stored transfer errors of a {kind}"
    parts = [
        f"{name.removesuffix('_s')} {unit(low)} to {unit(high) if high is not None else 'unbounded'}"
        for name, (low, high) in ((k, v) for k, v in record.items() if k.endswith("_s") and isinstance(v, list))
    ]
    head = f"; {level:g}% interval ({kind} transfer error, q {100 * record['q']:.1f}% of {record['n']}"
    return head + _ranges_text(record) + "): " + ", ".join(parts)


def _ranges_text(record: dict) -> str:
    """The parameters' part of an interval's clause: how many ranges, the widest swing."""
    params = record.get("parameters") or []
    if not params:
        return ""
    widest = max(params, key=lambda p: max(max(s.values()) for s in p["swing"].values()))
    swing = max(widest["swing"].values(), key=lambda s: max(s.values()))
    many = f"{len(params)} stated ranges" if len(params) > 1 else "1 stated range"
    if not max(swing.values()):
        return f"; {many}, none moving it"
    return f"; {many}, widest {widest['key']} +{100 * swing['up']:.1f}%/-{100 * swing['down']:.1f}%"


def own_sets(file: str) -> set[str]:
    """The case sets measured on the chip or system of a shipped hardware file (its own sets: what
    its [CAL] values were fitted on), as the stored transfer result names them; none for any other
    file."""
    from pathlib import Path

    from archsim.config.loader import shipped_dir
    from archsim.runner import transfer

    path = Path(file).resolve()
    result = transfer.stored()
    if path.parent != shipped_dir("hw_configs").resolve() or result is None:
        return set()
    return transfer.measured_sets(result).get(path.stem, set())


def parameter_swings(hardware, predict, given: frozenset[str] = frozenset(), keys=lambda key: True):
    """sensitivity.parameter_swings on `hardware` with the shipped chips' own sets and the stored
    transfer result's shared constants."""
    from archsim.runner import sensitivity, transfer

    sets: dict[str, set[str]] = {}

    def own(file: str) -> set[str]:
        if file not in sets:
            sets[file] = own_sets(file)
        return sets[file]

    shared = sensitivity.shared_keys(transfer.stored())
    return sensitivity.parameter_swings(hardware, predict, own, shared, set(given), keys)


def given_keys(args) -> set[str]:
    """The hardware keys the command's --set gives (theirs: no stated range applies)."""
    return {path for root, path, _ in getattr(args, "set", None) or [] if root == "hardware"}


def swung_interval(args, hardware, kind: str, times_s: dict[str, float], predict) -> dict | None:
    """transfer.interval of `times_s` with the swings `predict` (hardware -> the same named times)
    shows over the ranges of the parameters that count on `hardware`; none computed where the
    kind has no stored transfer error."""
    from archsim.runner import transfer

    if kind not in transfer.stored_bands(args.interval):
        return None
    swings, parts = parameter_swings(hardware, predict, frozenset(given_keys(args)))
    return transfer.interval(kind, args.interval, times_s, swings, parts)


def step_interval(level: float, result, data: dict, hardware=None, rerun=None, settings=()) -> str:
    """A run's interval at `level` % (TTFT, TPOT and the whole run, from the stored transfer error
    of model steps and, with `hardware` and `rerun`, the swing of each parameter that counts on
    it but those its --set `settings` give) into `data["interval"]`, and as a clause for a line."""
    from archsim.runner.transfer import interval
    from archsim.units import format_seconds

    times = {"ttft_s": result.ttft_s, "tpot_s": result.tpot_s, "total_time_s": result.total_time_s}
    if hardware is None or rerun is None:
        data["interval"] = record = interval("model_step", level, times)
    else:
        args = argparse.Namespace(interval=level, set=list(settings))
        data["interval"] = record = swung_interval(args, hardware, "model_step", times, scaled(rerun, hardware, times))
    return interval_text(record, "model_step", level, format_seconds)


RUN_TIMES = ("ttft_s", "tpot_s", "total_time_s")


def screen_rerun(args, workload):
    """A run's times on some hardware, as the command ran it but at screen fidelity
    (archsim/choose/fidelity.py): what a run's interval re-simulates at each end of each range."""

    def rerun(hardware) -> dict[str, float]:
        from archsim import api

        r = api.run(
            hardware, workload, tp=args.tp, pp=args.pp, ep=args.ep, kv_stride=args.kv_stride, fidelity="screen"
        ).result
        return {name: getattr(r, name) for name in RUN_TIMES}

    return rerun


def scaled(rerun, hardware, times: dict[str, float]):
    """`rerun`'s times scaled by the ratio of `times` to its own times on `hardware`: a
    parameter's relative swing at the rerun's fidelity, on the times given."""
    base = rerun(hardware)

    def predict(h) -> dict[str, float]:
        return {k: v * times[k] / base[k] if base[k] > 0 else v for k, v in rerun(h).items()}

    return predict


def case_swings(args, hw: str, coll: str | None, cases: list, meta, results: list, keep=None) -> tuple[dict, dict]:
    """Per case id of `results` (those in `keep`, where given), the (up, down) swing of its
    predicted time over the range of each parameter that counts: the chip's (`hw`) on its cases,
    and the interconnect's of the system `coll` on its all-reduce cases; with the parts per file
    (sensitivity.parameter_swings' record)."""
    from archsim.api import load_system
    from archsim.runner import sensitivity
    from archsim.runner.validation import validate_cases

    named = [c if "id" in c else {**c, "id": f"#{i}"} for i, c in enumerate(cases) if isinstance(c, dict)]
    wanted = [c for c in named if keep is None or str(c["id"]) in keep]
    base = {r.id: r.predicted_ms for r in results}
    chip = load_system(hw)
    fabric = load_system(coll) if coll else None
    on_fabric = [c for c in wanted if fabric is not None and c.get("kind") == "allreduce"]
    on_chip = [c for c in wanted if c not in on_fabric]

    def chip_times(h) -> dict[str, float]:
        done, _ = validate_cases(on_chip, h.system, meta, fabric.system if fabric else None)
        return {r.id: r.predicted_ms for r in done}

    def fabric_times(h) -> dict[str, float]:
        done, _ = validate_cases(on_fabric, chip.system, meta, h.system)
        return {r.id: r.predicted_ms for r in done}

    parts: dict[str, dict] = {}
    per_case: dict[str, dict[str, tuple[float, float]]] = {}
    for hardware, these, times, keys in (
        (chip, on_chip, chip_times, lambda key: True),
        (fabric, on_fabric, fabric_times, lambda key: key.startswith("interconnect.")),
    ):
        if hardware is None or not these:
            continue
        swings, parts[sensitivity.shown_path(hardware.source)] = parameter_swings(hardware, times, keys=keys)
        for s in swings:
            for cid, low in s.low_s.items():
                if cid in base and cid in s.high_s:
                    per_case.setdefault(cid, {})[s.range.key] = sensitivity.swing(base[cid], low, s.high_s[cid])
    return per_case, parts
