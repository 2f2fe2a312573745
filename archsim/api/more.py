"""The rest of the command line, in Python: `compare` (one workload on several chips), `scale`
(a decode step against the tensor-parallel degree), `find_capacity` (the highest request rate
that meets the SLOs) and `explain` (the plots: archsim/api/plots.py). Each is the same
computation as its command, and its result prints as one short line (and as a table in a
notebook). Times in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archsim.api import arguments
from archsim.api.calls import KV_STRIDE, generate_requests, run, serve_options, serve_setup
from archsim.api.display import html_table, short
from archsim.api.inputs import Hardware, Workload, as_hardware, as_workload

if TYPE_CHECKING:
    from archsim.api.explanation import Explanation
    from archsim.api.scaling import ScalePoint
    from archsim.report.comparison import ChipRun
    from archsim.serving.capacity import Capacity


def system_for(hw: str, hardware: Hardware, chips: int) -> tuple[str, Hardware] | None:
    """`hardware` if it has `chips` chips, else the shipped multi-chip system of the same chip with
    the fewest chips that are enough (h200 for TP 8: h200x8), as (name, Hardware); None if none."""
    from archsim.api.inputs import load_system
    from archsim.config.loader import shipped_dir
    from archsim.errors import ConfigError

    if hardware.chips >= chips:
        return hw, hardware
    best = None
    for path in sorted(shipped_dir("hw_configs").glob("*.yaml")):
        try:
            other = load_system(str(path))
        except ConfigError:
            continue
        same = other.system.chip == hardware.system.chip and other.chips >= chips
        if same and (best is None or other.chips < best[1].chips):
            best = (path.stem, other)
    return best


@dataclass(frozen=True, eq=False)
class CompareReport:
    """One workload on several chips: a row per chip (`report.comparison.ChipRun`: its run, or why
    it has none), named by the chip given and the layout."""

    rows: tuple[ChipRun, ...]
    workload: Workload

    def to_dict(self) -> dict:
        """What `archsim compare --json` writes."""
        from archsim.report.comparison import compare_dict

        return compare_dict(list(self.rows), self.workload.config)

    def to_pandas(self):
        from archsim.api.results import data_frame

        rows = [{k: v for k, v in c.items() if not isinstance(v, dict)} for c in self.to_dict()["chips"]]
        return data_frame(rows)

    def _cells(self) -> list[tuple[str, str]]:
        from archsim.units import format_seconds

        return [
            (
                row.label,
                f"TTFT {format_seconds(row.result.ttft_s)}, TPOT {format_seconds(row.result.tpot_s)}"
                if row.result is not None
                else row.error,
            )
            for row in self.rows
        ]

    def __repr__(self) -> str:
        return short(f"CompareReport({self.workload.name}: " + "; ".join(f"{k} {v}" for k, v in self._cells()) + ")")

    def _repr_html_(self) -> str:
        return html_table(f"{self.workload.name} on {len(self.rows)} chips", self._cells())


def compare(
    chips: Sequence[Hardware | str],
    workload: Workload | str = "llama3_8b",
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    kv_stride: int = KV_STRIDE,
) -> CompareReport:
    """`workload` on each chip as `archsim compare` runs it: a chip under a layout of more chips
    than it has runs as its shipped system (h200 under TP 2: h200x8); a chip the workload does
    not fit or the layout does not apply to gets a row saying so."""
    from dataclasses import replace

    from archsim.errors import DoesNotFitError, RefusedError, TooLargeError
    from archsim.graph.parallel import Parallelism, ParallelismError
    from archsim.report.comparison import ChipRun

    if isinstance(chips, str | Hardware):
        raise TypeError("chips: give a list of chips (names, paths or Hardware)")
    wl, par = as_workload(workload), Parallelism(tp, pp, ep)
    given = [(c if isinstance(c, str) else c.name, as_hardware(c)) for c in chips]  # all checked first
    rows = []
    for name, hardware in given:
        hw, system = system_for(name, hardware, par.chips) or (name, hardware)
        layout = "" if par.is_single else par.label()
        base = ChipRun(hw, system.name, "", None, layout=layout, given=name if name != hw else "")
        try:
            report = run(system, wl, tp=tp, pp=pp, ep=ep, kv_stride=kv_stride)
        except DoesNotFitError:
            rows.append(replace(base, error="does not fit"))
            continue
        except ParallelismError:
            rows.append(replace(base, error="layout does not apply"))
            continue
        except RefusedError as err:
            why = "too large to simulate" if isinstance(err, TooLargeError) else "not supported by the chip"
            rows.append(replace(base, error=why))
            continue
        spec = system.system.chip.area
        node = spec.node.value if spec else ""
        rows.append(
            replace(
                base,
                config_hash=report.config_hash,
                result=report.result,
                energy=report.energy,
                area=report.area,
                node=node,
            )
        )
    return CompareReport(tuple(rows), wl)


@dataclass(frozen=True, eq=False)
class ScaleReport:
    """One decode step at each tensor-parallel degree, and where the gains stop."""

    points: tuple[ScalePoint, ...]
    batch: int
    kv_len: int
    hardware: Hardware
    workload: Workload

    @property
    def verdict(self) -> str:
        from archsim.api.scaling import verdict

        return verdict(list(self.points))

    @property
    def gains_stop_tp(self) -> int | None:
        from archsim.api.scaling import gains_stop

        stop = gains_stop(list(self.points))
        return stop.tp if stop is not None else None

    def to_dict(self) -> dict:
        from archsim.api.scaling import point_dict

        return {
            "batch": self.batch,
            "kv_len": self.kv_len,
            "points": [point_dict(p) for p in self.points],
            "gains_stop_tp": self.gains_stop_tp,
        }

    def to_pandas(self):
        from archsim.api.results import data_frame

        return data_frame(self.to_dict()["points"])

    def __repr__(self) -> str:
        from archsim.units import format_seconds

        steps = ", ".join(f"TP {p.tp} {format_seconds(p.step_s)}" for p in self.points)
        return short(f"ScaleReport({self.workload.name} on {self.hardware.name}: {steps}; {self.verdict})")

    def _repr_html_(self) -> str:
        from archsim.units import format_seconds

        rows = [(f"TP {p.tp}", f"{format_seconds(p.step_s)}, collectives {100 * p.share:.0f}%") for p in self.points]
        return html_table(f"{self.workload.name} on {self.hardware.name}: {self.verdict}", rows)


def scale(
    hardware: Hardware | str = "h200x8",
    workload: Workload | str = "llama3_70b",
    *,
    tp: Sequence[int] | None = None,
    batch: int | None = None,
    kv_len: int | None = None,
) -> ScaleReport:
    """The first decode step after a `kv_len` prompt (default: the workload's) at each degree in
    `tp` (default: powers of two up to the system's chips), as `archsim scale` gives it."""
    from archsim.api.scaling import scale_points

    hw, wl = as_hardware(hardware), as_workload(workload)
    chips = hw.chips
    degrees = tuple(sorted(set(tp))) if tp else tuple(1 << i for i in range(chips.bit_length()) if 1 << i <= chips)
    if not degrees or min(degrees) < 1 or max(degrees) > chips:
        raise ValueError(f"tp: each degree from 1 to the system's {chips} chips (got {list(tp or [])})")
    if batch is not None:
        wl = wl.with_params({"scenario.batch": batch}, "scale")
    length = kv_len or wl.workload.scenario.prompt_tokens
    points = scale_points(wl.workload, hw.system, wl.workload.scenario.batch, length, degrees)
    return ScaleReport(tuple(points), wl.workload.scenario.batch, length, hw, wl)


@dataclass(frozen=True, eq=False)
class CapacityReport:
    """The highest request rate whose run meets the SLOs (`capacity`: the search, every probe)."""

    capacity: Capacity

    @property
    def rate_per_s(self) -> float:
        return self.capacity.rate_per_s

    @property
    def attainment(self) -> float:
        return self.capacity.attainment

    def __repr__(self) -> str:
        c = self.capacity
        return short(
            f"CapacityReport({c.rate_per_s:.3f} requests/s at {100 * c.attainment:.1f}% SLO attainment "
            f"(target {100 * c.target_attainment:.0f}%), {len(c.probes)} probes)"
        )

    def _repr_html_(self) -> str:
        c = self.capacity
        rows = [(f"{p.rate_per_s:.3f} requests/s", f"{100 * p.attainment:.1f}% meet the SLOs") for p in c.probes]
        return html_table(f"capacity: {c.rate_per_s:.3f} requests/s", rows)


def find_capacity(
    hardware: Hardware | str,
    workload: Workload | str,
    *,
    slo_ttft_s: float | str | None = None,
    slo_tpot_s: float | str | None = None,
    attainment: float | None = None,
    requests: int = 100,  # as archsim serve generates by default
    prompt_tokens: int | str | None = None,
    output_tokens: int | str | None = None,
    start_rate_per_s: float = 1.0,
    arrival: str = "poisson",
    cv: float = 1.0,
    seed: int = 0,
    **setup: Any,
) -> CapacityReport:
    """The highest mean arrival rate at which `requests` generated requests (lengths as
    `generate_requests` takes them; default the workload's scenario) meet the SLOs (seconds or
    "200ms") for `attainment` of them, as `archsim serve --find-capacity` searches it: doubling
    from `start_rate_per_s`, then bisecting. `setup`: the serving options as `serve` takes them."""
    from archsim.serving.capacity import find_capacity as search
    from archsim.serving.metrics import Slo

    where = "archsim.find_capacity"
    given = {"slo_ttft_s": slo_ttft_s, "slo_tpot_s": slo_tpot_s}
    slo = {k: None if v is None else arguments.duration_s(where, k, v) for k, v in given.items()}
    opts = serve_options(None, {**slo, "attainment": attainment}, setup)
    opts.check()
    if opts.slo.ttft_s is None and opts.slo.tpot_s is None:
        raise arguments.refusal(
            where, "slo_ttft_s", "needs slo_ttft_s and/or slo_tpot_s: capacity is judged against SLOs"
        )
    hw, wl = as_hardware(hardware), as_workload(workload)
    sc = wl.workload.scenario
    prompt, output = prompt_tokens or sc.prompt_tokens, output_tokens or sc.output_tokens
    built, _ = serve_setup(hw, wl, opts)

    def at(rate: float):
        return generate_requests(rate, requests, prompt, output, arrival=arrival, cv=cv, seed=seed)

    objectives = Slo(opts.slo.ttft_s, opts.slo.tpot_s)
    return CapacityReport(search(at, built, objectives, start_rate_per_s, opts.slo.attainment))


def explain(result: Any) -> Explanation:
    """Why a run (`archsim.run`'s RunReport) or an op (`archsim.op`'s OpReport) takes its time,
    and what each resource is worth (archsim/api/explanation.py)."""
    if not hasattr(result, "explain"):
        raise TypeError(f"explain takes a RunReport or an OpReport (got {type(result).__name__})")
    return result.explain()
