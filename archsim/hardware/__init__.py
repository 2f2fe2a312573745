"""Frozen model of the machine, in canonical units (bytes, bytes/s, Hz, seconds, cycles)."""

from archsim.hardware.chip import (
    L2,
    Chip,
    ChipFamily,
    Core,
    Dataflow,
    DType,
    FoldMode,
    Interconnect,
    Noc,
    Overheads,
    Sram,
    System,
    SystolicArray,
    Topology,
    VectorUnit,
)
from archsim.hardware.memory_models.hbm import Hbm

__all__ = [
    "L2",
    "Chip",
    "ChipFamily",
    "Core",
    "DType",
    "Dataflow",
    "FoldMode",
    "Hbm",
    "Interconnect",
    "Noc",
    "Overheads",
    "Sram",
    "System",
    "SystolicArray",
    "Topology",
    "VectorUnit",
]
