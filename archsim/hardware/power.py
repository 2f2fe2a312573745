"""Power and the clock a power limit holds: energy per action, static power, and DVFS.

Units: joules, watts, volts, hertz, seconds. A kernel's energy is its actions times their
energies: multiply-accumulates per dtype, vector lane and special-function instructions, L2
bytes (every byte that moves between the cores and L2 or HBM passes the L2 and the on-chip
network) and HBM bits. Energies of the core's voltage domain are stated at the top of the
silicon's voltage curve, V_max, and scale as V^2 (CMOS switching energy C V^2; Horowitz,
"Computing's energy problem", ISSCC 2014); HBM energy is the memory's own and does not. Power
while a kernel runs for T seconds at clock f:

    P(f) = P_static + P_idle x (f / f_top) x v(f)^2 + v(f)^2 x E_core / T(f) + E_hbm / T(f)

with v(f) = V(f) / V_max and V linear in f between (f_min, V_min) and (f_top, V_max), the
silicon's curve (`Power.max_clock_hz`, not the clock the chip is set to): the board's static
floor, the clock tree and idle logic of the cores (dynamic, so f V^2), and the kernel's actions.
The chip's clock f_max (at most f_top) is a point on that curve: a lower one leaves every
energy at a clock below it as it was. The power manager holds the highest clock in [f_min,
f_max] at which P <= the power limit (the GPU's boost algorithm against its board power limit),
so a dense GEMM runs slower than a memory-bound copy, and a lower limit slows what is
compute-bound only.

The same formula, term by term, is the energy a result reports (`energy_split`): matrix units
(MACs), vector units (lane and special-function instructions), local SRAM (every byte a core
loads is written into its SRAM and read out by its units once, every byte it stores the reverse:
two SRAM accesses per byte through the L2), L2 and the on-chip network, HBM, chip-to-chip links
(line bits while a collective transfers), and the static and idle floor over the time.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property

from archsim.dtypes import DType
from archsim.hardware.params import param


@dataclass(frozen=True, kw_only=True)
class Energies:
    """Energy of one action at the voltage curve's top, V_max (HBM: at its own voltage)."""

    mac_j: tuple[tuple[str, float], ...]  # (dtype name, joules per multiply-accumulate): the file's `mac` by dtype
    lane_op_j: float = param(
        "lane_op", "JoulesOrZero", "one vector-lane thread-instruction, register traffic included", source="[EST]"
    )
    special_op_j: float = param(
        "special_op", "JoulesOrZero", "one special-function instruction (exp, rsqrt)", source="[EST]"
    )
    l2_j_per_byte: float = param("l2", "JoulesPerByte", "a byte through the L2 and the on-chip network", source="[EST]")
    hbm_j_per_bit: float = param(
        "hbm", "JoulesPerBit", "a bit read from or written to HBM, I/O included", source="[EST]"
    )
    link_j_per_bit: float = param("link", "JoulesPerBit", "a bit over a chip-to-chip link", 0.0, source="[EST]")
    sram_j_per_byte: float = param(
        "sram",
        "JoulesPerByte",
        "a byte written to or read from a core's SRAM (default: counted in the MAC's operand delivery)",
        0.0,
        source="[EST]",
        omittable=True,
    )

    def mac(self, dtype: DType) -> float:
        table = self._mac_table
        return table.get(dtype.value, table.get(DType.BF16.value, 0.0))

    @cached_property
    def _mac_table(self) -> dict[str, float]:
        return dict(self.mac_j)


@dataclass(frozen=True, kw_only=True)
class Power:
    """How the chip draws power and which clock its limit holds."""

    limit_w: float = param("limit", "Watts", "board power limit the clock is held under", source="[DQ]")
    static_w: float = param(
        "static",
        "WattsOrZero",
        "board power that does not scale with the core clock (regulators, HBM refresh, fans)",
        source="[DQ]",
    )
    idle_w: float = param("idle", "WattsOrZero", "clock tree and idle logic of all cores at max_clock", source="[DQ]")
    min_clock_hz: float = param("min_clock", "ClockHz", "lowest clock the power manager sets", source="[DQ]")
    max_clock_hz: float = param(
        "max_clock",
        "ClockHz",
        "clock at which the core voltage reaches voltage.max_clock: the top of the silicon's voltage curve, "
        "at which the energies are stated; `clock` is a point on it (default: clock)",
        source="[DQ]",
        omittable=True,
    )
    voltage_min_v: float  # core voltage at min_clock_hz (the file's voltage.min_clock)
    voltage_max_v: float  # core voltage at max_clock_hz (the file's voltage.max_clock)
    energies: Energies


@dataclass(frozen=True)
class Activity:
    """What a kernel (or a program of kernels) does, counted: the inputs of its energy."""

    macs: float = 0.0
    mac_dtype: DType = DType.BF16
    lane_ops: float = 0.0
    special_ops: float = 0.0
    l2_bytes: float = 0.0  # bytes between the cores and L2 (HBM traffic included)
    hbm_bytes: float = 0.0
    link_bytes: float = 0.0  # bytes on the chip's links (line rate times the transfer time)


SRAM_ACCESSES_PER_BYTE = 2  # a byte through the L2 is written into a core's SRAM and read out once


