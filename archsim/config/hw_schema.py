"""Schema of a hardware file (`hw_configs/*.yaml`): what each key means and in which unit."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from archsim.config.declared import memory_section, section_model
from archsim.config.fields import (
    AreaMm2,
    AreaMm2OrZero,
    AreaMm2PerByte,
    Bytes,
    BytesPerS,
    ClockHz,
    CoreCount,
    Joules,
    Name,
    NonNegativeInt,
    PositiveInt,
    Seconds,
    SecondsOrZero,
    Strict,
    Volts,
)
from archsim.errors import quote
from archsim.hardware import memory_models
from archsim.hardware.chip import L2, HostLink, Noc, Overheads, Sram, VectorUnit
from archsim.hardware.chiplet import DieLink, Dies
from archsim.hardware.power import Energies, Power

# formats a matrix unit may take natively (archsim/dtypes.py: block-scaled MX and NVFP4 included)
MacFormat = Literal["bf16", "fp16", "fp8", "int8", "fp32", "int4", "mxfp8", "mxfp4", "nvfp4"]


# Sections built from the hardware records' declarations (archsim/hardware/params.py): their keys,
# units, defaults and descriptions are the records' fields'. To mypy, models of any fields.
if TYPE_CHECKING:
    VectorCfg: TypeAlias = Any
    SramCfg: TypeAlias = Any
    L2Cfg: TypeAlias = Any
    HbmCfg: TypeAlias = Any
    NocCfg: TypeAlias = Any
    OverheadsCfg: TypeAlias = Any
    HostLinkCfg: TypeAlias = Any
    DiesCfg: TypeAlias = Any
    DieLinkCfg: TypeAlias = Any
else:
    VectorCfg = section_model(VectorUnit, "VectorCfg")
    SramCfg = section_model(Sram, "SramCfg")
    L2Cfg = section_model(L2, "L2Cfg")
    HbmCfg = memory_section(memory_models.DEFAULT)  # the default model's section; `model` picks another
    NocCfg = section_model(Noc, "NocCfg")
    OverheadsCfg = section_model(Overheads, "OverheadsCfg")
    HostLinkCfg = section_model(HostLink, "HostLinkCfg")
    DiesCfg = section_model(Dies, "DiesCfg")
    DieLinkCfg = section_model(DieLink, "DieLinkCfg")


class ArrayCfg(Strict):
    count: PositiveInt = Field(description="systolic matrix units per core")
    rows: PositiveInt = Field(description="PE rows (the reduction dimension under WS)")
    cols: PositiveInt = Field(description="PE columns")
    dataflow: Literal["ws", "os", "is"] = Field(description="weight-, output- or input-stationary")
    fold_mode: Literal["serial", "pipelined"] = Field("pipelined", description="fold overlap")
    split: Literal["any", "m"] = Field(
        "any", description="how a core's arrays share a tile: along rows or columns, or rows only (Hopper wgmma)"
    )
    k_per_cycle: dict[MacFormat, PositiveInt] = Field(
        description="reduction-dimension products per PE per cycle, by dtype (sets the MAC rate)"
    )

    @field_validator("k_per_cycle")
    @classmethod
    def _bf16_given(cls, rates: dict) -> dict:
        if "bf16" not in rates:
            raise ValueError(f"a bf16 rate is required (got {quote(rates)})")
        return rates


class AccumulatorCfg(Strict):
    capacity: Bytes = Field(description="fp32 accumulator storage per core for the output tile")


class DmaCfg(Strict):
    max_inflight: Bytes = Field(description="bytes one core keeps in flight to memory")
    max_requests: PositiveInt | None = Field(
        None, description="memory requests one core keeps outstanding (default: bounded by bytes only)"
    )
    loads_per_warp: PositiveInt | None = Field(
        None,
        description="loads one warp keeps outstanding: a kernel of few resident warps keeps warps x this many"
        " requests (default: no bound per warp)",
    )


class CoresCfg(Strict):
    count: CoreCount = Field(description="cores on the chip")
    matrix_units: ArrayCfg = Field(description="a core's systolic matrix units")
    vector_unit: VectorCfg = Field(description="a core's vector lanes and special-function unit")
    sram: SramCfg = Field(description="a core's local scratchpad (shared memory on a GPU)")
    accumulators: AccumulatorCfg = Field(description="a core's storage for the output tile's partial sums")
    dma: DmaCfg = Field(description="what a core keeps in flight to memory")


class SramMemoryCfg(Strict):
    """Main memory that is on-chip SRAM (no HBM: a Groq LPU, a wafer-scale chip): weights and KV
    cache live in it. It streams at its bandwidth with no refresh and no bus turnaround."""

    capacity: Bytes = Field(description="on-chip SRAM that holds weights and KV cache")
    bandwidth: BytesPerS = Field(description="aggregate bandwidth of the SRAM to the compute units")
    latency: Seconds = Field(description="access latency seen by a core")
    banks: PositiveInt = Field(description="independent SRAM slices that serve requests in parallel")
    interleave: Bytes = Field(64.0, description="address interleave across the slices")


Fraction = Annotated[float, Field(gt=0, le=1)]


class ProtocolCfg(Strict):
    overhead: SecondsOrZero = Field(description="fixed cost of one collective (launch and barrier)")
    step: SecondsOrZero = Field(description="sync cost per step, on top of link_latency")
    efficiency: Fraction = Field(description="payload fraction of the line rate")


class InNetworkCfg(Strict):
    efficiency: Fraction = Field(description="fraction of the bulk protocol's rate a switch reduction sustains")
    latency: SecondsOrZero = Field(description="extra fixed cost of a collective the switch reduces")


class _OmitUnset(Strict):
    """A section whose keys not given (null) stay out of the resolved config, so that the files
    written before those keys existed keep their config hash."""

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None}


class InterconnectCfg(_OmitUnset):
    links_per_chip: PositiveInt = Field(description="chip-to-chip links of each chip")
    link_bandwidth: BytesPerS = Field(description="per link, one direction")
    link_latency: Seconds = Field(description="per step of a collective: one hop through links and switch")
    topology: Literal["switch", "ring", "torus2d", "torus3d", "mesh"] = Field(description="how the chips are joined")
    # How collectives run (archsim.hardware.collectives); absent keys take the defaults there.
    protocols: dict[Name, ProtocolCfg] | None = Field(
        None, description="the collective library's protocols; the fastest is taken (default: bare links)"
    )
    algorithms: list[Literal["ring", "tree", "in_network", "one_shot", "two_shot"]] | None = Field(
        None, description="all-reduce algorithms the library runs (default: all the topology allows)"
    )
    in_network_reduction: InNetworkCfg | None = Field(None, description="the switch reduces (NVLink SHARP)")
    chunk: Bytes | None = Field(None, description="smallest piece a collective is cut into to overlap compute")
    torus: list[PositiveInt] | None = Field(None, description="ring or torus dimensions (product = chips)")
    wraps: list[bool] | None = Field(
        None,
        description="per torus dimension, whether a link joins its two ends (a slice of a larger pod has none"
        " where it spans less than the pod's axis; default: every dimension wraps)",
    )
    launch_jitter: SecondsOrZero | None = Field(
        None, description="mean of a rank's launch delay: the wait for the last rank of a lone collective"
    )


def _both_ends(cls, v: dict) -> dict:
    """`power.voltage` gives both ends of the clock range, the lower no higher."""
    if set(v) != {"min_clock", "max_clock"}:
        raise ValueError(f"give min_clock and max_clock (got {quote(v)})")
    if v["min_clock"] > v["max_clock"]:
        raise ValueError(f"min_clock's voltage must not exceed max_clock's (got {quote(v)})")
    return v


# power and energy: declared on Power and Energies (archsim/hardware/power.py) but for the two
# mappings the records hold as other fields (voltage_min_v / voltage_max_v, mac_j)
_MAC_ENERGY = Field(description="energy of one multiply-accumulate by dtype, at the voltage curve's top")
_VOLTAGE = Field(description="core voltage at min_clock and at max_clock")
if TYPE_CHECKING:
    EnergyCfg: TypeAlias = Any
    PowerCfg: TypeAlias = Any
else:
    EnergyCfg = section_model(Energies, "EnergyCfg", _OmitUnset, before={"mac": (dict[MacFormat, Joules], _MAC_ENERGY)})
    PowerCfg = section_model(
        Power,
        "PowerCfg",
        _OmitUnset,  # a curve top not given stays out of the resolved config
        after={
            "voltage": (dict[Literal["min_clock", "max_clock"], Volts], _VOLTAGE),
            "energy": (EnergyCfg, Field(description="energy of each action")),
        },
        validators={"_both_ends": field_validator("voltage")(_both_ends)},
    )


class HarvestedCfg(Strict):
    cores: NonNegativeInt = Field(0, description="cores on the die the part leaves off")
    l2: Bytes | None = Field(None, description="L2 on the die the part leaves off")
    hbm_stacks: NonNegativeInt = Field(0, description="HBM PHYs on the die the part leaves unused")
    links: NonNegativeInt = Field(0, description="link PHYs on the die the part leaves unused")


class AreaCfg(Strict):
    node: Literal["n16", "n7", "n5", "n4", "n3"] = Field(description="process node; sets the densities not given")
    mac: dict[MacFormat, AreaMm2] | None = Field(
        None, description="area a processing element adds to multiply each dtype (default: the node's)"
    )
    lane: AreaMm2 | None = Field(None, description="one vector lane with its share of the core's logic")
    core_logic: AreaMm2OrZero = Field(0.0, description="per core, logic not counted in its MACs and lanes")
    sram: AreaMm2PerByte | None = Field(None, description="density of the cores' SRAM (default: the node's)")
    l2: AreaMm2PerByte | None = Field(None, description="density of the L2 (default: the node's)")
    noc: AreaMm2OrZero = Field(0.0, description="the on-chip network")
    hbm_phy: AreaMm2OrZero = Field(description="one HBM stack's PHY")
    link_phy: AreaMm2OrZero = Field(0.0, description="one chip-to-chip link's PHY")
    uncore: float = Field(description="share of the die for what is not counted (host interface, control, pads)")
    other_sram: Bytes | None = Field(
        None, description="SRAM per core beyond its scratchpad and accumulators (the rest of a register file)"
    )
    harvested: HarvestedCfg | None = Field(None, description="what the die has and the part leaves off")

    @field_validator("uncore", mode="before")
    @classmethod
    def _a_share(cls, v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise ValueError(f"expected a share of the die from 0 up to, not including, 1 (got {quote(v)})")
        return float(v)


def _hinted(error: Any, section: type[BaseModel]) -> Any:
    """A validation error of a memory model's section, an unknown key given its did-you-mean."""
    if error["type"] != "extra_forbidden":
        return error
    known = sorted(section.model_fields)
    hint = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
    why = "unknown key" + (f"; did you mean {hint[0]!r}?" if hint else f"; expected one of {', '.join(known)}")
    return {"type": "value_error", "loc": error["loc"], "input": error["input"], "ctx": {"error": ValueError(why)}}


