"""A hardware parameter, declared once: on the field of the frozen record that holds it.

    channels_per_stack: int = param("channels_per_stack", "PositiveInt", "channels of one stack", source="[JEDEC]")

says everything there is to say about it: the key a chip file gives it under the record's section,
how the file's value is read (`unit`: the name of a type in archsim/config/fields.py, which parses
'6.4 Gbps' and checks its bounds), what it means, its default (the field's), and which source tags
a chip file's comment usually gives its value ([DS] datasheet, [WP] whitepaper, [JEDEC] the
standard, [DQ] a device query, [CAL] fitted to measurements (only a value nobody can measure, its
line declaring its physical range: tools/calibrate.py), [EST] an estimate with its reasoning;
tests/test_configs.py checks that every value of a real chip states one).

From these declarations the config schema builds a section's pydantic model
(archsim/config/declared.py), and `from_section` builds the record from the validated section,
field by field: a value read into an `int` field (a byte count) is rounded to a whole number, and a
key the file may leave out (`omittable`: its resolved value is null) takes the field's default.
This module imports no pydantic, so records rebuilt from the config memo need none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

PARAM = "archsim.param"  # the key of a Param in a dataclass field's metadata


@dataclass(frozen=True)
class Param:
    """How a chip file gives one field of a hardware record."""

    key: str  # its key in the record's section of a chip file
    unit: str  # a type of archsim/config/fields.py: how the file's value is read and bounded
    description: str  # what it is, for the schema and the docs
    source: str = ""  # the tags a chip file's comment usually gives it ([DS], [JEDEC], [CAL], ...)
    omittable: bool = False  # the file may leave it out, resolving to null: the record takes the field's default


def param(
    key: str, unit: str, description: str, default: Any = MISSING, *, source: str = "", omittable: bool = False
) -> Any:
    """A dataclass field declared as a chip file's parameter (see the module docstring)."""
    return field(default=default, metadata={PARAM: Param(key, unit, description, source, omittable)})


def declared(record: type) -> list[tuple[Field, Param]]:
    """The fields of `record` that a chip file gives, in the order of the record (and the file's section)."""
    return [(f, f.metadata[PARAM]) for f in fields(record) if PARAM in f.metadata]


@dataclass(frozen=True)
class Check:
    """A rule between a section's values, checked as the file is validated: `rule(value, earlier)`
    returns why `key`'s value is wrong (None if it is not), `earlier` holding the values of the
    keys declared before it."""

    key: str
    rule: Callable[[Any, dict[str, Any]], str | None]


def from_section(record: type, section: Any, **extra: Any) -> Any:
    """The record of a validated section: each declared field from its key (rounded to a whole
    number for an `int` field; the field's default for an omitted optional key), then `extra`."""
    values = {}
    for f, p in declared(record):
        value = getattr(section, p.key)
        if value is None and p.omittable:
            continue
        values[f.name] = round(value) if f.type in ("int", int) and isinstance(value, float) else value
    return record(**values, **extra)
