"""Hardware parameters declared once (archsim/hardware/params.py): every key of a chip file has a
description, every declared field a unit the schema knows, and the conversion from a validated
section to the frozen record is by declaration (rounding, defaults)."""

from dataclasses import dataclass
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from archsim.config import fields as units
from archsim.config.declared import memory_section, section_model
from archsim.config.hw_schema import HardwareCfg
from archsim.hardware import memory_models
from archsim.hardware.chip import L2, HostLink, Noc, Overheads, Sram, VectorUnit
from archsim.hardware.params import declared, from_section, param
from archsim.hardware.power import Energies, Power

RECORDS = [VectorUnit, Sram, L2, Noc, Overheads, HostLink, Power, Energies] + [
    memory_models.record(n) for n in memory_models.names()
]


def _models(model: Any) -> list[type[BaseModel]]:
    """`model` and every model below it (through optional, list and mapping types)."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return [m for arg in get_args(model) for m in _models(arg)]
    return [model] + [m for f in model.model_fields.values() for m in _models(f.annotation)]


def undescribed(model: type[BaseModel]) -> list[str]:
    """`Model.key` of every field below `model` without a description."""
    return [f"{m.__name__}.{k}" for m in _models(model) for k, f in m.model_fields.items() if not f.description]


def test_every_key_of_a_chip_file_has_a_description():
    sections = [HardwareCfg] + [memory_section(n) for n in memory_models.names()]
    assert [k for s in sections for k in undescribed(s)] == []


def test_a_key_without_a_description_is_found():
    """The check above can fail: a declared field with an empty description is reported."""

    @dataclass(frozen=True, kw_only=True)
    class Made:
        size_bytes: int = param("size", "Bytes", "")

    assert undescribed(section_model(Made, "MadeCfg")) == ["MadeCfg.size"]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_declared_field_has_a_known_unit_and_a_description(record):
    for f, p in declared(record):
        assert p.description and hasattr(units, p.unit), f"{record.__name__}.{f.name}"


def test_a_section_becomes_its_record_by_declaration():
    """A byte count read as 1000.6 into an `int` field is the whole 1001 bytes; a float stays as
    given; an omittable key left out (null) takes the field's default (issue_width 0: as many as
    lanes); a key not given takes its declared default (32 lanes a request)."""
    sram = section_model(Sram, "S").model_validate({"capacity": "1000.6 B", "bandwidth": "64 B", "banks": 32})
    assert from_section(Sram, sram) == Sram(capacity_bytes=1001, bandwidth_bytes_per_cycle=64, banks=32)
    vector = from_section(
        VectorUnit, section_model(VectorUnit, "V").model_validate({"lanes": 8, "special_per_cycle": 2})
    )
    assert (vector.issue_width, vector.lanes_per_request, vector.access_bytes) == (0, 32, 16)
    l2 = from_section(
        L2, section_model(L2, "L").model_validate({"capacity": "1 MiB", "bandwidth": "1 TB/s", "latency": "1 ns"})
    )
    assert (l2.capacity_bytes, l2.bandwidth_bytes_per_s, l2.latency_s, l2.partitions) == (2**20, 1e12, 1e-9, 1)
