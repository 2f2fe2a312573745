"""Leave one chip out, as stored: the transfer result `tools/calibrate.py --transfer` writes
(archsim/data/transfer.json), and the intervals its errors give a prediction.

Transfer: a chip predicted with the constants every chip shares (software and collective costs)
fitted on the other chip's set, and with its own file's values for the rest. Refitting takes
minutes, so `archsim validate all` reads the stored result and says when a chip file it was
computed from has changed since.

Interval: over the stored transfer predictions of one op kind on the calibration cases, the
L-quantile q of the absolute error |e|, e = (predicted - measured) / measured (empirical, linear
between order statistics), gives a level-L interval for a time predicted as p:

    measured in [p / (1 + q),  p / (1 - q)]     (no upper end when q >= 1)

which holds exactly when |e| <= q. The held-out cases never enter the quantiles, so the share of
them inside their interval (the coverage) measures the interval honestly: of the own fit's
predictions and of the stored transfer predictions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archsim.memo import memo

if TYPE_CHECKING:
    from archsim.runner.sensitivity import Swing
    from archsim.runner.validation import CaseResult

FILE = "transfer.json"


def stored() -> dict | None:
    """The stored transfer result, or None where none ships."""
    from archsim.config.loader import INSTALLED_DATA

    path = INSTALLED_DATA / FILE
    return json.loads(path.read_text()) if path.exists() else None


def stale(result: dict) -> list[str]:
    """The chip and system files whose resolved configuration differs from the one the result was
    computed from."""
    from archsim.config.loader import load_system
    from archsim.config.resolved import config_hash

    return [n for n, h in result["meta"]["configs"].items() if config_hash(load_system(n)[1]) != h]


def summaries(result: dict, kinds: list[str] | None = None) -> list[dict]:
    """One row per direction, target set, role and kind: own fit and transfer side by side."""
    rows = []
    for d in result["directions"]:
        for name, by_role in d["sets"].items():
            for role, parts in by_role.items():
                for kind, moved in parts["transfer"].items():
                    if kinds and kind not in kinds:
                        continue
                    own = parts["own"][kind]
                    chip = d.get("target_collectives") if kind == "allreduce" else None
                    rows.append(
                        {"chip": chip or d["target"], "source": d["source"], "set": name, "role": role, "kind": kind}
                        | moved
                        | {"own_mean_abs_error_pct": own["mean_abs_error_pct"]}
                    )
    return rows


def measured_sets(result: dict) -> dict[str, set[str]]:
    """Per chip or system a transfer result predicts, the case sets measured on it: its own."""
    out: dict[str, set[str]] = {}
    for d in result["directions"]:
        for chip in (d["target"], d.get("target_collectives")):
            if chip:
                out.setdefault(chip, set()).update(d["sets"])
    return out


def quantile(values: list[float], a: float) -> float:
    """The a-quantile of `values`, linear between order statistics (numpy's default)."""
    xs = sorted(values)
    pos = a * (len(xs) - 1)
    i = int(pos)
    return xs[i] if i + 1 >= len(xs) else xs[i] + (pos - i) * (xs[i + 1] - xs[i])


@dataclass(frozen=True)
class Band:
    """The level-L quantile of one op kind's absolute transfer error: a measured time lies in
    [p / (1 + q), p / (1 - q)] of a prediction p (no upper end when q >= 1)."""

    q: float  # fraction, e.g. 0.12
    n: int  # transfer cases it comes from

    def interval_ms(self, predicted_ms: float) -> tuple[float, float]:
        return self.interval(predicted_ms)

    def interval(self, predicted: float) -> tuple[float, float]:
        """(low, high) of a prediction, in its own unit (high inf when q >= 1)."""
        return predicted / (1.0 + self.q), predicted / (1.0 - self.q) if self.q < 1.0 else math.inf


def bands(result: dict, level_pct: float) -> dict[str, Band]:
    """Per kind, the level's band from the stored transfer errors of calibration cases."""
    errors: dict[str, list[float]] = {}
    for d in result["directions"]:
        for _id, kind, role, error_pct in d["cases"]:
            if role == "calibration":
                errors.setdefault(kind, []).append(abs(error_pct) / 100.0)
    return {k: Band(quantile(v, level_pct / 100.0), len(v)) for k, v in sorted(errors.items())}


@memo(maxsize=8)
def stored_bands(level_pct: float) -> dict[str, Band]:
    """The stored transfer result's bands at `level_pct` (none where no result ships)."""
    result = stored()
    return bands(result, level_pct) if result else {}


def interval(
    kind: str, level_pct: float, times_s: dict[str, float], swings: Sequence[Swing] = (), parts: dict | None = None
) -> dict | None:
    """The level's interval of each predicted time in `times_s` (name: seconds) of an op or step of
    `kind` (a case kind: gemm, attention_decode, vector, model_step, allreduce, ...), from the
    stored transfer errors of that kind and the `swings` of the parameters it rests on
    (sensitivity.py), as a record for JSON output: the band's q and case count, per time [low,
    high] in seconds (high null where the interval has no upper end), and where `parts` is given
    (sensitivity.parameter_swings' record) each time's q_low and q_high and each parameter's
    swing, up and down; None where no stored transfer case has that kind."""
    from archsim.runner.sensitivity import bounds, combined, swing

    band = stored_bands(level_pct).get(kind)
    if band is None:
        return None
    out: dict = {"level_pct": level_pct, "kind": kind, "q": band.q, "n": band.n}
    q_parts: dict[str, list[float]] = {}
    for name, t in times_s.items():
        q_low, q_high = combined(band.q, (swing(t, s.low_s[name], s.high_s[name]) for s in swings))
        low, high = bounds(t, q_low, q_high)
        out[name] = [low, high if math.isfinite(high) else None]
        q_parts[name] = [q_low, q_high]
    if parts is not None:
        out["q_low_high"] = q_parts
        out["parameters"] = [
            p | {"swing": {n: dict(zip(("up", "down"), swing(t, s.low_s[n], s.high_s[n]), strict=True))
                           for n, t in times_s.items()}}
            for p, s in zip(parts["parameters"], swings, strict=True)
        ]  # fmt: skip
        out["left_out"], out["unranged"] = parts["left_out"], parts["unranged"]
    return out


def inside(error_pct: float, band: Band, swings: Iterable[tuple[float, float]] = ()) -> bool:
    """Whether a measured time lies in the interval of its prediction: with e = (p - m) / m,
    -q_high <= e <= q_low (sensitivity.py; both q where no parameter swings)."""
    from archsim.runner.sensitivity import combined

    q_low, q_high = combined(band.q, swings)
    return -q_high <= error_pct / 100.0 <= q_low


def transfer_coverage(
    result: dict, by_kind: dict[str, Band], swings: dict[str, dict[str, dict]] | None = None
) -> dict[str, dict[str, dict]]:
    """Per target chip and kind: the stored held-out transfer predictions, and the share inside
    (each case's parameters swinging as `swings[chip][case id]` gives: {key: (up, down)})."""
    found: dict[str, dict[str, list[bool]]] = {}
    for d in result["directions"]:
        chip = (swings or {}).get(d["target"], {})
        for cid, kind, role, error_pct in d["cases"]:
            if role != "calibration" and kind in by_kind:
                ok = inside(error_pct, by_kind[kind], chip.get(cid, {}).values())
                found.setdefault(d["target"], {}).setdefault(kind, []).append(ok)
    return {
        chip: {k: {"n": len(v), "coverage_pct": 100.0 * sum(v) / len(v)} for k, v in sorted(kinds.items())}
        for chip, kinds in found.items()
    }


def coverage(
    results: list[CaseResult], by_kind: dict[str, Band], swings: dict[str, dict] | None = None
) -> dict[str, dict]:
    """Per kind with a band: the cases, and the share of them whose measured time lies in the
    interval of their prediction (each case's parameters swinging as `swings[case id]` gives)."""
    found: dict[str, list[bool]] = {}
    for r in results:
        band = by_kind.get(r.kind)
        if band is not None:
            found.setdefault(r.kind, []).append(inside(r.error_pct, band, (swings or {}).get(r.id, {}).values()))
    return {k: {"n": len(v), "coverage_pct": 100.0 * sum(v) / len(v)} for k, v in sorted(found.items())}
