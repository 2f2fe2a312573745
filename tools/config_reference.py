"""Write docs/configuration_reference.md: every key of a chip file and of a workload file, with
its type or unit, default and description, read from the schemas that validate the files, so the
reference cannot drift from what archsim accepts (tests/test_docs.py checks it is current).

    python3 tools/config_reference.py          # rewrite the page
    python3 tools/config_reference.py --check  # exit 1 if the page is not current
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from archsim.config import fields as units
from archsim.config.declared import memory_section
from archsim.config.hw_schema import HardwareCfg
from archsim.config.workload_schema import WorkloadCfg
from archsim.hardware import memory_models

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration_reference.md"


# How a reader writes a value of each of archsim/config/fields.py's types.
_WORDS = {
    "Bytes": "bytes (`80 GiB`)",
    "BytesPerS": "bytes/s (`4.8 TB/s`)",
    "BitsPerS": "bits/s (`400 Gbps`)",
    "PinRate": "bits/s per pin (`6.4 Gbps`)",
    "ClockHz": "Hz (`1.98 GHz`)",
    "Hertz": "Hz",
    "Seconds": "seconds (`250 ns`)",
    "SecondsOrZero": "seconds, or 0",
    "CyclesOrZero": "clock cycles (`3881 cycles`), or 0",
    "Joules": "joules (`0.3 pJ`)",
    "JoulesOrZero": "joules, or 0",
    "JoulesPerByte": "joules/byte (`2 pJ/B`)",
    "JoulesPerBit": "joules/bit (`0.5 pJ/bit`)",
    "Watts": "watts (`700 W`)",
    "WattsOrZero": "watts, or 0",
    "Volts": "volts (`0.9 V`)",
    "AreaMm2": "mm² (`0.5 mm2`)",
    "AreaMm2OrZero": "mm², or 0",
    "AreaMm2PerByte": "mm²/byte",
    "PositiveInt": "integer > 0",
    "NonNegativeInt": "integer ≥ 0",
    "CoreCount": "integer, 1 to 2²⁰",
    "StrictInt": "integer",
    "Flag": "true or false",
    "StrictBool": "true or false",
    "Name": "text",
}
# A unit type is known by its first validator object, which each alias holds once.
_UNIT_OF = {
    id(typing.get_args(alias)[1]): name
    for name in _WORDS
    if get_origin(alias := getattr(units, name)) is typing.Annotated
}
_PLAIN = {int: "integer", float: "number", str: "text", bool: "true or false"}


def _unit(metadata: Any) -> str | None:
    return next((_WORDS[_UNIT_OF[id(m)]] for m in metadata if id(m) in _UNIT_OF), None)


def _type_name(annotation: Any, metadata: Any = ()) -> str:
    """A field's type as a reader writes it: its unit with an example (`bytes (80 GiB)`), the
    allowed words of a choice, `list of ...`, `mapping ...`, `section` for a nested section."""
    unit = _unit(metadata)
    if unit:
        return unit
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        args = get_args(annotation)
        return _unit(args[1:]) or _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in get_args(annotation) if a is not type(None)]
        return " or ".join(parts)
    if origin in (list, tuple):
        return "list of " + ", ".join(_type_name(a) for a in get_args(annotation) if a is not Ellipsis)
    if origin is dict:
        key, value = get_args(annotation)
        return f"mapping {_type_name(key)} → {_type_name(value)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return _PLAIN.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _sections(annotation: Any) -> list[type[BaseModel]]:
    """The sections (models) a field's annotation holds, through optional, list and mapping types."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _sections(arg)]


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "—"
    if isinstance(value, BaseModel):
        return "each key's own"
    if value == "":
        return '`""`'
    return f"`{value}`"


def rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted key, type, default, description) of every key below `model`, depth first."""
    out = []
    for key, field in model.model_fields.items():
        name = field.alias or key
        path = f"{prefix}{name}"
        description = " ".join((field.description or "").split()).replace("|", "\\|")
        out.append((path, _type_name(field.annotation, field.metadata), _default(field), description))
        for section in _sections(field.annotation):
            out += rows(section, f"{path}.")
    return out


def _table(model: type[BaseModel], prefix: str = "") -> str:
    lines = ["| key | type or unit | default | what it is |", "|---|---|---|---|"]
    lines += [f"| `{k}` | {t} | {d} | {why} |" for k, t, d, why in rows(model, prefix)]
    return "\n".join(lines) + "\n"


def page() -> str:
    parts = [
        "# Configuration reference\n\n"
        "Every key of a chip file (`hw_configs/*.yaml`) and of a workload file (`workloads/*.yaml`), "
        "as the schemas that validate them declare it: its type or unit (a quantity is written with "
        "its unit, `80 GiB`, `4.8 TB/s`, `1.98 GHz`), its default (required: the file must give it; "
        "—: optional, left out unless given) and what it is. Generated by "
        "`python3 tools/config_reference.py` from the schemas' descriptions; "
        "[configuration.md](configuration.md) explains how the keys work together.\n",
        "\n## Chip files\n\n" + _table(HardwareCfg),
    ]
    for name in memory_models.names():
        parts.append(
            f"\n### Main memory model `{name}`\n\n"
            f"The keys of `hbm:` when it says `model: {name}`"
            f"{' (the default)' if name == 'hbm' else ''}.\n\n" + _table(memory_section(name), "hbm.")
        )
    parts.append("\n## Workload files\n\n" + _table(WorkloadCfg))
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is not current")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.name} is not current: run python3 tools/config_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
