"""Decode step time against the tensor-parallel degree on a multi-chip system: how the step
shrinks with more chips, how much of it the all-reduces take, and the degree where their latency
stops the gains (`archsim scale`, `archsim.scale`). Times in seconds."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

STOP_GAIN = 0.25  # a step up that saves less than a quarter of the time its chips could has stopped paying


@dataclass(frozen=True)
class ScalePoint:
    """One decode step at one tensor-parallel degree, on the busiest chip."""

    tp: int
    step_s: float
    collectives_s: float  # exposed collective time in the step
    allreduces: int  # all-reduces per step
    allreduce_s: float  # one of the step's all-reduces (after the attention output projection)
    fits: bool

    @property
    def share(self) -> float:
        return self.collectives_s / self.step_s if self.step_s else 0.0


def scale_points(w, system, batch: int, kv_len: int, tps: tuple[int, ...], bar=None) -> list[ScalePoint]:
    """The first decode step after a `kv_len` prompt at each degree in `tps`."""
    from archsim.graph.builder import Step
    from archsim.graph.model import Phase
    from archsim.graph.ops import OpKind
    from archsim.graph.parallel import Parallelism
    from archsim.runner.generation import simulate_step
    from archsim.runner.memory import footprint
    from archsim.runner.size import check_steps_size

    points = []
    for i, tp in enumerate(tps):
        if bar is not None:
            bar.update(i, len(tps), f"decode step at TP {tp}")
        par = Parallelism(tp)
        shape = Step(Phase.DECODE, batch, 1, kv_len)
        check_steps_size(w, system, [shape], par)
        step = simulate_step(w, system, shape, par)
        reduces = [r for r in step.ops if r.op.kind is OpKind.ALL_REDUCE]
        points.append(
            ScalePoint(
                tp,
                step.time_s,
                step.comm_s - step.comm_hidden_s,
                sum(r.op.repeat for r in reduces),
                next((r.timing.time_s for r in reduces if r.op.name == "o_proj_allreduce"), 0.0),
                footprint(w, system, batch, par).fits,
            )
        )
    return points


def marginal_gain(prev: ScalePoint, cur: ScalePoint) -> float:
    """The time a step up in chips saves over what it could save (1 - prev.tp / cur.tp of the
    step): 1 is perfect scaling, 0 no gain, below 0 a slower step."""
    return (prev.step_s - cur.step_s) / (prev.step_s * (1.0 - prev.tp / cur.tp))


def gains_stop(points: list[ScalePoint], threshold: float = STOP_GAIN) -> ScalePoint | None:
    """The first degree whose step saves less than `threshold` of what its extra chips could."""
    return next((cur for prev, cur in itertools.pairwise(points) if marginal_gain(prev, cur) < threshold), None)


def verdict(points: list[ScalePoint]) -> str:
    from archsim.units import format_seconds

    if len(points) < 2:
        return "one degree only: nothing to compare"
    stop = gains_stop(points)
    if stop is None:
        last = points[-1]
        return (
            f"no stop up to TP {last.tp}: each step up saves at least {STOP_GAIN:.0%} of what its chips could; "
            f"at TP {last.tp} the collectives are {last.share:.0%} of the step "
            f"({last.allreduces} all-reduces of {format_seconds(last.allreduce_s)})"
        )
    prev = points[points.index(stop) - 1]
    return (
        f"the gains stop at TP {stop.tp}: from TP {prev.tp} the step falls only from "
        f"{format_seconds(prev.step_s)} to {format_seconds(stop.step_s)} ({100 * marginal_gain(prev, stop):.0f}% "
        f"of what {stop.tp // prev.tp if stop.tp % prev.tp == 0 else round(stop.tp / prev.tp, 2)}x the chips "
        f"could save): its {stop.allreduces} all-reduces of {format_seconds(stop.allreduce_s)}, latency-bound, "
        f"are {stop.share:.0%} of it"
    )


def point_dict(p: ScalePoint) -> dict:
    return {
        "tp": p.tp,
        "step_s": p.step_s,
        "collectives_s": p.collectives_s,
        "share": p.share,
        "allreduces": p.allreduces,
        "allreduce_s": p.allreduce_s,
        "fits": p.fits,
    }
