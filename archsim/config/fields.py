"""Pydantic field types for config files: quantities with units, positive counts, strict model base.

Every physical field is an `Annotated` float parsed from a unit string by `archsim.units`, so a
bare number or a unit of the wrong dimension fails validation with a message quoting the value.
Each quantity also has physical bounds: a size is at most a pebibyte, a bandwidth between 1 MB/s
and 1 EB/s, a latency between a femtosecond and a second. Outside them the value is a slipped
unit prefix, and inside them the engine's cycle counts stay exact and finite.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt

from archsim.errors import quote
from archsim.limits import MAX_COUNT
from archsim.units import Dim, parse_quantity

# Limits that catch a slipped unit prefix ('1.755 Hz' for GHz, '6.25 bps' for Gbps) and keep the
# engine's float cycle counts exact; no digital chip or DRAM pin lies outside them.
MIN_CLOCK = (1e6, "1 MHz")
MAX_CLOCK = (1e11, "100 GHz")
MIN_PIN_RATE = (1e6, "1 Mbps")
MAX_PIN_RATE = (1e15, "1 Pbps")  # the SCALE-Sim parity chips use 1000 Tbps as "unlimited"
MAX_BYTES = (2.0**50, "1 PiB")  # per chip: a thousand times today's largest HBM
MIN_BANDWIDTH = (1e6, "1 MB/s")  # below it a transfer of one tile takes hours of simulated time
MAX_BANDWIDTH = (1e18, "1 EB/s")  # 40,000 times a wafer-scale chip's on-die bandwidth
MIN_LATENCY = (1e-15, "1 fs")  # a thousandth of a gate delay (the parity chips: 0.001 ps, "none")
MAX_LATENCY = (1.0, "1 s")  # a memory or link latency, an overhead: a second is a unit mistake
MAX_BITS_PER_S = (1e18, "1 Ebps")
MAX_CYCLES = (1e8, "100,000,000 cycles")  # a fixed cost in cycles: 50 ms at 2 GHz is a unit mistake
MAX_CORES = 2**20  # Cerebras WSE-3, the largest chip built, has 900,000 cores


def _quantity(dim: Dim, low: tuple[float, str] = (0.0, ""), high: tuple[float, str] = (float("inf"), "")):
    """Validator of a quantity above zero (and within `low`..`high`, each a value and its text)."""

    def parse(value: object) -> float:
        out = parse_quantity(value, dim)
        if not out > 0:
            raise ValueError(f"must be greater than zero (got {quote(value)})")
        if out < low[0]:
            raise ValueError(f"must be at least {low[1]}; check the unit prefix (got {quote(value)})")
        if out > high[0]:
            raise ValueError(f"must be at most {high[1]}; check the unit prefix (got {quote(value)})")
        return out

    return BeforeValidator(parse)


def _quantity_or_zero(dim: Dim, high: tuple[float, str] = (float("inf"), "")):
    def parse(value: object) -> float:
        out = parse_quantity(value, dim)
        if out < 0:
            raise ValueError(f"must not be negative (got {quote(value)})")
        if out > high[0]:
            raise ValueError(f"must be at most {high[1]}; check the unit prefix (got {quote(value)})")
        return out

    return BeforeValidator(parse)


Bytes = Annotated[float, _quantity(Dim.BYTES, low=(1.0, "1 B"), high=MAX_BYTES)]  # sizes become whole bytes
BytesPerS = Annotated[float, _quantity(Dim.BYTES_PER_S, low=MIN_BANDWIDTH, high=MAX_BANDWIDTH)]
Hertz = Annotated[float, _quantity(Dim.HZ, high=MAX_CLOCK)]
ClockHz = Annotated[float, _quantity(Dim.HZ, low=MIN_CLOCK, high=MAX_CLOCK)]
Seconds = Annotated[float, _quantity(Dim.SECONDS, low=MIN_LATENCY, high=MAX_LATENCY)]
SecondsOrZero = Annotated[float, _quantity_or_zero(Dim.SECONDS, high=MAX_LATENCY)]
CyclesOrZero = Annotated[float, _quantity_or_zero(Dim.CYCLES, high=MAX_CYCLES)]
BitsPerS = Annotated[float, _quantity(Dim.BITS_PER_S, high=MAX_BITS_PER_S)]
PinRate = Annotated[float, _quantity(Dim.BITS_PER_S, low=MIN_PIN_RATE, high=MAX_PIN_RATE)]
# energies of one action (a MAC, a byte moved) are picojoules; a microjoule is a slipped prefix
MAX_ACTION_ENERGY = (1e-6, "1 uJ")
Joules = Annotated[float, _quantity(Dim.JOULES, high=MAX_ACTION_ENERGY)]
JoulesOrZero = Annotated[float, _quantity_or_zero(Dim.JOULES, high=MAX_ACTION_ENERGY)]
JoulesPerByte = Annotated[float, _quantity_or_zero(Dim.JOULES_PER_BYTE, high=MAX_ACTION_ENERGY)]
JoulesPerBit = Annotated[float, _quantity_or_zero(Dim.JOULES_PER_BIT, high=MAX_ACTION_ENERGY)]
MAX_POWER = (1e6, "1 MW")  # a whole wafer draws tens of kW
Watts = Annotated[float, _quantity(Dim.WATTS, high=MAX_POWER)]
WattsOrZero = Annotated[float, _quantity_or_zero(Dim.WATTS, high=MAX_POWER)]
Volts = Annotated[float, _quantity(Dim.VOLTS, low=(0.1, "0.1 V"), high=(10.0, "10 V"))]
MAX_AREA = (1e5, "100000 mm2")  # more than a 300 mm wafer: a slipped unit
MAX_DENSITY = (1e-3, "1000 mm2/MB")
AreaMm2 = Annotated[float, _quantity(Dim.AREA, high=MAX_AREA)]  # an area, in mm2
AreaMm2OrZero = Annotated[float, _quantity_or_zero(Dim.AREA, high=MAX_AREA)]
AreaMm2PerByte = Annotated[float, _quantity(Dim.AREA_PER_BYTE, high=MAX_DENSITY)]  # a storage density, mm2 per byte
PositiveInt = Annotated[StrictInt, Field(gt=0, le=MAX_COUNT)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
CoreCount = Annotated[StrictInt, Field(gt=0, le=MAX_CORES)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # a share of a whole: 0 to 1
Flag = StrictBool  # true or false; not 1, 'no' or 'yes' in quotes
Name = Annotated[str, Field(min_length=1)]


class Strict(BaseModel):
    """Base of every config model: frozen, unknown keys refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)
