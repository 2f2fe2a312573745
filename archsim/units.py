"""Quantities with units: "4.8 TB/s" -> 4.8e12 bytes/s, "60 MiB" -> 62914560 bytes.

Metric prefixes (k, M, G, T, P) are powers of 1000 and binary prefixes (Ki, Mi, Gi, Ti) powers
of 1024, as in IEC 80000-13. Every parsed value is returned in the canonical unit of its
dimension: bytes, bytes/s, Hz, seconds, clock cycles (`cycles`, of the clock of the unit that
spends them), FLOP/s, joules, watts, volts, and square millimetres for
areas (`mm2` or `mm²`, `um2`; an area per byte as `mm2/MiB`), the unit die sizes are quoted in. A value in the wrong dimension (`GB/s` where a
capacity is due) is refused with a message that quotes it.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from functools import lru_cache

from archsim.errors import quote

METRIC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
SUB = {"": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9, "p": 1e-12}


def ceil_div(a, b):
    """ceil(a / b) of whole numbers (ints or integer numpy arrays), exact: -(-a // b)."""
    return -(-a // b)


class Dim(str, Enum):
    """The physical dimension a config field is measured in."""

    BYTES = "bytes"
    BYTES_PER_S = "bytes/s"
    HZ = "Hz"
    SECONDS = "s"
    FLOPS = "FLOP/s"
    BITS_PER_S = "bit/s"
    JOULES = "J"
    JOULES_PER_BYTE = "J/B"
    JOULES_PER_BIT = "J/bit"
    WATTS = "W"
    VOLTS = "V"
    AREA = "mm2"
    AREA_PER_BYTE = "mm2/B"
    CYCLES = "cycles"


_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_PATTERN = re.compile(rf"^\s*{_NUMBER}\s*((?:[A-Za-zµ][A-Za-zµ/²2]*)?)\s*$")

# unit suffix -> (dimension, scale of the bare unit)
_BASE_UNITS: dict[str, tuple[Dim, float]] = {
    "cycles": (Dim.CYCLES, 1.0),
    "B": (Dim.BYTES, 1.0),
    "B/s": (Dim.BYTES_PER_S, 1.0),
    "Hz": (Dim.HZ, 1.0),
    "s": (Dim.SECONDS, 1.0),
    "FLOP/s": (Dim.FLOPS, 1.0),
    "FLOPS": (Dim.FLOPS, 1.0),
    "bps": (Dim.BITS_PER_S, 1.0),
    "b/s": (Dim.BITS_PER_S, 1.0),
    "J/bit": (Dim.JOULES_PER_BIT, 1.0),
    "J/B": (Dim.JOULES_PER_BYTE, 1.0),
    "J": (Dim.JOULES, 1.0),
    "W": (Dim.WATTS, 1.0),
    "V": (Dim.VOLTS, 1.0),
}
# areas: a length unit squared, in mm2 (no further prefixes: 'kmm2' means nothing)
_AREA_UNITS: dict[str, float] = {"mm2": 1.0, "mm²": 1.0, "um2": 1e-6, "um²": 1e-6, "µm2": 1e-6, "µm²": 1e-6}
# dimensions whose prefixes are the sub-unit ones (ns, pJ, mV): small quantities
_SUB_PREFIXED = frozenset({Dim.SECONDS, Dim.JOULES, Dim.JOULES_PER_BYTE, Dim.JOULES_PER_BIT})


@lru_cache(maxsize=256)  # a sweep's points parse the same few units some 50 times each
def _split_unit(unit: str) -> tuple[float, Dim] | None:
    """Return (scale, dimension) for a unit such as 'GiB', 'TB/s', 'ns', 'mm2', 'mm2/MiB', or
    None if unknown."""
    if unit in _AREA_UNITS:
        return _AREA_UNITS[unit], Dim.AREA
    area, slash, per = unit.partition("/")
    if slash and area in _AREA_UNITS:
        bytes_unit = _split_unit(per) if per.endswith("B") else None
        if bytes_unit is None or bytes_unit[1] is not Dim.BYTES:
            return None
        return _AREA_UNITS[area] / bytes_unit[0], Dim.AREA_PER_BYTE
    for base, (dim, scale) in _BASE_UNITS.items():
        if not unit.endswith(base):
            continue
        prefix = unit[: len(unit) - len(base)]
        if dim in _SUB_PREFIXED:
            table = SUB
        elif dim in (Dim.WATTS, Dim.VOLTS):
            table = {**SUB, **METRIC}
        else:
            table = {**METRIC, **BINARY}
        if prefix in table:
            return table[prefix] * scale, dim
    return None


PREFIX_RULE = "metric prefixes k M G T P are powers of 1000 (kB = 1000 B), binary Ki Mi Gi Ti Pi of 1024 (KiB = 1024 B)"


def _prefix_hint(unit: str) -> str:
    """The prefix rule, when `unit` is a known unit with a prefix in the wrong case ('kiB', 'mb')."""
    for base in _BASE_UNITS:
        if unit.lower().endswith(base.lower()) and len(unit) > len(base):
            prefix = unit[: len(unit) - len(base)].lower()
            if prefix in {p.lower() for p in (*METRIC, *BINARY, *SUB) if p}:
                return f"; {PREFIX_RULE}"
    return ""


def parse_quantity(value: object, dim: Dim) -> float:
    """Parse `value` ("4.8 TB/s", "60 MiB", "1.98 GHz", "700 ns") into the canonical unit of `dim`.

    A bare number is refused: every physical value in a config carries its unit.
    Raises ValueError with a message that quotes the value.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected a quantity in {dim.value} such as {example(dim)} (got {quote(value)})")
    if not isinstance(value, str):
        raise ValueError(f"a unit is required, e.g. {example(dim)} (got {quote(value)})")
    match = _PATTERN.match(value)
    if not match:
        raise ValueError(f"not a quantity; expected e.g. {example(dim)} (got {quote(value)})")
    number, unit = float(match.group(1)), match.group(2)
    if not math.isfinite(number):
        raise ValueError(f"number out of range; expected e.g. {example(dim)} (got {quote(value)})")
    if not unit:
        raise ValueError(f"a unit is required, e.g. {example(dim)} (got {quote(value)})")
    parsed = _split_unit(unit)
    if parsed is None:
        raise ValueError(
            f"unknown unit {unit!r}; expected e.g. {example(dim)}{_prefix_hint(unit)} (got {quote(value)})"
        )
    scale, got_dim = parsed
    if got_dim is Dim.BITS_PER_S and dim is Dim.BYTES_PER_S:
        scale /= 8.0
    elif got_dim is not dim:
        raise ValueError(f"unit {unit!r} is {got_dim.value}, but {dim.value} is due (got {quote(value)})")
    if not math.isfinite(number * scale):
        raise ValueError(f"number out of range; expected e.g. {example(dim)} (got {quote(value)})")
    return number * scale


def example(dim: Dim) -> str:
    """A sample value of the dimension, for error messages."""
    return {
        Dim.BYTES: "'60 MiB'",
        Dim.BYTES_PER_S: "'4.8 TB/s'",
        Dim.HZ: "'1.98 GHz'",
        Dim.SECONDS: "'700 ns'",
        Dim.FLOPS: "'989 TFLOP/s'",
        Dim.BITS_PER_S: "'6.4 Gbps'",
        Dim.JOULES: "'0.4 pJ'",
        Dim.JOULES_PER_BYTE: "'30 pJ/B'",
        Dim.JOULES_PER_BIT: "'3.9 pJ/bit'",
        Dim.WATTS: "'700 W'",
        Dim.VOLTS: "'0.9 V'",
        Dim.AREA: "'814 mm2'",
        Dim.AREA_PER_BYTE: "'0.7 mm2/MiB'",
        Dim.CYCLES: "'3880 cycles'",
    }[dim]


def format_bytes(n: float) -> str:
    """Human-readable bytes with decimal prefixes ('16.1 GB'); beyond exabytes in powers of ten."""
    if abs(n) >= 1e21:
        return f"{n:.3g} B"
    for unit, scale in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{n:.0f} B"


def sig3(x: float) -> str:
    """`x` to 3 significant figures, trailing zeros kept: 4.9965 -> '5.00', 12.34 -> '12.3', 850 -> '850'."""
    text = f"{x:#.3g}"
    return text[:-1] if text.endswith(".") else text


def format_seconds(t: float) -> str:
    """A time to 3 significant figures: '5.00 ms', '12.3 ms', '850 us', '1,235 s' (what rounds
    to 1.00 of a unit is shown in it: 0.9996 s is '1.00 s')."""
    if abs(t) >= 999.5:
        return f"{t:,.0f} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(t) >= scale * 0.9995:
            return f"{sig3(t / scale)} {unit}"
    return f"{sig3(t * 1e9)} ns" if t else "0 s"


def format_rate(x: float, unit: str) -> str:
    """Human-readable rate ('4.5 TB/s', '712 TFLOP/s')."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"
