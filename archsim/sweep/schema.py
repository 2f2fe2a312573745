"""Schema of a sweep spec (`hw_configs/sweeps/*.yaml`): what each key means.

A spec names a base chip and workload, fixes some of their values (`set`), sweeps others
(`parameters`, each at a dotted path such as `hardware.cores.sram.capacity`), computes
`derived` values from them, rules designs out with `constraints` before simulating, and records
`objectives` from each run. `strategy` says which points of the parameter space to run.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from archsim import limits
from archsim.config.fields import Flag, Name, PositiveInt, Strict
from archsim.errors import quote

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr
Number = StrictInt | StrictFloat
Strategy = Literal["grid", "random", "halton"]
MAX_POINTS = limits.MAX_SWEEP_POINTS  # points are resolved as they run, but each is simulated
MAX_RANGE = 1e300  # ends of a numeric range (their logarithms and differences stay finite)


class ParameterCfg(Strict):
    path: str | None = Field(
        None,
        description="where the value goes: `hardware.<key path>` or "
        "`workload.<key path>`; `hardware` or `workload` alone picks the "
        "file (a shipped name or path); none: an input of derived values only",
    )
    values: list[Scalar] | None = Field(None, min_length=1, description="the values to take (numbers or names)")
    range: list[Number] | None = Field(None, description="[low, high] of a numeric range")
    steps: PositiveInt | None = Field(None, le=MAX_POINTS, description="values of the range in a grid, ends included")
    scale: Literal["linear", "log"] = Field("linear", description="spacing of the range: linear or geometric")
    integer: Flag = Field(False, description="round the range's values to whole numbers")
    unit: str | None = Field(None, description="unit appended to the number in the config ('GHz', 'KiB')")

    @model_validator(mode="after")
    def _one_domain(self) -> ParameterCfg:
        if (self.values is None) == (self.range is None):
            raise ValueError("give either values: [...] or range: [low, high]")
        if self.values is not None:
            if self.steps is not None or self.scale != "linear" or self.integer:
                raise ValueError("steps, scale and integer go with range, not values")
            kinds = {_kind(v) for v in self.values}
            if len(kinds) > 1:
                raise ValueError(f"values must all be numbers, all names or all true/false (got {quote(self.values)})")
            if len(set(map(repr, self.values))) != len(self.values):
                raise ValueError(f"values are repeated (got {quote(self.values)})")
            if self.unit is not None and kinds != {"number"}:
                raise ValueError("a unit goes with numeric values only")
        elif self.range is not None:  # the check above leaves one of values and range
            if len(self.range) != 2 or not self.range[0] < self.range[1]:
                raise ValueError(f"range must be [low, high] with low < high (got {quote(self.range)})")
            if not all(math.isfinite(v) and abs(v) <= MAX_RANGE for v in self.range):
                raise ValueError(f"range ends must be finite numbers within ±{MAX_RANGE:g} (got {quote(self.range)})")
            if self.scale == "log" and self.range[0] <= 0:
                raise ValueError(f"a log range must be above zero (got {quote(self.range)})")
        return self


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "flag"
    return "name" if isinstance(value, str) else "number"


class DerivedCfg(Strict):
    expr: StrictStr | Number = Field(description="expression over parameters and earlier derived values")
    path: str | None = Field(None, description="where the value goes (as for a parameter); none: a column only")
    unit: str | None = Field(None, description="unit appended to the number in the config")
    integer: Flag = Field(False, description="round the value to a whole number")


class ObjectiveCfg(Strict):
    expr: StrictStr | Number = Field(description="expression over run metrics, design facts and the spec's values")
    goal: Literal["maximize", "minimize"] | None = Field(
        None, description="which way it ranks; needed only where its names do not tell (archsim/sweep/directions.py)"
    )
    unit: str | None = Field(None, description="unit of the value, for the reader ('ms', 'tokens/s/W')")


class StrategyCfg(Strict):
    kind: Strategy = Field(
        description="every combination, seeded uniform random or scrambled Halton (low-discrepancy) samples"
    )
    points: PositiveInt | None = Field(None, le=MAX_POINTS, description="samples to draw (random and halton)")
    seed: StrictInt = Field(
        0, ge=0, le=limits.MAX_SEED, description="seed of the random draws and of the Halton scrambling"
    )

    @model_validator(mode="after")
    def _points_given(self) -> StrategyCfg:
        if self.kind == "grid" and self.points is not None:
            raise ValueError("a grid runs every combination: points goes with random or halton")
        if self.kind != "grid" and self.points is None:
            raise ValueError(f"{self.kind} sampling needs points: N")
        return self


class SweepCfg(Strict):
    name: Name
    description: str = ""
    hardware: Name = Field(description="base chip: a shipped name (h200) or a path, relative to the spec")
    workload: Name = Field(description="base workload: a shipped name (llama3_8b) or a path")
    set: dict[str, Scalar] = Field({}, description="fixed values by dotted path, applied before the parameters")
    parameters: dict[str, ParameterCfg] = Field(min_length=1, description="swept values by name (the column name)")
    derived: dict[str, DerivedCfg] = Field({}, description="values computed from the parameters, in order")
    constraints: list[StrictStr] = Field([], description="conditions a design must meet to be simulated")
    objectives: dict[str, ObjectiveCfg] = Field(
        min_length=1,
        description="what to record of each run: an expression over run metrics, or {expr, goal, unit}; "
        "each ranks one way (maximised or minimised, archsim/sweep/directions.py)",
    )
    strategy: StrategyCfg = Field(StrategyCfg(kind="grid"), description="which points to run")
    kv_stride: PositiveInt = Field(
        64, le=limits.MAX_TOKENS, description="decode KV lengths between exactly simulated attention samples"
    )
    chunk_size: PositiveInt | None = Field(
        None, le=MAX_POINTS, description="points per task and per Parquet part (default: auto)"
    )

    @field_validator("objectives", mode="before")
    @classmethod
    def _objective_shorthand(cls, value: object) -> object:
        """`name: expression` stands for `name: {expr: expression}`."""
        if not isinstance(value, dict):
            return value
        return {k: v if isinstance(v, dict) else {"expr": v} for k, v in value.items()}

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_shorthand(cls, value: object) -> object:
        return {"kind": value} if isinstance(value, str) else value
