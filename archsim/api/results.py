"""What the Python API returns: typed, frozen records of a run, a serving run and a sweep, each
with `.to_dict()` (the document `--json` writes) and, where the result is a table, `.to_pandas()`
(pandas is imported only then). Units are canonical: seconds, bytes, bytes/s, FLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from archsim.api.inputs import Hardware, Workload
from archsim.config.resolved import ResolvedConfig
from archsim.engine.timing import TimeByCause
from archsim.graph.parallel import Parallelism
from archsim.runner.generation import RunResult, StepResult
from archsim.runner.memory import Footprint

if TYPE_CHECKING:
    from archsim.serving.energy import ServeEnergy
    from archsim.serving.metrics import ServeMetrics, Slo
    from archsim.serving.result import ServeResult
    from archsim.serving.session_metrics import SessionMetrics
    from archsim.serving.setup import ServeSetup


def data_frame(rows: list[dict], columns: list[str] | tuple[str, ...] | None = None):
    """A pandas DataFrame of `rows`; ImportError saying how to get pandas when it is missing."""
    try:
        import pandas
    except ImportError:
        raise ImportError("to_pandas() needs pandas: python3 -m pip install pandas") from None
    return pandas.DataFrame(rows, columns=list(columns) if columns is not None else None)


def communication(step: StepResult) -> dict:
    """Collective time of a step on the busiest chip (all its micro-batches), how much of it ran
    under compute, the exposed rest and its share of the step, and the pipeline bubble."""
    micro = step.pipeline.micro_batches if step.pipeline else 1
    comm, hidden = micro * step.comm_s, micro * step.comm_hidden_s
    return {
        "time_s": step.time_s,
        "collectives_s": comm,
        "hidden_s": hidden,
        "exposed_s": comm - hidden,
        "exposed_share": (comm - hidden) / step.time_s if step.time_s else 0.0,
        "bubble_s": step.pipeline.bubble_s if step.pipeline else 0.0,
        "micro_batches": micro,
    }


@dataclass(frozen=True, eq=False)
class RunReport:
    """A generation (prefill, then decode) of a workload on hardware."""

    result: RunResult
    hardware: Hardware
    workload: Workload
    parallelism: Parallelism
    resolved: ResolvedConfig  # hardware, workload and the run's options (KV stride, layout)

    @property
    def config(self) -> dict:
        return self.resolved.as_dict()

    @property
    def config_hash(self) -> str:
        return self.resolved.hash

    @property
    def ttft_s(self) -> float:
        return self.result.ttft_s

    @property
    def tpot_s(self) -> float:
        return self.result.tpot_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.result.decode_tokens_per_s

    @property
    def throughput_tokens_per_s(self) -> float:
        return self.result.throughput_tokens_per_s

    @property
    def total_time_s(self) -> float:
        return self.result.total_time_s

    @property
    def time_by_cause(self) -> TimeByCause:
        """The run's time split by cause (docs/MODEL.md section 6b): adds up to total_time_s."""
        return self.result.by_cause

    @property
    def footprint(self) -> Footprint:
        return self.result.footprint

    @property
    def interrupted(self) -> bool:
        return self.result.interrupted

    @cached_property
    def energy(self):
        """The run's energy and power (archsim.runner.energy.RunEnergy); None when the chip file
        has no power section."""
        from archsim.runner.energy import run_energy

        kv_stride = self.resolved.options.get("kv_stride", 64)
        return run_energy(self.result, self.workload.workload, self.hardware.system, kv_stride, self.parallelism)

    @cached_property
    def area(self):
        """The die's area by block (archsim.hardware.area.Area); None without an area section."""
        from archsim.hardware.chip import system_area

        return system_area(self.hardware.system)

    @property
    def energy_j(self) -> float | None:
        """Joules of the whole run on every chip of its layout."""
        return self.energy.energy_j if self.energy is not None else None

    @property
    def tokens_per_j(self) -> float | None:
        return self.energy.tokens_per_j if self.energy is not None else None

    @property
    def area_mm2(self) -> float | None:
        return self.area.die_mm2 if self.area is not None else None

    def communication(self) -> dict[str, dict] | None:
        """Per step (prefill, decode): collectives, hidden, exposed; None on one chip."""
        if self.parallelism.is_single:
            return None
        steps = (("prefill", self.result.prefill), ("decode", self.result.decode))
        return {name: communication(step) for name, step in steps if step}

    def __repr__(self) -> str:
        from archsim.api.display import run_repr

        return run_repr(self)

    def _repr_html_(self) -> str:
        from archsim.api.display import html_table, run_rows, run_title

        return html_table(run_title(self), run_rows(self))

    def explain(self):
        """Why the run takes its time and what each resource is worth (archsim/api/explanation.py):
        its prefill and first decode step by cause, what binds them, and each resource doubled."""
        from archsim.api.explanation import explain_run

        return explain_run(self)

    def ops(self) -> list[dict]:
        """The per-op table of the prefill and first decode step (the rows of `--csv`)."""
        from archsim.report.csvfile import op_rows

        return op_rows(self.result)

    def decode_steps(self) -> dict[str, np.ndarray]:
        """KV length and time of every decode step."""
        return {"kv_len": self.result.decode_kv_lens.copy(), "time_s": self.result.decode_step_s.copy()}

    def to_dict(self) -> dict:
        """Everything `archsim run --json` writes."""
        from archsim.report.energy import area_dict
        from archsim.report.export import run_dict

        system = self.hardware.system
        spec = system.chip.area
        area = area_dict(
            self.area, self.result, self.energy.chips if self.energy else 1, spec.node.value if spec else ""
        )
        data = run_dict(self.result, self.resolved, system, self.energy, area)
        if (comm := self.communication()) is not None:
            data["communication"] = comm
        return data

    def to_pandas(self):
        """The per-op table as a DataFrame, one row per op of the prefill and first decode step."""
        from archsim.report.csvfile import COLUMNS

        return data_frame(self.ops(), COLUMNS)


