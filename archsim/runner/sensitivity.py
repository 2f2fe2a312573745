"""How far a predicted time moves across the stated ranges of the chip parameters it rests on, and
the interval that and the measured transfer error give it together.

A chip file states a parameter's range on its line, in its comment: `[CAL] fitted on
h200_calibration, range 0.5-4 us` (a fitted value: tools/calibrate.py) or `[EST: 0.5-2 pJ; ...]`
(an estimate). `stated` reads them from a hardware document, each at its own file and line (a
system's chip lines in the chip file it extends); a tag whose range is malformed (an end missing,
not a number, or a low end above the high) is a ConfigError at that line, and so is a [CAL] value
fitted on a set that declares no range.

Which count on a chip (`left_out` says why one does not): a [CAL] value fitted on the chip's own
measured sets is already inside its measured error (the transfer error is taken with the target's
own fit of those values), and a shared software or collective constant (transfer.json's `shared`:
the kernel's fixed costs, the collective library's) taken from another chip's fit is what the
transfer error measures; neither counts again. An [EST] value, and a [CAL] value another chip's
fit gives this one (h100.yaml's H200 values of refresh, turnaround, requests in flight), count. A
value the user sets (`--set`) is theirs and does not.

One at a time: the time predicted as p is predicted again with the parameter at each end of its
range, every other value as given (t_lo, t_hi). Its swing, up and down,

    up = 1 - p / max(p, t_lo, t_hi)        down = p / min(p, t_lo, t_hi) - 1

puts the slowest and fastest of the three at p / (1 - up) and p / (1 + down). With the transfer
band's q (transfer.py), the errors taken as independent and combined root-sum-square:

    q_high = sqrt(q^2 + sum_i up_i^2)      q_low = sqrt(q^2 + sum_i down_i^2)
    measured in [p / (1 + q_low),  p / (1 - q_high)]      (no upper end when q_high >= 1)

With no parameter counted, q_low = q_high = q: the transfer band's interval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim.config.yamlfile import YamlDoc
from archsim.errors import ConfigError, Problem
from archsim.units import Dim, parse_quantity

_NUM = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_UNIT = r"[A-Za-zµ][A-Za-zµ/0-9]*"
RANGE = re.compile(rf"(?:\brange\s+|\[EST:\s*)({_NUM})\s*(?:-|–|to)\s*({_NUM})(?:\s*({_UNIT}))?")
TRIED = re.compile(rf"\brange\s+[-+]?\.?\d|\[EST:\s*{_NUM}\s*(?:-|–|to)")  # a range begun: it must be whole
SET = r"[a-z0-9]+_[a-z0-9_]+"  # a case set's name: h200_calibration, h200_kernels
FITTED_ON = re.compile(rf"fitted on ({SET}(?:(?:,\s*|\s+and\s+){SET})*)")
COMMENT = re.compile(r"^(\s*)#")


@dataclass(frozen=True)
class StatedRange:
    """One [EST] or [CAL] value of a hardware document with the range its line states."""

    key: str  # its dotted path in the document: "hbm.refresh_time", "power.energy.mac"
    file: str
    line: int
    tag: str  # "EST" or "CAL"
    fitted_on: tuple[str, ...]  # the sets a [CAL] value was fitted on (its line's words)
    low: str  # the ends as written, with the range's unit: "100 ns", "32", "1.7 pJ"
    high: str
    value: Any  # the document's value: a quantity, a number, or a mapping of them (one range scales all)

    def at(self, end: str) -> Any:
        """The value to set for the parameter at `end` (self.low or self.high): the end itself, or
        for a mapping each entry scaled by end / its first entry."""
        if not isinstance(self.value, dict):
            return _number(end) if _number(end) is not None else end
        first = next(iter(self.value.values()))
        dim = _dim_of(str(first))
        if dim is None or _dim_of(f"1 {dim.value}") is not dim:
            raise self.problem(f"a range over a mapping needs quantities in J, W, V or s (got {first!r})")
        factor = parse_quantity(end, dim) / parse_quantity(str(first), dim)
        return {k: f"{parse_quantity(str(v), dim) * factor!r} {dim.value}" for k, v in self.value.items()}

    def problem(self, why: str) -> ConfigError:
        return ConfigError([Problem(self.file, self.line, self.key, why)])


def _number(text: str) -> int | float | None:
    """A unitless range end as a number (a count as an int), or None if it has a unit."""
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(_NUM, text):
        return float(text)
    return None


def _dim_of(quantity: str) -> Dim | None:
    """The dimension a quantity ("1.79 pJ", "4 Gbps") is in, or None if it is none."""
    for dim in Dim:
        try:
            parse_quantity(quantity, dim)
        except ValueError:
            continue
        return dim
    return None


def _comments(path: str, cache: dict[str, list[str]]) -> list[str]:
    """Each line's comment of `path` (index = line - 1), an aligned comment-only line that follows
    a commented line added to it."""
    if path not in cache:
        lines = Path(path).read_text().splitlines()
        out = [""] * len(lines)
        for i, text in enumerate(lines):
            col = _comment_col(text)
            out[i] = text[col + 1 :].strip() if col >= 0 else ""
            j = i + 1
            while j < len(lines) and COMMENT.match(lines[j]) and col >= 0 and lines[j].index("#") == col:
                out[i] += " " + lines[j][col + 1 :].strip()
                j += 1
        cache[path] = out
    return cache[path]


def _comment_col(text: str) -> int:
    """Column of a valued line's comment (`key: value  # ...`), or -1 (a comment-only line has none)."""
    if COMMENT.match(text) or ":" not in text:
        return -1
    return text.find(" #") + 1 if " #" in text else -1


