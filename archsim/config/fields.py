"""Pydantic field types for config files: quantities with units, positive counts, strict model base.

Every physical field is an `Annotated` float parsed from a unit string by `archsim.units`, so a
bare number or a unit of the wrong dimension fails validation with a message quoting the value.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt

from archsim.errors import quote
from archsim.units import Dim, parse_quantity


def _quantity(dim: Dim, minimum: tuple[float, str] = (0.0, "")):
    def parse(value: object) -> float:
        out = parse_quantity(value, dim)
        if not out > 0:
            raise ValueError(f"must be greater than zero (got {quote(value)})")
        if out < minimum[0]:
            raise ValueError(f"must be at least {minimum[1]} (got {quote(value)})")
        return out

    return BeforeValidator(parse)


def _quantity_or_zero(dim: Dim):
    def parse(value: object) -> float:
        out = parse_quantity(value, dim)
        if out < 0:
            raise ValueError(f"must not be negative (got {quote(value)})")
        return out

    return BeforeValidator(parse)


Bytes = Annotated[float, _quantity(Dim.BYTES, minimum=(1.0, "1 B"))]  # sizes become whole bytes
BytesPerS = Annotated[float, _quantity(Dim.BYTES_PER_S)]
Hertz = Annotated[float, _quantity(Dim.HZ)]
Seconds = Annotated[float, _quantity(Dim.SECONDS)]
SecondsOrZero = Annotated[float, _quantity_or_zero(Dim.SECONDS)]
BitsPerS = Annotated[float, _quantity(Dim.BITS_PER_S)]
PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
Flag = StrictBool  # true or false; not 1, 'no' or 'yes' in quotes
Name = Annotated[str, Field(min_length=1)]


class Strict(BaseModel):
    """Base of every config model: frozen, unknown keys refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)