class HardwareCfg(Strict):
    name: Name = Field(description="the chip's or system's name")
    description: str = Field("", description="one line on what it is")
    chips: PositiveInt = Field(1, description="identical chips joined by the interconnect")
    family: Literal["gpu", "tpu", "trainium", "dataflow", "wafer", "systolic"] = Field(
        "gpu", description="how its compiler maps work: gpu, tpu, trainium, dataflow, wafer or systolic"
    )
    clock: ClockHz = Field(description="the highest core clock")
    cores: CoresCfg = Field(description="the cores, all alike")
    l2: L2Cfg = Field(description="the shared L2 / global buffer")
    # Typed as the default model's section (what --set paths and did-you-mean hints walk);
    # `_memory_model` validates it as the model its `model` key names.
    hbm: SerializeAsAny[HbmCfg] | None = Field(
        None, description="main memory of a model (default hbm; or `memory` for an SRAM-only chip)"
    )
    memory: SramMemoryCfg | None = Field(None, description="on-chip SRAM as the main memory, instead of hbm")
    noc: NocCfg = Field(description="the on-chip network between the cores and the L2")
    dies: DiesCfg | None = Field(
        None, description="compute dies with an L2 each, before `l2` as a memory-side cache (none: one die)"
    )
    die_link: DieLinkCfg | None = Field(
        None,
        description="dies with their share of the cores, `l2` and `hbm` each, joined by a link as one GPU"
        " (none: one die)",
    )
    overheads: OverheadsCfg = Field(description="fixed costs per kernel")
    power: PowerCfg | None = Field(None, description="how the chip draws power (none: it runs at its clock)")
    area: AreaCfg | None = Field(None, description="what its die is built of")
    interconnect: InterconnectCfg | None = Field(None, description="the chip-to-chip links")
    host_link: HostLinkCfg | None = Field(None, description="the link to host memory (KV offload, swap)")

    @field_validator("hbm", mode="wrap")
    @classmethod
    def _memory_model(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        """The section as its model's (archsim/hardware/memory_models/<model>.py); an unknown
        model is reported at `hbm.model` as a bad choice of a closed set."""
        if not isinstance(value, dict) or value.get("model", memory_models.DEFAULT) == memory_models.DEFAULT:
            return handler(value)
        name, known = value["model"], memory_models.names()
        if name not in known:
            expected = " or ".join(repr(k) for k in known)
            error = {"type": "literal_error", "loc": ("model",), "input": name, "ctx": {"expected": expected}}
            raise ValidationError.from_exception_data("hbm", [error])  # type: ignore[list-item]
        section = memory_section(name)
        try:
            return section.model_validate(value)
        except ValidationError as err:  # the loader's did-you-mean hints know the default model's keys only
            raise ValidationError.from_exception_data("hbm", [_hinted(e, section) for e in err.errors()]) from None

    @model_validator(mode="after")
    def _one_memory(self) -> HardwareCfg:
        if (self.hbm is None) == (self.memory is None):
            raise ValueError("give the main memory once: an `hbm` section, or `memory` for an SRAM-only chip")
        return self

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler):
        """No host link, no area, and the memory section not given, stay out of the resolved config:
        files written before any existed keep their hash; so does a voltage curve's top equal to
        the clock, the default."""
        omitted = ("host_link", "hbm", "memory", "area", "dies", "die_link")
        d = {k: v for k, v in handler(self).items() if v is not None or k not in omitted}
        if d.get("family") == "gpu":  # the default, as if not given: earlier files keep their hash
            del d["family"]
        if d.get("power") and d["power"].get("max_clock") == d["clock"]:  # the default, as if not given
            d["power"] = {k: v for k, v in d["power"].items() if k != "max_clock"}
        return d
