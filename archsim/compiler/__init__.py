"""Tiling and mapping of each op onto the chip's units: Op -> Program (plain arrays)."""
