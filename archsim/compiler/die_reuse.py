"""Which of a GEMM's operand loads leave their die, on a chiplet chip (archsim/hardware/chiplet.py):
the dies' L2 reuse, one walk per die.

Work item t runs on die t mod dies (the dispatcher's round robin), in the wave it runs in on a
monolithic chip. Each die's L2 sees only its own items: within a wave, the items of one die that
share a panel stream it together (the first touch misses the die's L2, the others hit), and
across waves a die's L2 keeps what its own items touched while it fits (the LRU walk of
archsim/compiler/l2reuse.py over the die's items, at the die's L2 capacity). A panel that items
on several dies read is fetched into each of their L2s: a GEMM spread over dies loses the L2
sharing a monolithic L2 of the same total gives it.

  fabric share of wave w = sum over dies d of (bytes moved by d's items in w x their miss share)
                           / bytes moved by all items in w

and never below the wave's share from HBM (a byte from HBM crossed the fabric). What crosses it
is served by the memory-side cache or, missing there too, by HBM (l2reuse.py's walk at the
memory-side cache's capacity gives that split). Of a kernel's L2 hits (the bytes not from HBM),
the share its dies serve themselves is

  local share = sum_w moved_w x (1 - fabric share_w) / sum_w moved_w x (1 - HBM share_w)

which sets the bandwidth its L2 hits flow at (archsim/hardware/chiplet.py). Units: bytes.
"""

from __future__ import annotations

import numpy as np

from archsim.compiler.l2reuse import wave_hbm_fractions


def die_fabric_fractions(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    dies: int,
    die_capacity_bytes: float,
    shares: tuple[float, float],
    hbm_fractions: np.ndarray,
) -> np.ndarray:
    """Share of each wave's operand bytes that misses its die's L2 and crosses the die fabric
    (above), for items in launch order run in waves `wave`."""
    waves = len(hbm_fractions)
    item_bytes = wave_bytes(items, a_bytes, b_bytes, shares)
    moved, missed = np.zeros(waves), np.zeros(waves)
    for d in range(dies):
        own = {key: v[d::dies] for key, v in items.items()}
        if len(own["kl"]) == 0:
            continue
        own_wave = wave[d::dies]
        own_moved = np.bincount(own_wave, weights=item_bytes[d::dies], minlength=waves)
        frac = wave_hbm_fractions(own, own_wave, a_bytes, b_bytes, die_capacity_bytes, shares)
        moved += own_moved
        missed[: len(frac)] += own_moved[: len(frac)] * frac
    share = np.divide(missed, moved, out=np.zeros(waves), where=moved > 0)
    return np.maximum(np.minimum(1.0, share), hbm_fractions)


def wave_bytes(items: dict[str, np.ndarray], a_bytes: float, b_bytes: float, shares: tuple[float, float]) -> np.ndarray:
    """Operand bytes each item moves: (rows x a_bytes x a_share + columns x b_bytes x b_share) x
    its K length."""
    return (items["em"] * a_bytes * shares[0] + items["en"] * b_bytes * shares[1]) * items["kl"]


def die_l2_hit_fraction(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    dies: int,
    die_capacity_bytes: float,
    shares: tuple[float, float] = (1.0, 1.0),
) -> float:
    """Share of all operand bytes that hit in their die's L2 (the walk above, over every wave)."""
    waves = int(wave[-1]) + 1 if len(wave) else 0
    moved = np.bincount(wave, weights=wave_bytes(items, a_bytes, b_bytes, shares), minlength=waves)
    fabric = die_fabric_fractions(items, wave, a_bytes, b_bytes, dies, die_capacity_bytes, shares, np.zeros(waves))
    total = float(np.sum(moved))
    return 1.0 - float(np.sum(moved * fabric)) / total if total else 0.0


def local_l2_share(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    shares: tuple[float, float],
    hbm_fractions: np.ndarray,
    fabric_fractions: np.ndarray,
) -> float:
    """Share of a kernel's L2 hits that hit the cores' own die L2 (above)."""
    waves = len(hbm_fractions)
    moved = np.bincount(wave, weights=wave_bytes(items, a_bytes, b_bytes, shares), minlength=waves)
    hits = float(np.sum(moved * (1.0 - hbm_fractions)))
    return float(np.sum(moved * (1.0 - fabric_fractions))) / hits if hits > 0 else 0.0
