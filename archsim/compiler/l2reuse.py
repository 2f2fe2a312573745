"""Which of a GEMM's operand loads hit L2: the one model of L2 reuse, used both to compile a
tiling and to rank tilings (archsim/compiler/gemm.py).

A GEMM's work items (output tiles, or K slices of them) are launched in order and run in waves
of one item per core. An item streams its A row panel (rows x K slice) and B column panel
(columns x K slice) a K step at a time. Within a wave, the items sharing a panel stream it
together: the first touch of each panel comes from HBM and the others hit in L2. Panels fetched
by an earlier wave stay resident when all of the GEMM's operands fit in L2.
"""

from __future__ import annotations

import numpy as np


def panel_keys(items: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Integer keys of each item's A panel and B panel: (group, block, K slice)."""
    count = len(items["kl"])
    slices = int(items["s"].max()) + 1 if count else 1
    keys = []
    for block in (items["i"], items["j"]):
        blocks = int(block.max()) + 1 if count else 1
        keys.append((items["g"] * blocks + block) * slices + items["s"])
    return keys[0], keys[1]


def wave_hbm_fractions(
    items: dict[str, np.ndarray], wave: np.ndarray, a_bytes: float, b_bytes: float, resident: bool
) -> np.ndarray:
    """Share of each wave's operand bytes that comes from HBM, for items run in waves `wave`
    (wave index per item, non-decreasing): the first touch of each panel in a wave misses, the
    other touches hit; with `resident` (all operands fit in L2), a panel missed once stays."""
    count = len(items["kl"])
    waves = int(wave[-1]) + 1 if count else 0
    a_moved = items["em"] * a_bytes * items["kl"]
    b_moved = items["en"] * b_bytes * items["kl"]
    total = np.bincount(wave, a_moved + b_moved, minlength=waves)
    missed = np.zeros(waves)
    for key, moved in zip(panel_keys(items), (a_moved, b_moved)):
        if not resident:
            key = key + wave * (int(key.max()) + 1)
        _, first = np.unique(key, return_index=True)
        missed += np.bincount(wave[first], moved[first], minlength=waves)
    return np.divide(missed, total, out=np.zeros(waves), where=total > 0)


def operand_hbm_bytes(
    items: dict[str, np.ndarray], wave: np.ndarray, a_bytes: float, b_bytes: float, resident: bool
) -> float:
    """Operand bytes read from HBM by all items (wave_hbm_fractions summed over the waves)."""
    moved = (items["em"] * a_bytes + items["en"] * b_bytes) * items["kl"]
    total = np.bincount(wave, moved)
    return float(np.sum(total * wave_hbm_fractions(items, wave, a_bytes, b_bytes, resident)))
