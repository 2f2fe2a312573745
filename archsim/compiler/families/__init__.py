"""Chip-family mappers, one file each, keyed by `ChipFamily` (the chip file's `family:`): how
that family's compiler tiles GEMMs and runs decode attention (archsim/compiler/chip_family.py).
Families without a file of their own map as the GPU library does."""

from __future__ import annotations

from archsim.compiler.chip_family import FamilyRule
from archsim.compiler.families import dataflow, gpu, tpu, trainium, wafer
from archsim.hardware import Chip, ChipFamily

FAMILIES: dict[ChipFamily, FamilyRule] = {
    r.family: r for r in (gpu.RULE, tpu.RULE, trainium.RULE, dataflow.RULE, wafer.RULE)
}


def family_rule(chip: Chip) -> FamilyRule:
    """The mapper of the chip's family (the GPU library's where the family has none yet)."""
    return FAMILIES.get(chip.family, gpu.RULE)
