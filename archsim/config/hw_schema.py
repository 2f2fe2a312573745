"""Schema of a hardware file (`hw_configs/*.yaml`): what each key means and in which unit."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_serializer, model_validator

from archsim.config.fields import (
    AreaMm2,
    AreaMm2OrZero,
    AreaMm2PerByte,
    Bytes,
    BytesPerS,
    ClockHz,
    CoreCount,
    Joules,
    JoulesOrZero,
    JoulesPerBit,
    JoulesPerByte,
    Name,
    NonNegativeInt,
    PinRate,
    PositiveInt,
    Seconds,
    SecondsOrZero,
    Strict,
    Volts,
    Watts,
    WattsOrZero,
)
from archsim.errors import quote
from archsim.units import format_seconds

# formats a matrix unit may take natively (archsim/dtypes.py: block-scaled MX and NVFP4 included)
MacFormat = Literal["bf16", "fp16", "fp8", "int8", "fp32", "int4", "mxfp8", "mxfp4", "nvfp4"]


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


class VectorCfg(Strict):
    lanes: PositiveInt = Field(description="elementwise operations per cycle per core")
    special_per_cycle: PositiveInt = Field(description="exp/rsqrt operations per cycle per core")
    access_bytes: Bytes = Field(16, description="widest load one lane issues (a vector load)")
    lanes_per_request: PositiveInt = Field(32, description="lanes whose accesses form one memory request (a GPU warp)")
    issue_width: PositiveInt | None = Field(
        None, description="thread-instructions issued per cycle per core over all pipes (default: lanes)"
    )
    threads: PositiveInt = Field(2048, description="threads resident on a core at once (occupancy limit)")


class SramCfg(Strict):
    capacity: Bytes = Field(description="local scratchpad capacity per core")
    bandwidth: Bytes = Field(description="bytes per cycle the scratchpad delivers to the units")
    banks: PositiveInt = Field(description="SRAM banks")


class AccumulatorCfg(Strict):
    capacity: Bytes = Field(description="fp32 accumulator storage per core for the output tile")


class DmaCfg(Strict):
    max_inflight: Bytes = Field(description="bytes one core keeps in flight to memory")
    max_requests: PositiveInt | None = Field(
        None, description="memory requests one core keeps outstanding (default: bounded by bytes only)"
    )


class CoresCfg(Strict):
    count: CoreCount = Field(description="cores on the chip")
    matrix_units: ArrayCfg
    vector_unit: VectorCfg
    sram: SramCfg
    accumulators: AccumulatorCfg
    dma: DmaCfg


class L2Cfg(Strict):
    capacity: Bytes = Field(description="shared L2 / global buffer capacity")
    bandwidth: BytesPerS = Field(description="aggregate L2 bandwidth")
    latency: Seconds = Field(description="L2 hit latency")
    partitions: PositiveInt = Field(1, description="partitions that each cache what their own cores read")


class HbmCfg(Strict):
    stacks: PositiveInt
    channels_per_stack: PositiveInt
    channel_width_bits: PositiveInt = Field(description="data bus width of one channel")
    data_rate: PinRate = Field(description="per-pin data rate, e.g. '6.4 Gbps'")
    capacity: Bytes = Field(description="usable capacity")
    latency: Seconds = Field(description="unloaded access latency seen by a core")
    queue_latency: SecondsOrZero = Field(0.0, description="latency queueing adds at half the peak bandwidth")
    interleave: Bytes = Field(description="address interleave granularity across channels")
    refresh_interval: Seconds = Field(description="refresh interval")
    refresh_time: SecondsOrZero = Field(description="time a channel is busy refreshing per interval")
    turnaround: SecondsOrZero = Field(description="read/write bus turnaround")
    rw_batch: Bytes = Field(description="bytes served in one direction before turning around")

    @field_validator("refresh_time")  # declared after refresh_interval, so that one is known here
    @classmethod
    def _refresh_fits(cls, refresh_s: float, info: ValidationInfo) -> float:
        interval_s = info.data.get("refresh_interval")
        if interval_s is not None and refresh_s >= interval_s:
            raise ValueError(
                f"must be shorter than refresh_interval ({format_seconds(interval_s)}) "
                f"(got {format_seconds(refresh_s)})"
            )
        return refresh_s


class SramMemoryCfg(Strict):
    """Main memory that is on-chip SRAM (no HBM: a Groq LPU, a wafer-scale chip): weights and KV
    cache live in it. It streams at its bandwidth with no refresh and no bus turnaround."""

    capacity: Bytes = Field(description="on-chip SRAM that holds weights and KV cache")
    bandwidth: BytesPerS = Field(description="aggregate bandwidth of the SRAM to the compute units")
    latency: Seconds = Field(description="access latency seen by a core")
    banks: PositiveInt = Field(description="independent SRAM slices that serve requests in parallel")
    interleave: Bytes = Field(64.0, description="address interleave across the slices")


class NocCfg(Strict):
    bandwidth: BytesPerS
    hop_latency: SecondsOrZero
    hops: PositiveInt = Field(description="average hops from a core to an L2 slice")
    multicast: PositiveInt = Field(1, description="cores one transfer from L2 can feed (TMA multicast in a cluster)")


class OverheadsCfg(Strict):
    kernel: SecondsOrZero = Field(description="fixed part of every kernel's own duration (first blocks to last)")
    gap: SecondsOrZero = Field(
        0.0, description="idle time between kernels replayed back to back (graph launch latency)"
    )
    launch: SecondsOrZero = Field(description="extra cost of an op launched on its own")
    matrix_setup: SecondsOrZero = Field(
        0.0, description="prologue of a matrix-unit kernel before its first load (descriptors, barriers)"
    )
    attention_setup: SecondsOrZero = Field(0.0, description="prologue of a fused attention kernel")
    host: SecondsOrZero = Field(0.0, description="the host's launch-and-synchronize round trip (0: not stated)")


Fraction = Annotated[float, Field(gt=0, le=1)]


class ProtocolCfg(Strict):
    overhead: SecondsOrZero = Field(description="fixed cost of one collective (launch and barrier)")
    step: SecondsOrZero = Field(description="sync cost per step, on top of link_latency")
    efficiency: Fraction = Field(description="payload fraction of the line rate")


class InNetworkCfg(Strict):
    efficiency: Fraction = Field(description="fraction of the bulk protocol's rate a switch reduction sustains")
    latency: SecondsOrZero = Field(description="extra fixed cost of a collective the switch reduces")


class InterconnectCfg(Strict):
    links_per_chip: PositiveInt
    link_bandwidth: BytesPerS = Field(description="per link, one direction")
    link_latency: Seconds = Field(description="per step of a collective: one hop through links and switch")
    topology: Literal["switch", "ring", "torus2d", "torus3d"]
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

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        """Collective settings not given stay out of the resolved config, so that the files
        written before they existed keep their config hash."""
        return {k: v for k, v in handler(self).items() if v is not None or k in _LINK_KEYS}


_LINK_KEYS = ("links_per_chip", "link_bandwidth", "link_latency", "topology")


class EnergyCfg(Strict):
    mac: dict[MacFormat, Joules] = Field(
        description="energy of one multiply-accumulate by dtype, at the highest clock's voltage"
    )
    lane_op: JoulesOrZero = Field(description="one vector-lane thread-instruction, register traffic included")
    special_op: JoulesOrZero = Field(description="one special-function instruction (exp, rsqrt)")
    l2: JoulesPerByte = Field(description="a byte through the L2 and the on-chip network")
    hbm: JoulesPerBit = Field(description="a bit read from or written to HBM, I/O included")
    link: JoulesPerBit = Field(0.0, description="a bit over a chip-to-chip link")
    sram: JoulesPerByte | None = Field(
        None,
        description="a byte written to or read from a core's SRAM (default: counted in the MAC's operand delivery)",
    )

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        """An SRAM energy not given stays out of the resolved config (earlier files keep their hash)."""
        return {k: v for k, v in handler(self).items() if v is not None}


class PowerCfg(Strict):
    limit: Watts = Field(description="board power limit the clock is held under")
    static: WattsOrZero = Field(description="board power that does not scale with the core clock")
    idle: WattsOrZero = Field(description="clock tree and idle logic of all cores at the highest clock")
    min_clock: ClockHz = Field(description="lowest clock the power manager sets")
    max_clock: ClockHz | None = Field(
        None,
        description="clock at which the core voltage reaches voltage.max_clock: the top of the silicon's "
        "voltage curve, at which the energies are stated; `clock` is a point on it (default: clock)",
    )
    voltage: dict[Literal["min_clock", "max_clock"], Volts] = Field(
        description="core voltage at min_clock and at max_clock"
    )
    energy: EnergyCfg

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        """A curve top not given stays out of the resolved config (earlier files keep their hash)."""
        return {k: v for k, v in handler(self).items() if v is not None}

    @field_validator("voltage")
    @classmethod
    def _both_ends(cls, v: dict) -> dict:
        if set(v) != {"min_clock", "max_clock"}:
            raise ValueError(f"give min_clock and max_clock (got {quote(v)})")
        if v["min_clock"] > v["max_clock"]:
            raise ValueError(f"min_clock's voltage must not exceed max_clock's (got {quote(v)})")
        return v


class HostLinkCfg(Strict):
    bandwidth: BytesPerS = Field(description="chip to host memory, one direction (PCIe, C2C)")
    latency: Seconds = Field(description="fixed cost of one transfer over it")


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


class HardwareCfg(Strict):
    name: Name
    description: str = ""
    chips: PositiveInt = 1
    clock: ClockHz
    cores: CoresCfg
    l2: L2Cfg
    hbm: HbmCfg | None = Field(None, description="high-bandwidth memory (or `memory` for an SRAM-only chip)")
    memory: SramMemoryCfg | None = Field(None, description="on-chip SRAM as the main memory, instead of hbm")
    noc: NocCfg
    overheads: OverheadsCfg
    power: PowerCfg | None = None
    area: AreaCfg | None = None
    interconnect: InterconnectCfg | None = None
    host_link: HostLinkCfg | None = Field(None, description="the link to host memory (KV offload, swap)")

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
        omitted = ("host_link", "hbm", "memory", "area")
        d = {k: v for k, v in handler(self).items() if v is not None or k not in omitted}
        if d.get("power") and d["power"].get("max_clock") == d["clock"]:  # the default, as if not given
            d["power"] = {k: v for k, v in d["power"].items() if k != "max_clock"}
        return d
