"""Arithmetic expressions of a sweep spec (derived values, constraints, objectives), made safe.

An expression is a Python expression over numbers, names and a few functions: `+ - * / // % **`,
comparisons, `and or not`, `x if c else y`, and `min max abs round ceil floor sqrt log log2
log10 exp`. Anything else (attributes, subscripts, lambdas, comprehensions, keyword arguments) is
refused when the spec is read, and every name must be one the spec defines at that point, so a
typo is a located error before a single point runs. Unit constants (`KiB`, `GB`, `GHz`, `ns`,
...) stand for their value in canonical units: `48 * MiB`, `1.2 * GHz`.

Evaluation is bounded in time and size: an expression is at most MAX_EXPR_CHARS long and
MAX_EXPR_DEPTH deep, no whole number inside it may grow past MAX_EXPR_INT_BITS bits (a power is
checked before it is computed, so `9**9**9` or `(10**1000)**1000` is refused at once), and
`round` takes at most MAX_ROUND_DIGITS digits.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from archsim.limits import MAX_EXPR_CHARS, MAX_EXPR_DEPTH, MAX_EXPR_INT_BITS
from archsim.sweep.sampling import Value  # what a name stands for: a number, a flag, or a name

MAX_EXPONENT = 1024  # `2 ** 10 ** 10` would hang the worker; no design quantity needs more
MAX_ROUND_DIGITS = 400  # beyond a float's range either way

UNIT_CONSTANTS: dict[str, float] = {
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
    "TiB": 2.0**40,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "kHz": 1e3,
    "MHz": 1e6,
    "GHz": 1e9,
    "ps": 1e-12,
    "ns": 1e-9,
    "us": 1e-6,
    "ms": 1e-3,
}

FUNCTIONS: dict[str, Callable] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "exp": math.exp,
}


def _no_power(left: Value, right: Value) -> str:
    """Python's own complaint about a power with a name (text) for an operand."""
    return f"unsupported operand type(s) for ** or pow(): {type(left).__name__!r} and {type(right).__name__!r}"


def _power(left: Value, right: Value) -> Value:
    """`left ** right`, refused before it is computed if the result would be too large or not real."""
    if isinstance(right, str):
        raise TypeError(_no_power(left, right))
    if abs(right) > MAX_EXPONENT:
        raise ValueError(f"exponent {right} is beyond +-{MAX_EXPONENT}")
    if isinstance(left, str):
        raise TypeError(_no_power(left, right))
    if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        bits = (abs(left).bit_length() - 1) * right
        if bits > MAX_EXPR_INT_BITS:
            raise ValueError(f"the power would have about {bits:,} bits (more than {MAX_EXPR_INT_BITS:,})")
    out = left**right
    if isinstance(out, complex):
        raise ValueError(f"{left!r} ** {right!r} is not a real number")
    return out