@dataclass(frozen=True)
class EnergySplit:
    """Energy by where it is spent, in joules: records that add up (an op's, a step's, a run's)."""

    matrix_j: float = 0.0  # multiply-accumulates on the matrix units
    vector_j: float = 0.0  # lane and special-function instructions on the vector units
    sram_j: float = 0.0  # the cores' local SRAM
    l2_j: float = 0.0  # L2 and the on-chip network
    hbm_j: float = 0.0  # HBM access and I/O
    link_j: float = 0.0  # chip-to-chip links
    static_j: float = 0.0  # static power (leakage, regulators, HBM refresh, fans) over the time
    idle_j: float = 0.0  # clock tree and idle logic of the cores over the time

    @property
    def total_j(self) -> float:
        return sum(_energy_values(self))

    @property
    def dynamic_j(self) -> float:
        """The actions' energy: all but the static and idle floor."""
        return self.total_j - self.static_j - self.idle_j

    def __add__(self, other: EnergySplit) -> EnergySplit:
        return EnergySplit(*map(operator.add, _energy_values(self), _energy_values(other)))

    def scaled(self, factor: float) -> EnergySplit:
        return EnergySplit(*(factor * value for value in _energy_values(self)))

    def parts(self) -> dict[str, float]:
        """Joules by unit: matrix, vector, sram, l2, hbm, link, static, idle."""
        return {f.name.removesuffix("_j"): getattr(self, f.name) for f in fields(self)}


_energy_values = operator.attrgetter(*(f.name for f in fields(EnergySplit)))  # an EnergySplit's joules, in field order
ENERGY_PARTS = tuple(EnergySplit().parts())


def relative_voltage(p: Power, clock_hz: float) -> float:
    """V(f) / V_max, V linear in f from (f_min, V_min) to (f_top, V_max), clamped to the range:
    v = (V_min + (V_max - V_min) (f - f_min) / (f_top - f_min)) / V_max."""
    span = max(p.max_clock_hz - p.min_clock_hz, 1.0)
    x = min(1.0, max(0.0, (clock_hz - p.min_clock_hz) / span))
    return (p.voltage_min_v + (p.voltage_max_v - p.voltage_min_v) * x) / p.voltage_max_v


def energy_split(p: Power, a: Activity, time_s: float, clock_hz: float) -> EnergySplit:
    """Energy of a kernel that ran `time_s` at `clock_hz`, by unit: its actions (the core's at
    v(f)^2 of their energy at V_max; HBM and links at their own) and the static and idle floor
    over its time (idle scaling as (f / f_top) v(f)^2)."""
    return EnergySplit(*_energy_parts(p, a, time_s, clock_hz))


def _energy_parts(p: Power, a: Activity, time_s: float, clock_hz: float) -> tuple[float, ...]:
    """`energy_split`'s joules in EnergySplit's field order (matrix, vector, sram, l2, hbm, link,
    static, idle), as a tuple: `energy_j` adds them up without building the record."""
    e = p.energies
    v = relative_voltage(p, clock_hz)
    v2 = v * v
    return (
        v2 * a.macs * e.mac(a.mac_dtype),
        v2 * (a.lane_ops * e.lane_op_j + a.special_ops * e.special_op_j),
        v2 * SRAM_ACCESSES_PER_BYTE * a.l2_bytes * e.sram_j_per_byte,
        v2 * a.l2_bytes * e.l2_j_per_byte,
        a.hbm_bytes * 8.0 * e.hbm_j_per_bit,
        a.link_bytes * 8.0 * e.link_j_per_bit,
        p.static_w * time_s,
        p.idle_w * (clock_hz / p.max_clock_hz) * v2 * time_s,
    )


def energy_j(p: Power, a: Activity, time_s: float, clock_hz: float) -> float:
    """Energy of a kernel that ran `time_s` at `clock_hz`: its actions, and the static and idle
    power over its time (the total of `energy_split`, added in its order)."""
    return sum(_energy_parts(p, a, time_s, clock_hz))


def floor_power_w(p: Power, clock_hz: float) -> float:
    """Power of the chip doing nothing at `clock_hz`: static power and the cores' idle power."""
    return energy_split(p, Activity(), 1.0, clock_hz).total_j


def streaming_floor_w(p: Power, bandwidth_bytes_per_s: float) -> float:
    """Power of the chip at its lowest clock streaming main memory at `bandwidth_bytes_per_s`
    through L2 and SRAM, computing nothing: the least a memory-bound kernel draws, since HBM's
    energy is the memory's own and no core clock lowers it (the lowest power limit a chip can keep)."""
    moved = Activity(l2_bytes=bandwidth_bytes_per_s, hbm_bytes=bandwidth_bytes_per_s)
    return energy_split(p, moved, 1.0, p.min_clock_hz).total_j


def idle_power_w(p: Power) -> float:
    """Power of a chip with no work, its clock dropped to the lowest (between requests)."""
    return floor_power_w(p, p.min_clock_hz)


def power_w(p: Power, a: Activity, time_s: float, clock_hz: float) -> float:
    """Average power of a kernel that ran `time_s` at `clock_hz` (energy over time)."""
    return energy_j(p, a, time_s, clock_hz) / time_s if time_s > 0 else p.static_w


def held_clock_hz(
    p: Power, a: Activity, time_at: Callable[[float], float], max_clock_hz: float, tolerance: float = 1e-3
) -> float:
    """The highest clock in [f_min, f_max] at which the kernel's power stays under the limit;
    `time_at(f)` is its time at clock f (non-increasing in f), f_max the chip's clock (a point
    on the voltage curve, at most its top). Power rises with f (more actions per second at a
    higher voltage), so bisection finds it to `tolerance` of f_max."""
    if power_w(p, a, time_at(max_clock_hz), max_clock_hz) <= p.limit_w:
        return max_clock_hz
    lo, hi = p.min_clock_hz, max_clock_hz
    if power_w(p, a, time_at(lo), lo) > p.limit_w:
        return lo  # over the limit even at the lowest clock: the floor holds
    while hi - lo > tolerance * max_clock_hz:
        mid = 0.5 * (lo + hi)
        if power_w(p, a, time_at(mid), mid) <= p.limit_w:
            lo = mid
        else:
            hi = mid
    return lo
