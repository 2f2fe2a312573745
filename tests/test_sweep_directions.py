"""Which way each objective of a sweep ranks (archsim/sweep/directions.py): every run metric and
design fact declares one, an objective's follows from its names or its `goal`, a goal that
contradicts them is refused, and `--fidelity auto` ranks the front with them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from archsim.errors import ConfigError
from archsim.sweep.directions import DECLARED, MAX, MIN, declared, objective_direction
from archsim.sweep.metrics import FACT_NAMES, metric_names
from archsim.sweep.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
BASE = """\
name: t
hardware: h200
workload: llama3_8b
set:
  workload.scenario.prompt_tokens: 64
  workload.scenario.output_tokens: 2
kv_stride: 1024
parameters:
  units:
    path: hardware.cores.matrix_units.count
    values: [2, 4]
derived:
  macs:
    expr: units * 512
objectives:
"""


def load(tmp_path: Path, objectives: str):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + textwrap.indent(textwrap.dedent(objectives), "  "))
    return load_spec(path)


def messages(tmp_path: Path, objectives: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, objectives)
    return [str(p).replace(f"{tmp_path}/", "") for p in err.value.problems]


def test_every_metric_and_fact_is_declared_once_and_every_declaration_names_one():
    from archsim.sweep.directions import _matches

    names = metric_names() | FACT_NAMES
    used = set()
    for name in names:
        hits = [p for p in DECLARED if _matches(p, name)]
        assert len(hits) == 1, (name, hits)  # a new metric needs its direction and unit here
        used.update(hits)
    assert used == set(DECLARED)
    assert declared("energy.decode.by_unit.hbm_j") == DECLARED["energy.*.by_unit.*"]
    assert declared("decode.time_by_cause_s.l2_s").direction is MIN
    assert declared("scenario.batch").direction is None and declared("mac_units") is None


@pytest.mark.parametrize(
    ("text", "direction"),
    [
        ("decode_tokens_per_s", MAX),
        ("tpot_s * 1000", MIN),  # a positive constant keeps it
        ("decode_tokens_per_s / (mac_units / 1e6)", MAX),  # a parameter or derived value is a positive factor
        ("decode_tokens_per_s / power_w", MAX),  # max over min
        ("1 / ttft_s", MAX),
        ("-ttft_s", MAX),
        ("ttft_s * -2", MAX),
        ("ttft_s - decode_tokens_per_s", MIN),
        ("max(ttft_s, tpot_s) + 0.5", MIN),
        ("log10(tokens_per_j)", MAX),
        ("area_mm2", MIN),  # what a design spends is minimised
    ],
)
def test_an_objectives_direction_follows_from_its_names(text, direction):
    assert objective_direction(text, {})[0] is direction


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ttft_s * decode_tokens_per_s", "ttft_s (min) and decode_tokens_per_s (max) rank opposite ways"),
        ("ttft_s + mac_units", "a sum of ttft_s (min) and a value without a direction"),
        ("mac_units * 2", "it reads nothing with a direction"),
        ("scenario.batch", "scenario.batch is an input of the run (the scenario's), nothing to rank"),
        ("abs(ttft_s)", "'abs(ttft_s)' ranks no one way"),
    ],
)
def test_an_objective_whose_names_do_not_tell_is_said_to(text, why):
    with pytest.raises(ValueError, match=None) as err:
        objective_direction(text, {})
    assert why in str(err.value)


def test_a_spec_gives_each_objective_a_direction_and_unit(tmp_path):
    spec = load(
        tmp_path,
        """\
          tps: decode_tokens_per_s
          tpot_ms: {expr: tpot_s * 1000, unit: ms}
          per_mac: {expr: tps / macs, goal: maximize}
          cost: {expr: macs, goal: minimize, unit: MAC/cycle}
          slower: {expr: tpot_ms * macs / tps}
        """,
    )
    assert spec.goals() == {
        "tps": {"goal": "maximize", "unit": "tokens/s"},
        "tpot_ms": {"goal": "minimize", "unit": "ms"},
        "per_mac": {"goal": "maximize", "unit": None},
        "cost": {"goal": "minimize", "unit": "MAC/cycle"},
        "slower": {"goal": "minimize", "unit": None},  # min over max, earlier objectives' directions
    }
    assert [o.maximize for o in spec.objectives] == [True, False, True, False, False]


def test_an_objective_without_a_direction_or_with_a_contradicting_one_is_refused(tmp_path):
    assert messages(
        tmp_path,
        """\
          tps: {expr: decode_tokens_per_s, goal: minimize}
          macs_per: macs * 2
          batch: scenario.batch
          tpot: {expr: tpot_s, unit: ms}
          later: {expr: 1 / tpot, goal: minimize}
          made_up: decode_tokens_per_sec
        """,
    ) == [
        "spec.yaml:16: objectives.tps.goal: minimize contradicts decode_tokens_per_s: decode_tokens_per_s is to "
        "maximize, so it is to maximize",
        "spec.yaml:17: objectives.macs_per: which way it ranks does not follow from its names (it reads nothing "
        "with a direction (parameters, derived values and constants have none)): write it as "
        "macs_per: {expr: macs * 2, goal: maximize} (or minimize)",
        "spec.yaml:18: objectives.batch: which way it ranks does not follow from its names (scenario.batch is an "
        "input of the run (the scenario's), nothing to rank): write it as batch: {expr: scenario.batch, goal: "
        "maximize} (or minimize)",
        "spec.yaml:19: objectives.tpot.unit: tpot_s is in s, not ms",
        "spec.yaml:20: objectives.later.goal: minimize contradicts 1 / tpot: tpot is to minimize, so it is to maximize",
        "spec.yaml:21: objectives.made_up: unknown name 'decode_tokens_per_sec'; did you mean 'decode_tokens_per_s'?",
    ]


def test_the_auto_front_is_the_full_fidelity_front_on_a_shipped_sweep(tmp_path):
    """h200_variants cut to 8 designs (2 x 2 x 2 of tensor cores, HBM stacks and clock): the front
    over its four objectives, each ranked its own way, is the same designs at auto as at full
    fidelity, and every design on it was simulated at full fidelity, to the bit. Full
    fidelity stays the default: screen saves nothing on these sweeps."""
    import inspect
    import json

    from archsim.sweep.driver import run_sweep
    from archsim.sweep.executors import SerialExecutor
    from archsim.sweep.pareto import Goal, find_front

    pytest.importorskip("pyarrow")
    text = (ROOT / "hw_configs" / "sweeps" / "h200_variants.yaml").read_text()
    for before, after in [
        ("values: [2, 4, 8]", "values: [2, 8]"),
        ("values: [16, 32]", "values: [16]"),
        ("values: [114, 228, 456]", "values: [228]"),
        ("values: [4, 5, 6, 8]", "values: [4, 8]"),
        ("values: [1.4, 1.6, 1.8, 2.0]", "values: [1.4, 2.0]"),
    ]:
        assert before in text
        text = text.replace(before, after)
    (tmp_path / "spec.yaml").write_text(text)
    spec = load_spec(tmp_path / "spec.yaml")
    assert inspect.signature(run_sweep).parameters["fidelity"].default == "full"
    auto = run_sweep(spec, tmp_path / "auto", SerialExecutor(), fidelity="auto")
    full = run_sweep(spec, tmp_path / "full", SerialExecutor(), fidelity="full")
    assert auto.fidelity == "auto" and auto.points_ok == full.points_ok == 8
    goals = [Goal(o.name, o.maximize) for o in spec.objectives]
    assert [g.maximize for g in goals] == [True, False, False, True]  # tokens/s, TTFT, TPOT, tokens/s per MMAC
    fronts = {at: find_front(tmp_path / at, goals).front_rows() for at in ("auto", "full")}
    assert [r["config_hash"] for r in fronts["auto"]] == [r["config_hash"] for r in fronts["full"]]
    assert fronts["auto"] == fronts["full"]  # each row re-run at full fidelity: the same to the bit
    # by hand, from the full rows: at 8 stacks and 2.0 GHz, 2 tensor cores give the most tokens/s
    # (270.9), the least TPOT (3.691 ms) and tokens/s per MMAC (2004) and 8 the least TTFT (9.94 ms
    # against 15.9): neither beats the other; every other design is beaten by one of them (fewer
    # stacks: about 162 tokens/s; 1.4 GHz: 267 tokens/s and a longer TTFT at the same cores)
    on_front = {(r["tensor_cores"], r["hbm_stacks"], r["clock_ghz"]) for r in fronts["full"]}
    assert on_front == {(2, 8, 2.0), (8, 8, 2.0)}
    # the four designs at 1.4 GHz, whose kernel prologues take their cycles at the lower clock, are
    # beaten by more than 2% on every objective: left screened
    assert auto.refined == 4
    summary = json.loads((tmp_path / "auto" / "summary.json").read_text())
    assert summary["objectives"]["tpot_ms"] == {"goal": "minimize", "unit": None}
    assert summary["last_run"]["refined"] == auto.refined


def test_a_point_longer_than_the_model_takes_is_infeasible_as_run_refuses_it(tmp_path):
    """A model of 512 learned positions: the 64 + 2 token scenario runs, the 1,024 + 2 one is
    ruled out with run's words (its steps past the positions mean nothing)."""
    pytest.importorskip("pyarrow")
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.executors import SerialExecutor
    from archsim.sweep.store import read_results

    (tmp_path / "spec.yaml").write_text(
        """\
name: positions
hardware: h200
workload: llama3_8b
set:
  workload.model.positions: learned
  workload.model.max_positions: 512
  workload.scenario.output_tokens: 2
kv_stride: 1024
parameters:
  prompt:
    path: workload.scenario.prompt_tokens
    values: [64, 1024]
objectives:
  tps: decode_tokens_per_s
"""
    )
    run_sweep(load_spec(tmp_path / "spec.yaml"), tmp_path / "out", SerialExecutor())
    rows = {r["prompt"]: r for r in read_results(tmp_path / "out").to_pylist()}
    assert rows[64]["status"] == "ok"
    assert rows[1024]["status"] == "infeasible"
    assert rows[1024]["error"] == (
        "scenario: prompt_tokens + output_tokens is 1,026 tokens, more than the model's maximum of 512"
        " (model.max_positions)"
    )
