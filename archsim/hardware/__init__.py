"""Frozen model of the machine, in canonical units (bytes, bytes/s, Hz, seconds, cycles)."""

from archsim.hardware.chip import (
    Chip, Core, DType, Dataflow, FoldMode, Hbm, Interconnect, L2, Noc, Overheads, Sram,
    System, SystolicArray, Topology, VectorUnit,
)

__all__ = [
    "Chip", "Core", "DType", "Dataflow", "FoldMode", "Hbm", "Interconnect", "L2", "Noc",
    "Overheads", "Sram", "System", "SystolicArray", "Topology", "VectorUnit",
]
