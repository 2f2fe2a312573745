"""Which way each objective ranks: every name a sweep's objectives can read (run metrics and
design facts, archsim/sweep/metrics.py) declared once here with its direction and unit.

What a run delivers is maximised (tokens/s, tokens/J); what it costs is minimised (seconds,
joules, watts, bytes moved); so is what a design spends (die area, HBM, SRAM, MACs, bandwidth,
its power limit): a front trades those against what the run delivers. An input echoed back (the
scenario's batch, the KV length) or a true/false has no direction: it is nothing to rank.

An objective is an expression; its direction follows from its names (`objective_direction`):
a positive factor (a constant, a parameter or derived value, a name without a direction) keeps
the direction of what it scales (`tpot_s * 1000`, `decode_tokens_per_s / (mac_units / 1e6)`); a
quotient of a quantity to maximise by one to minimise is maximised (`decode_tokens_per_s /
power_w`); a monotone function keeps it (`log(x)`). Where the names disagree (`ttft_s *
decode_tokens_per_s`) or say nothing (`mac_units`), the spec says which way it ranks
(`{expr: ..., goal: maximize}`), and a spec whose `goal` contradicts its names is refused.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Mapping
from dataclasses import dataclass

from archsim.sweep.expr import UNIT_CONSTANTS, Expr


class Direction(enum.Enum):
    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"

    @property
    def sign(self) -> int:
        return 1 if self is Direction.MAXIMIZE else -1


@dataclass(frozen=True)
class Objective:
    """One objective of a spec: its expression and the way it ranks (a sweep's workers get these,
    so they live here, apart from the spec's loading and its schemas)."""

    name: str
    expr: Expr
    direction: Direction
    unit: str | None = None

    @property
    def maximize(self) -> bool:
        return self.direction is Direction.MAXIMIZE


MAX, MIN = Direction.MAXIMIZE, Direction.MINIMIZE


@dataclass(frozen=True)
class Declared:
    direction: Direction | None  # None: not something to rank (an input, a true/false)
    unit: str
    why: str = ""  # for a name without a direction: what it is


def _inputs(names: list[str], unit: str, why: str) -> dict[str, Declared]:
    return {n: Declared(None, unit, why) for n in names}


_CAUSES = "time_by_cause_s.*"  # a part of a time: the seconds of one cause
_UNITS = "by_unit.*"  # a part of an energy: the joules of one unit
_PHASES = ("prefill", "decode")

# A `*` stands for one part of a dotted name; every name matches exactly one entry (tests check).
DECLARED: dict[str, Declared] = {
    # what a run delivers and costs
    "ttft_s": Declared(MIN, "s"),
    "tpot_s": Declared(MIN, "s"),
    "total_time_s": Declared(MIN, "s"),
    "decode_tokens_per_s": Declared(MAX, "tokens/s"),
    "throughput_tokens_per_s": Declared(MAX, "tokens/s"),
    _CAUSES: Declared(MIN, "s"),
    **{f"{p}.{_CAUSES}": Declared(MIN, "s") for p in _PHASES},
    **{f"{p}.time_s": Declared(MIN, "s") for p in _PHASES},
    **{f"{p}.hbm_bytes": Declared(MIN, "B") for p in _PHASES},
    "memory.*": Declared(MIN, "B"),
    "energy_j": Declared(MIN, "J"),
    "power_w": Declared(MIN, "W"),
    "peak_power_w": Declared(MIN, "W"),
    "tokens_per_j": Declared(MAX, "tokens/J"),
    "decode_tokens_per_j": Declared(MAX, "tokens/J"),
    "decode_j_per_token": Declared(MIN, "J/token"),
    "energy.energy_j": Declared(MIN, "J"),
    "energy.chip_energy_j": Declared(MIN, "J"),
    "energy.decode_energy_j": Declared(MIN, "J"),
    "energy.average_power_w": Declared(MIN, "W"),
    "energy.peak_power_w": Declared(MIN, "W"),
    "energy.decode_power_w": Declared(MIN, "W"),
    "energy.tokens_per_j": Declared(MAX, "tokens/J"),
    "energy.decode_tokens_per_j": Declared(MAX, "tokens/J"),
    "energy.decode_j_per_token": Declared(MIN, "J/token"),
    f"energy.{_UNITS}": Declared(MIN, "J"),
    f"energy.*.{_UNITS}": Declared(MIN, "J"),
    "energy.*.energy_j": Declared(MIN, "J"),
    "energy.*.average_power_w": Declared(MIN, "W"),
    "energy.*.peak_power_w": Declared(MIN, "W"),
    "energy.*.time_s": Declared(MIN, "s"),
    "area.decode_tokens_per_s_per_mm2": Declared(MAX, "tokens/s/mm2"),
    # what a design spends
    "area_mm2": Declared(MIN, "mm2"),
    "area.die_mm2": Declared(MIN, "mm2"),
    "area.by_block_mm2.*": Declared(MIN, "mm2"),
    "area.dies": Declared(MIN, "dies"),
    "dies": Declared(MIN, "dies"),
    "energy.chips": Declared(MIN, "chips"),
    "energy.limit_w": Declared(MIN, "W"),
    "power_limit_w": Declared(MIN, "W"),
    "hbm_capacity_bytes": Declared(MIN, "B"),
    "hbm_peak_bytes_per_s": Declared(MIN, "B/s"),
    "macs_per_cycle": Declared(MIN, "MAC/cycle"),
    "peak_bf16_flops_per_s": Declared(MIN, "FLOP/s"),
    "sram_bytes": Declared(MIN, "B"),
    "sram_total_bytes": Declared(MIN, "B"),
    "l2_bytes": Declared(MIN, "B"),
    # what the scenario needs of the design's memory
    "footprint_bytes": Declared(MIN, "B"),
    "weights_bytes": Declared(MIN, "B"),
    "kv_cache_bytes": Declared(MIN, "B"),
    "activations_bytes": Declared(MIN, "B"),
    "largest_batch": Declared(MAX, "sequences"),
    # nothing to rank
    **_inputs(["scenario.*", "generated_tokens"], "tokens", "an input of the run (the scenario's)"),
    **_inputs(
        [f"{p}.{f}" for p in _PHASES for f in ("batch", "new_tokens", "kv_len")], "tokens", "an input of the step"
    ),
    **_inputs(
        [f"{p}.flops" for p in _PHASES], "FLOP", "the arithmetic the workload asks for, the same on every design"
    ),
    "area.reticle_mm2": Declared(None, "mm2", "the reticle limit, the same for every design"),
    **_inputs(["fits_hbm", "fits_reticle", "area.fits_reticle", "interrupted"], "", "true or false: a constraint"),
}


def _tree(text: str) -> ast.AST:
    return ast.parse(text, mode="eval").body  # a checked expression (archsim.sweep.expr.parse_expr)


def _matches(pattern: str, name: str) -> bool:
    parts, want = name.split("."), pattern.split(".")
    return len(parts) == len(want) and all(w in ("*", p) for w, p in zip(want, parts, strict=True))


def declared(name: str) -> Declared | None:
    """The declaration of a run metric or design fact (None for any other name)."""
    if name in DECLARED:
        return DECLARED[name]
    return next((d for pattern, d in DECLARED.items() if "*" in pattern and _matches(pattern, name)), None)


class _Unranked(Exception):
    """An expression whose direction its names do not tell: why."""


@dataclass(frozen=True)
class _Sense:
    direction: int  # +1 maximised, -1 minimised, 0 none (a positive or negative factor)
    sign: int = 1  # of a factor without a direction
    constant: bool = False
    names: tuple[str, ...] = ()  # the names with a direction it follows from

    def flipped(self) -> _Sense:
        return _Sense(-self.direction, -self.sign if not self.direction else 1, self.constant, self.names)


def objective_direction(text: str, known: Mapping[str, Direction]) -> tuple[Direction, tuple[str, ...]]:
    """The direction of an objective's expression from its names (`known`: earlier objectives),
    with the names it follows from; ValueError saying why when its names do not tell it."""
    try:
        sense = _sense(_tree(text), known)
    except _Unranked as why:
        raise ValueError(str(why)) from None
    if not sense.direction:
        raise ValueError(_undirected(text))
    return (MAX if sense.direction > 0 else MIN), sense.names


def _undirected(text: str) -> str:
    node = _tree(text)
    name = node.id if isinstance(node, ast.Name) else ast.unparse(node) if isinstance(node, ast.Attribute) else None
    d = declared(name) if name else None
    if d is not None and d.why:
        return f"{name} is {d.why}, nothing to rank"
    return "it reads nothing with a direction (parameters, derived values and constants have none)"


def _sense(node: ast.AST, known: Mapping[str, Direction]) -> _Sense:
    if (value := _number(node)) is not None:
        return _Sense(0, 1 if value >= 0 else -1, True)
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = ast.unparse(node)
        if name in UNIT_CONSTANTS:
            return _Sense(0, 1, True)
        direction = known.get(name) or (d.direction if (d := declared(name)) else None)
        return _Sense(direction.sign, names=(name,)) if direction else _Sense(0)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _sense(node.operand, known)
        return inner.flipped() if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        left, right = _sense(node.left, known), _sense(node.right, known)
        return _product(left, right.flipped() if isinstance(node.op, ast.Div) and right.direction else right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left, right = _sense(node.left, known), _sense(node.right, known)
        return _same(left, right.flipped() if isinstance(node.op, ast.Sub) else right, "a sum")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, power = _sense(node.left, known), _number(node.right)
        if power:
            return base if power > 0 else base.flipped()
        raise _Unranked("a power whose exponent is not a number")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        name = node.func.id
        if name in ("sqrt", "log", "log2", "log10", "exp", "ceil", "floor", "round"):  # increasing
            return _sense(node.args[0], known)
        if name in ("min", "max"):
            senses = [_sense(a, known) for a in node.args]
            out = senses[0]
            for s in senses[1:]:
                out = _same(out, s, f"{name}()")
            return out
    raise _Unranked(f"{ast.unparse(node)!r} ranks no one way")


def _number(node: ast.AST) -> float | None:
    """The value of a constant (parse_expr lets numbers only through), None for anything else."""
    ok = isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
    return float(node.value) if ok else None  # type: ignore[attr-defined]


def _product(a: _Sense, b: _Sense) -> _Sense:
    """A product: a factor without a direction scales the other (a negative one turns it)."""
    if a.direction and b.direction:
        if a.direction != b.direction:
            raise _Unranked(f"{_one(a)} and {_one(b)} rank opposite ways in a product or quotient")
        return _Sense(a.direction, names=a.names + b.names)
    if a.direction or b.direction:
        ranked, factor = (a, b) if a.direction else (b, a)
        return _Sense(ranked.direction * factor.sign, names=ranked.names)
    return _Sense(0, a.sign * b.sign, a.constant and b.constant)


def _same(a: _Sense, b: _Sense, what: str) -> _Sense:
    """A sum (or min, max): its terms must rank the same way, or be constants."""
    if a.direction and b.direction and a.direction != b.direction:
        raise _Unranked(f"{_one(a)} and {_one(b)} rank opposite ways in {what}")
    for ranked, other in ((a, b), (b, a)):
        if ranked.direction and not other.direction and not other.constant:
            raise _Unranked(f"{what} of {_one(ranked)} and a value without a direction")
    if a.direction or b.direction:
        return _Sense(a.direction or b.direction, names=a.names + b.names)
    return _Sense(0, a.sign if a.sign == b.sign else 1, a.constant and b.constant)


def _one(s: _Sense) -> str:
    return f"{s.names[0]} ({'max' if s.direction > 0 else 'min'})" if s.names else "a term"