@dataclass(frozen=True, eq=False)
class ServeReport:
    """A serving run: per-request times, the metrics under the SLOs, per-instance figures."""

    result: ServeResult
    metrics: ServeMetrics
    slo: Slo
    resolved: ResolvedConfig  # hardware, workload, the serving setup and the requests
    setup: ServeSetup | None = None  # what its energy is computed on

    def __repr__(self) -> str:
        from archsim.api.display import serve_repr

        return serve_repr(self)

    def _repr_html_(self) -> str:
        from archsim.api.display import html_table, serve_rows

        return html_table("serving run", serve_rows(self))

    @cached_property
    def energy(self) -> ServeEnergy | None:
        """Energy and power of the run (archsim.serving.energy.ServeEnergy); None without a
        power section in a chip file, or without the setup."""
        from archsim.serving.energy import serve_energy

        return serve_energy(self.result, self.setup) if self.setup is not None else None

    @property
    def config(self) -> dict:
        return self.resolved.as_dict()

    @property
    def config_hash(self) -> str:
        return self.resolved.hash

    @cached_property
    def sessions(self) -> SessionMetrics | None:
        """Per-session metrics (archsim.serving.session_metrics.SessionMetrics: TTFT per turn,
        session durations, context reuse); None unless the requests are sessions' turns."""
        return self.result.session_metrics()

    def requests(self) -> list[dict]:
        """One row per served request: arrival, lengths, first token, finish and the latencies."""
        t = self.result.times
        columns = {
            "request": self.result.served,
            "arrival_s": t.arrival_s,
            "prompt_tokens": t.prompt_tokens,
            "output_tokens": t.output_tokens,
            "first_scheduled_s": t.first_scheduled_s,
            "first_token_s": t.first_token_s,
            "finish_s": t.finish_s,
            "ttft_s": t.ttft_s,
            "tpot_s": t.tpot_s,
            "e2e_s": t.e2e_s,
            "queue_s": t.queue_s,
            "preemptions": self.result.preemptions,
            "meets_slo": t.meets(self.slo),
        }
        lists = {k: np.asarray(v).tolist() for k, v in columns.items()}
        return [dict(zip(lists, row)) for row in zip(*lists.values())]

    def to_dict(self) -> dict:
        """Everything `archsim serve --json` writes."""
        from archsim.serving.energy_report import serve_energy_dict
        from archsim.serving.report import serve_dict

        return {
            **serve_dict(self.result, self.metrics, self.slo, self.resolved),
            "energy": serve_energy_dict(self.energy),
        }

    def to_pandas(self):
        """The per-request table as a DataFrame."""
        rows = self.requests()
        return data_frame(rows, list(rows[0]) if rows else None)


@dataclass(frozen=True, eq=False)
class SweepResults:
    """The recorded points of a sweep folder: one row per point (config_hash, status, error,
    parameters, derived values, objectives), its settings and its summary."""

    dir: Path
    table: Any  # a pyarrow.Table
    settings: dict
    summary: dict

    def __len__(self) -> int:
        return self.table.num_rows

    def __repr__(self) -> str:
        from archsim.api.display import short

        return short(f"SweepResults({self.dir}: {len(self)} points, columns {', '.join(self.columns)})")

    def _repr_html_(self) -> str:
        from archsim.api.display import html_table

        return html_table(f"sweep {self.dir}", [("points", f"{len(self):,}"), ("columns", ", ".join(self.columns))])

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def rows(self) -> list[dict]:
        return self.table.to_pylist()

    def to_arrow(self):
        return self.table

    def to_dict(self) -> dict:
        return {"dir": str(self.dir), "settings": self.settings, "summary": self.summary, "points": self.rows()}

    def to_pandas(self):
        return data_frame(self.rows(), self.columns)

    def pareto(self, maximize: tuple[str, ...] | list[str] = (), minimize: tuple[str, ...] | list[str] = ()):
        """The designs on the Pareto front over the given columns, best first on the first."""
        from archsim.api import arguments
        from archsim.sweep.pareto import Goal, find_front

        where = "SweepResults.pareto"
        goals = [Goal(c, True) for c in arguments.names(where, "maximize", maximize)]
        goals += [Goal(c, False) for c in arguments.names(where, "minimize", minimize)]
        if len(goals) < 2:
            raise arguments.refusal(where, "maximize", "give at least two columns to maximize and/or minimize")
        return find_front(self.dir, goals).front_rows()