_BINARY: dict[type[ast.operator], Callable[[Value, Value], Value]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY = (ast.USub, ast.UAdd, ast.Not)
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


class ExprError(ValueError):
    """An expression that cannot be read or uses a name that is not defined."""


@dataclass(frozen=True)
class Expr:
    """A checked expression: its text and the names it reads."""

    text: str
    names: frozenset[str]

    def evaluate(self, env: Mapping[str, Value]) -> Value:
        """The value with `env` (plus unit constants and functions) for its names."""
        return _eval(_tree(self.text), env)


@lru_cache(maxsize=1024)
def _tree(text: str) -> ast.AST:
    return ast.parse(text, mode="eval").body


def parse_expr(text: object, known: set[str] | frozenset[str]) -> Expr:
    """Check `text` (syntax, allowed constructs, every name in `known` or a unit constant)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ExprError(f"expected an expression (got {text!r:.60})")
    source = str(text).strip()
    if len(source) > MAX_EXPR_CHARS:
        raise ExprError(f"an expression may be at most {MAX_EXPR_CHARS:,} characters (got {len(source):,})")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as err:
        raise ExprError(f"not a valid expression: {err.msg} (got {source!r:.60})") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"nested more than {MAX_EXPR_DEPTH} deep") from None
    if _depth(tree) > MAX_EXPR_DEPTH:
        raise ExprError(f"nested more than {MAX_EXPR_DEPTH} deep (write it in steps with derived values)")
    names: set[str] = set()
    _check(tree, names)
    unknown = sorted(n for n in names if n not in known and n not in UNIT_CONSTANTS)
    if unknown:
        options = sorted(set(known) | set(UNIT_CONSTANTS))
        hint = difflib.get_close_matches(unknown[0], options, n=1)
        raise ExprError(
            f"unknown name {unknown[0]!r}"
            + (f"; did you mean {hint[0]!r}?" if hint else f"; known here: {', '.join(sorted(known)) or 'none'}")
        )
    return Expr(source, frozenset(names))


_ALLOWED = (
    (
        ast.Expression,
        ast.BinOp,
        ast.UnaryOp,
        ast.BoolOp,
        ast.Compare,
        ast.IfExp,
        ast.Constant,
        ast.Load,
        ast.And,
        ast.Or,
    )
    + tuple(_BINARY)
    + _UNARY
    + tuple(_COMPARE)
)


def dotted_name(node: ast.AST) -> str | None:
    """`prefill.time_s` (an attribute chain on a name) as one dotted name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _check(node: ast.AST, names: set[str]) -> None:
    """Refuse what an expression may not contain; collect the (dotted) names it reads."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted_name(node)
        if name is None:
            raise ExprError(f"{ast.unparse(node)!r} is not a name")
        if name in FUNCTIONS:
            raise ExprError(f"{name!r} is a function: call it, e.g. {name}(x)")
        names.add(name)
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExprError(f"unknown function {ast.unparse(node.func)!r}; allowed: {', '.join(sorted(FUNCTIONS))}")
        if node.keywords:
            raise ExprError(f"{node.func.id}() takes no keyword arguments")
        for arg in node.args:
            _check(arg, names)
        return
    if not isinstance(node, _ALLOWED):
        raise ExprError(f"{type(node).__name__.lower()} is not allowed in an expression")
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):  # bools are ints
        raise ExprError(f"only numbers are allowed as constants (got {node.value!r:.40})")
    for child in ast.iter_child_nodes(node):
        _check(child, names)


def _depth(tree: ast.AST) -> int:
    """Depth of the syntax tree, without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _sized(value: Value) -> Value:
    """`value`, or ValueError if it is a whole number of more than MAX_EXPR_INT_BITS bits."""
    if isinstance(value, int) and value.bit_length() > MAX_EXPR_INT_BITS:
        raise ValueError(f"a whole number of {value.bit_length():,} bits (more than {MAX_EXPR_INT_BITS:,})")
    return value


def _call(name: str, args: list[Value]) -> Value:
    if name == "round" and len(args) > 1 and isinstance(args[1], int) and abs(args[1]) > MAX_ROUND_DIGITS:
        raise ValueError(f"round takes at most {MAX_ROUND_DIGITS} digits (got {args[1]})")
    return FUNCTIONS[name](*args)


def _eval(node: ast.AST, env: Mapping[str, Value]) -> Value:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):  # the only constants allowed
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted_name(node)
        if name is not None and name in env:
            return env[name]
        if name is not None and name in UNIT_CONSTANTS:
            return UNIT_CONSTANTS[name]
        raise ExprError(f"{name} is not known for this point")
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(left, str) or isinstance(right, str):  # names are joined by + at most
            if not (isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str)):
                raise TypeError(f"a name (text) cannot be an operand of {type(node.op).__name__.lower()}")
            if len(left) + len(right) > MAX_EXPR_CHARS:
                raise ValueError(f"the joined name would have {len(left) + len(right):,} characters")
        return _sized(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not operand
        sign = "-" if isinstance(node.op, ast.USub) else "+"
        if isinstance(operand, str):  # a name standing for a name (a file, a mode), not a number
            raise TypeError(f"bad operand type for unary {sign}: 'str'")
        return -operand if sign == "-" else +operand
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # a call of a listed function: checked
        return _sized(_call(node.func.id, [_eval(a, env) for a in node.args]))
    raise ExprError(f"{type(node).__name__} is not allowed")  # unreachable: checked at parse time
