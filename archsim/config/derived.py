"""Totals set by dotted path that the model turns into the physical parameters behind them, so a
what-if can be asked the way it is thought of (`--set hardware.hbm.bandwidth=9.6TB/s`):

- `hbm.bandwidth`: the main memory's peak bytes/s. For the HBM model it sets the per-pin
  `data_rate` = bandwidth x 8 / (stacks x channels_per_stack x channel_width_bits), the stacks
  and channels as they are (given with it or in the file); a model with a `bandwidth` of its
  own (`model: ideal`) takes it as it is.
- `cores.matrix_units.peak`: the chip's dense bf16 FLOP/s at its clock (2 x MACs per cycle x
  cores x clock). The array's products per PE per cycle (`k_per_cycle`, every dtype's, so their
  ratios stay) are scaled where the total is a whole multiple of them, else the matrix units
  per core (`count`); a total neither can give is refused with the nearest that can.

Every other value, and the chip the totals apply to, is set and validated first, as given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from archsim.config.yamlfile import KeyPath, YamlDoc
from archsim.errors import ConfigError, quote
from archsim.units import Dim, parse_quantity

HBM_BANDWIDTH: KeyPath = ("hbm", "bandwidth")
MATRIX_PEAK: KeyPath = ("cores", "matrix_units", "peak")
DERIVED = {HBM_BANDWIDTH: Dim.BYTES_PER_S, MATRIX_PEAK: Dim.FLOPS}  # hardware paths -> what they take
WHOLE = 1e-9  # relative distance from a whole number still taken as one (float rounding of a ratio)


def is_derived(path: Sequence[str | int]) -> bool:
    """Whether `path` (without its `hardware.` root) names a derived total."""
    return tuple(path) in DERIVED


def expanded(
    root: str, doc: YamlDoc, params: Sequence[tuple[KeyPath, Any]], where: str, build: Callable[..., tuple]
) -> Sequence[tuple[KeyPath, Any]]:
    """`params` with each derived total replaced by the physical values that give it, on `doc`
    with the other values of `params` set (`build`: archsim.config.loader.build, which calls
    this); ConfigError located at `where` for a bad total."""
    if root != "hardware" or not any(is_derived(p) for p, _ in params):
        return params
    plain = [(p, v) for p, v in params if not is_derived(p)]
    system = build(root, doc, plain, where)[0]
    out = list(plain)
    for path, value in params:
        if not is_derived(path):
            continue
        try:
            total = parse_quantity(value, DERIVED[tuple(path)])
            if not total > 0:
                raise ValueError(f"must be greater than zero (got {quote(value)})")
            out += _physical(tuple(path), total, system, value)
        except ValueError as err:
            raise ConfigError.single(where, ".".join(map(str, path)), str(err)) from None
    return out


def _physical(path: KeyPath, total: float, system, given: Any) -> list[tuple[KeyPath, Any]]:
    chip = system.chip
    if path == HBM_BANDWIDTH:
        hbm = chip.hbm
        if not hasattr(hbm, "data_rate_bits_per_s"):  # a model whose own key this is
            return [(path, given)]
        rate_bits_per_s = total * 8.0 / (hbm.channels * hbm.channel_width_bits)
        return [(("hbm", "data_rate"), f"{rate_bits_per_s!r} bps")]
    from archsim.dtypes import DType

    peak = chip.peak_flops(DType.BF16)
    ratio = total / peak
    array, units = chip.core.array, chip.core.matrix_units
    rates = dict(array.k_per_cycle)
    if all(_whole(k * ratio) for k in rates.values()):
        return [(("cores", "matrix_units", "k_per_cycle", d), round(k * ratio)) for d, k in rates.items()]
    if _whole(units * ratio):
        return [(("cores", "matrix_units", "count"), round(units * ratio))]
    step = peak / units  # one matrix unit per core more or less
    low, high = max(1, math.floor(ratio * units)) * step, math.ceil(ratio * units) * step
    raise ValueError(
        f"the model sets it through whole products per PE per cycle (k_per_cycle) or matrix units per "
        f"core (count): {total:.4g} FLOP/s is {ratio:.4g} x this chip's {peak:.4g}; the nearest it can give "
        f"are {low:.4g} and {high:.4g} FLOP/s (got {quote(given)})"
    )


def _whole(x: float) -> bool:
    return x >= 1 - WHOLE and abs(x - round(x)) <= WHOLE * max(1.0, abs(x))