def _value(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


def _params(doc: YamlDoc) -> Iterable[tuple[tuple, str, int]]:
    """(key path, file, line) of each value on a line of its own (a flow mapping counts as one value;
    a section whose keys lie on their own lines does not)."""
    seen: set[tuple[str, int]] = set()
    for path, line in sorted(doc.lines.items(), key=lambda kv: len(kv[0])):
        if not path or line is None:
            continue
        file = doc.files.get(path, doc.path)
        if (file, line) in seen:
            continue
        seen.add((file, line))
        try:
            value = _value(doc.data, path)
        except (KeyError, IndexError, TypeError):  # a key the merge consumed (`extends`)
            continue
        if isinstance(value, dict) and any(doc.lines.get((*path, k)) != line for k in value):
            continue
        yield path, file, line


def stated(doc: YamlDoc) -> tuple[list[StatedRange], list[str]]:
    """The document's [EST] and [CAL] values that state a range, and the dotted keys of those that
    state none; ConfigError naming every malformed range (and fitted value without one) at its line."""
    ranged, unranged, problems = [], [], []
    cache: dict[str, list[str]] = {}
    for path, file, line in _params(doc):
        comments = _comments(file, cache)
        comment = comments[line - 1] if 0 < line <= len(comments) else ""
        is_cal, is_est = "[CAL]" in comment, "[EST" in comment
        if not (is_cal or is_est):
            continue
        key = ".".join(map(str, path))
        m = RANGE.search(comment)
        fitted = FITTED_ON.search(comment) if is_cal else None
        if m is None:
            if TRIED.search(comment):
                problems.append(Problem(file, line, key, "a stated range needs both ends: `range LOW-HIGH UNIT`"))
            elif fitted:
                problems.append(Problem(file, line, key, "a [CAL] value fitted on a set declares no range"))
            else:
                unranged.append(key)
            continue
        low, high, unit = m.group(1), m.group(2), m.group(3) or ""
        if unit and _dim_of(f"1 {unit}") is None:  # a word after the range, not its unit
            unit = ""
        if float(low) > float(high):
            problems.append(Problem(file, line, key, f"range {low}-{high} {unit}: its low end is above its high end"))
            continue
        sets = tuple(re.split(r",\s*|\s+and\s+", fitted.group(1))) if fitted else ()
        r = StatedRange(
            key, file, line, "CAL" if fitted or not is_est else "EST", sets,
            f"{low} {unit}".strip(), f"{high} {unit}".strip(), _value(doc.data, path),
        )  # fmt: skip
        ranged.append(r)
    if problems:
        raise ConfigError(problems)
    return ranged, unranged


SHARED_PREFIXES = (("chip.", ""), ("protocol.", "interconnect.protocols."))


def shared_key(path: str) -> str:
    """A transfer result's shared constant (`chip.overheads.kernel_s`, `protocol.ll.step_s`,
    `interconnect.link_latency_s`) as its chip file's dotted key (`overheads.kernel`,
    `interconnect.protocols.ll.step`, `interconnect.link_latency`)."""
    for old, new in SHARED_PREFIXES:
        if path.startswith(old):
            path = new + path[len(old) :]
    return re.sub(r"_(s|cycles)$", "", path)


def left_out(r: StatedRange, own_sets: Callable[[str], set[str]], shared: set[str], given: set[str]) -> str | None:
    """Why `r` does not count on this chip, or None where it does (module docstring)."""
    if r.key in given or any(r.key.startswith(g + ".") for g in given):
        return "set by --set"
    if r.tag != "CAL":
        return None
    if r.fitted_on and set(r.fitted_on) <= own_sets(r.file):
        return "fitted on this chip's own set: inside its measured error"
    if r.key in shared:
        return "a shared constant another chip's fit gives: what the transfer error measures"
    return None


@dataclass(frozen=True)
class Swing:
    """One parameter's times at the ends of its range, per named time."""

    range: StatedRange
    low_s: dict[str, float]
    high_s: dict[str, float]


def swing(p: float, t_lo: float, t_hi: float) -> tuple[float, float]:
    """(up, down) of a time predicted as p that is t_lo and t_hi at the range's ends."""
    return 1.0 - p / max(p, t_lo, t_hi), p / min(p, t_lo, t_hi) - 1.0


def combined(q: float, swings: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(q_low, q_high): the transfer q and the parameters' (up, down) swings, root-sum-square."""
    ups, downs = q * q, q * q
    for up, down in swings:
        ups += up * up
        downs += down * down
    return math.sqrt(downs), math.sqrt(ups)


def bounds(p: float, q_low: float, q_high: float) -> tuple[float, float]:
    """[p / (1 + q_low), p / (1 - q_high)] (high inf when q_high >= 1)."""
    return p / (1.0 + q_low), p / (1.0 - q_high) if q_high < 1.0 else math.inf


def swings_of(hardware: Any, counted: list[StatedRange], predict: Callable[[Any], dict[str, float]]) -> list[Swing]:
    """Each counted parameter's times at the ends of its range: `predict` of the hardware (an
    archsim.Hardware) with that one value set there; a range end the file's checks refuse is a
    ConfigError at the range's line."""
    out = []
    for r in counted:
        ends = []
        for end in (r.low, r.high):
            try:
                moved = hardware.with_params({r.key: r.at(end)}, "range")
            except ConfigError as err:
                raise r.problem(f"range end {end}: " + "; ".join(p.message for p in err.problems)) from None
            ends.append(predict(moved))
        out.append(Swing(r, ends[0], ends[1]))
    return out


def shared_keys(result: dict | None) -> set[str]:
    """The chip-file keys of the constants a stored transfer result carries from one chip to the
    other (`shared.values` of each direction)."""
    if not result:
        return set()
    return {shared_key(path) for d in result["directions"] for path in d["shared"]["values"]}


def parameter_swings(
    hardware: Any,
    predict: Callable[[Any], dict[str, float]],
    own_sets: Callable[[str], set[str]],
    shared: set[str],
    given: set[str],
    keys: Callable[[str], bool] = lambda key: True,
) -> tuple[list[Swing], dict]:
    """The swings of `predict`'s times over the ranges of the parameters that count on `hardware`
    (an archsim.Hardware read from a file; those `keys` admits), and a record of the parts: each
    counted parameter, each left out and why, and the tagged values that state no range.
    `own_sets` gives the sets measured on the chip of a file, `shared` the keys of the constants a
    transfer result carries between chips (`shared_keys`), `given` the keys the user set."""
    from archsim.config.loader import read_config

    if not Path(hardware.source).is_file():
        return [], {"parameters": [], "left_out": [], "unranged": []}
    ranged, unranged = stated(read_config(hardware.source, "hardware"))
    counted, dropped = [], []
    for r in ranged:
        if not keys(r.key):
            continue
        why = left_out(r, own_sets, shared, given)
        if why is None:
            counted.append(r)
        else:
            dropped.append({"key": r.key, "tag": r.tag, "why": why})
    notes = {
        "parameters": [
            {"key": r.key, "tag": r.tag, "range": [r.low, r.high], "fitted_on": list(r.fitted_on), "at": at(r)}
            for r in counted
        ],
        "left_out": dropped,
        "unranged": [k for k in unranged if keys(k)],
    }
    return swings_of(hardware, counted, predict), notes


def shown_path(file: str) -> str:
    """A file as output names it: relative to the checkout where it lies in it."""
    from archsim.config.loader import ROOT

    path = Path(file)
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def at(r: StatedRange) -> str:
    return f"{shown_path(r.file)}:{r.line}"
