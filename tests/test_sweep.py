"""Sweep specs, expressions, sampling, point resolution, Pareto fronts and the results store
(no simulation here except where a test says so; tests/test_sweep_run.py runs sweeps)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from archsim.config.paths import path_problem
from archsim.errors import ConfigError
from archsim.sweep.design import config_value
from archsim.sweep.expr import ExprError, parse_expr
from archsim.sweep.pareto import pareto_mask
from archsim.sweep.sampling import Domain, Scale, grid_points, halton, radical_inverse, sampled_points, uniform
from archsim.sweep.spec import load_spec

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
  clock_ghz:
    path: hardware.clock
    range: [1.5, 1.9]
    steps: 2
    unit: GHz
objectives:
  tps: decode_tokens_per_s
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def messages(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_spec(write(tmp_path, text))
    return [str(p) for p in err.value.problems]


# expressions


def test_expressions_compute_with_names_units_and_functions():
    e = parse_expr("max(units, 3) * 2 ** 3 + sram / KiB if fits else -1", {"units", "sram", "fits"})
    assert e.evaluate({"units": 4, "sram": 2048, "fits": True}) == 4 * 8 + 2
    assert e.evaluate({"units": 1, "sram": 0, "fits": False}) == -1
    assert parse_expr("1 < x <= 3", {"x"}).evaluate({"x": 3}) is True
    dotted = parse_expr("memory.weights_bytes / GB", {"memory.weights_bytes"})
    assert dotted.names == {"memory.weights_bytes", "GB"} and dotted.evaluate({"memory.weights_bytes": 16e9}) == 16.0


@pytest.mark.parametrize(
    "text, why",
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("(lambda: 1)()", "unknown function"),
        ("x.real()", "unknown function 'x.real'"),
        ("'a' + 'b'", "only numbers"),
        ("[1, 2]", "list is not allowed"),
        ("unitz * 2", "unknown name 'unitz'; did you mean 'units'?"),
        ("round(x, ndigits=2)", "takes no keyword arguments"),
        ("max", "is a function"),
        ("1 +", "not a valid expression"),
    ],
)
def test_expressions_refuse_what_is_not_arithmetic(text, why):
    with pytest.raises(ExprError, match=None) as err:
        parse_expr(text, {"units", "x"})
    assert why in str(err.value)


def test_expressions_refuse_huge_exponents():
    with pytest.raises(ValueError, match="exponent"):
        parse_expr("2 ** x", {"x"}).evaluate({"x": 10**6})


# sampling


def test_grid_takes_every_combination_last_fastest():
    pts = grid_points({"a": Domain(choices=(1, 2)), "b": Domain(low=1.0, high=4.0, steps=2, scale=Scale.LOG)})
    assert pts == [{"a": 1, "b": 1.0}, {"a": 1, "b": 4.0}, {"a": 2, "b": 1.0}, {"a": 2, "b": 4.0}]
    assert Domain(low=4, high=8, steps=3, integer=True).grid() == (4, 6, 8)


def test_domains_give_each_choice_and_whole_number_an_equal_share():
    d = Domain(choices=("a", "b", "c"))
    assert [d.at(u) for u in (0.0, 0.33, 0.34, 0.99)] == ["a", "a", "b", "c"]
    ints = Domain(low=4, high=8, integer=True)
    counts = np.bincount([ints.at(u) for u in (np.arange(1000) + 0.5) / 1000], minlength=9)[4:]
    assert list(counts) == [200] * 5
    log = Domain(low=1.0, high=100.0, scale=Scale.LOG)
    assert log.at(0.5) == pytest.approx(10.0)


def test_radical_inverse_is_van_der_corput():
    assert radical_inverse(np.array([1, 2, 3, 4, 5]), 2).tolist() == [0.5, 0.25, 0.75, 0.125, 0.625]
    assert radical_inverse(np.array([1, 2, 3]), 3) == pytest.approx([1 / 3, 2 / 3, 1 / 9])


def test_scrambled_halton_is_stratified_seeded_and_prefix_stable():
    pts = halton(27, 2, seed=5)
    assert np.all((pts >= 0) & (pts < 1))
    assert sorted(np.floor(pts[:16, 0] * 16).astype(int)) == list(range(16))  # base 2: one point per 1/16
    assert sorted(np.floor(pts[:, 1] * 27 + 1e-9).astype(int)) == list(range(27))  # base 3: one per 1/27
    assert np.array_equal(halton(10, 3, seed=5), halton(30, 3, seed=5)[:10])
    assert not np.array_equal(halton(10, 3, seed=5), halton(10, 3, seed=6))
    assert np.array_equal(uniform(5, 3, seed=1), uniform(9, 3, seed=1)[:5])


def test_sampled_points_are_reproducible():
    domains = {"a": Domain(choices=(1, 2, 4)), "b": Domain(low=0.5, high=2.0)}
    assert sampled_points(domains, 8, 3, "halton") == sampled_points(domains, 8, 3, "halton")
    assert {p["a"] for p in sampled_points(domains, 30, 3, "random")} == {1, 2, 4}


# spec loading and its errors


def test_spec_loads_with_columns_and_points(tmp_path):
    spec = load_spec(write(tmp_path, BASE))
    assert spec.columns() == [
        ("units", "int", "parameter"),
        ("clock_ghz", "float", "parameter"),
        ("tps", "float", "objective"),
    ]
    assert spec.sample() == [
        {"units": 2, "clock_ghz": 1.5},
        {"units": 2, "clock_ghz": 1.9},
        {"units": 4, "clock_ghz": 1.5},
        {"units": 4, "clock_ghz": 1.9},
    ]


def test_shipped_sweep_specs_load():
    for path in sorted((Path(__file__).resolve().parents[1] / "hw_configs" / "sweeps").glob("*.yaml")):
        spec = load_spec(path)
        assert spec.objectives and spec.parameters, path
    variants = load_spec(Path(__file__).resolve().parents[1] / "hw_configs" / "sweeps" / "h200_variants.yaml")
    assert 200 <= len(variants.sample()) <= 500


def test_spec_paths_are_checked_against_the_schemas(tmp_path):
    text = BASE.replace("hardware.cores.matrix_units.count", "hardware.cores.matrix_unit.count")
    text = text.replace("workload.scenario.prompt_tokens", "workload.scenario.prompt")
    assert messages(tmp_path, text) == [
        f"{tmp_path}/spec.yaml:5: set.'workload.scenario.prompt': workload.scenario has no key 'prompt'; "
        "did you mean 'prompt_tokens'?",
        f"{tmp_path}/spec.yaml:10: parameters.units.path: hardware.cores has no key 'matrix_unit'; "
        "did you mean 'matrix_units'?",
    ]
    assert path_problem(("hardware", "cores", "sram")) == "hardware.cores.sram is a section, not a value"
    assert path_problem(("hardware", "cores", "matrix_units", "k_per_cycle", "fp8")) is None


def test_spec_expressions_and_names_are_checked(tmp_path):
    objectives = "  tps: decode_tokens_per_sec\n  fits_hbm: 1\n"
    text = BASE.replace("  tps: decode_tokens_per_s\n", objectives) + textwrap.dedent("""\
        derived:
          macs:
            expr: unit * 512
        constraints:
          - sram_totl_bytes < 1
        """)
    spec = f"{tmp_path}/spec.yaml"
    assert messages(tmp_path, text) == [
        f"{spec}:22: derived.macs.expr: unknown name 'unit'; did you mean 'units'?",
        f"{spec}:24: constraints[0]: unknown name 'sram_totl_bytes'; did you mean 'sram_total_bytes'?",
        f"{spec}:18: objectives.tps: unknown name 'decode_tokens_per_sec'; did you mean 'decode_tokens_per_s'?",
        f"{spec}:19: objectives.fits_hbm: 'fits_hbm' is a built-in name (a column, design fact, unit or function); "
        "choose another",
    ]


def test_spec_domain_and_strategy_errors(tmp_path):
    spec = f"{tmp_path}/spec.yaml"
    assert messages(tmp_path, BASE + "strategy: {kind: halton}\n") == [
        f"{spec}:19: strategy: halton sampling needs points: N"
    ]
    assert messages(tmp_path, BASE.replace("    steps: 2\n", "")) == [
        f"{spec}:14: parameters.clock_ghz.range: a grid needs steps: N for a range"
    ]
    assert messages(tmp_path, BASE.replace("values: [2, 4]", "values: [2, four]")) == [
        f"{spec}:9: parameters.units: values must all be numbers, all names or all true/false (got [2, 'four'])"
    ]


def test_spec_set_values_are_validated_with_the_base(tmp_path):
    got = messages(tmp_path, BASE.replace("output_tokens: 2", "output_tokens: 0"))
    assert got == [
        f"{tmp_path}/spec.yaml:6: set.'workload.scenario.output_tokens': with these values, "
        "workload.scenario.output_tokens: must be greater than 0 (got 0)"
    ]


def test_config_values_carry_units_and_whole_numbers():
    assert config_value(1.5, "GHz") == "1.5 GHz"
    assert config_value(228, "KiB") == "228 KiB"
    assert config_value(141.0, "GB") == "141 GB"
    assert config_value(4.0, None) == 4


# resolution


def test_a_point_is_keyed_like_archsim_run(tmp_path):
    from archsim.commands.run import load_run_inputs
    from archsim.config.resolved import run_options
    from archsim.sweep.points import resolve_points

    text = BASE.split("parameters:")[0] + textwrap.dedent("""\
        parameters:
          batch:
            path: workload.scenario.batch
            values: [1, 3]
        objectives:
          tps: decode_tokens_per_s
        """)
    tasks = resolve_points(load_spec(write(tmp_path, text)))
    *_, resolved = load_run_inputs("h200", "llama3_8b", batch=3, prompt=64, generate=2)
    digest = resolved.with_options(**run_options(1024)).hash  # the spec's kv_stride is part of the key
    assert [dict(t.values)["batch"] for t in tasks] == [1, 3]
    assert tasks[1].config_hash == digest != tasks[0].config_hash


def test_invalid_designs_become_failed_points(tmp_path):
    from archsim.sweep.points import resolve_points

    text = BASE.replace(
        "path: hardware.cores.matrix_units.count\n    values: [2, 4]",
        "path: hardware.cores.sram.capacity\n    values: [1, 228]\n    unit: KiB",
    )
    tasks = resolve_points(load_spec(write(tmp_path, text)))
    bad = [t for t in tasks if t.design is None]
    assert len(bad) == 2 and len(tasks) == 4
    assert bad[0].error.startswith(
        "invalid design: hardware.cores.sram.capacity: too small for the smallest legal tile"
    )


# Pareto fronts


def test_pareto_front_by_hand():
    # (tokens/s max, area min): (10, 5) and (12, 9) and (8, 2) are optimal; (9, 6) is beaten by (10, 5)
    values = np.array([[10, 5], [9, 6], [12, 9], [8, 2], [12, 9], [7, 9]], dtype=float)
    assert pareto_mask(values, [True, False]).tolist() == [True, False, True, True, True, False]
    assert pareto_mask(values, [False, False]).tolist() == [False, False, False, True, False, True]


def test_pareto_front_minimise_both_and_three_objectives():
    values = np.array([[1, 3], [2, 2], [3, 1], [3, 3], [2, 2]], dtype=float)
    assert pareto_mask(values, [False, False]).tolist() == [True, True, True, False, True]
    rng = np.random.Generator(np.random.PCG64(0))
    pts = rng.random((200, 3))
    mask = pareto_mask(pts, [True, True, False])
    for i in range(len(pts)):  # brute force: on the front iff nothing dominates it
        c = pts * [-1, -1, 1]
        dominated = np.any(np.all(c <= c[i], axis=1) & np.any(c < c[i], axis=1))
        assert mask[i] == (not dominated)


def test_automatic_chunks_shrink_with_the_points_left():
    """100 points on 2 workers: each chunk is the points left over 2 x 4, rounded up, but at
    least 2. 100 left gives 13; 87 gives 11; 76, 66, 57, 49, 42 and 36 give 10, 9, 8, 7, 6, 5;
    31 and 27 give 4; 23, 20 and 17 give 3; from 14 left on, 2 (14 / 8 rounded up), then the
    floor: 7 chunks of 2. 6 points start at one a chunk (6 / 8 rounded up), under the floor:
    they stay at one."""
    from archsim.sweep.driver import chunked, tapering

    sizes = [len(c) for c in chunked(range(100), tapering(100, 2))]
    assert sizes == [13, 11, 10, 9, 8, 7, 6, 5, 4, 4, 3, 3, 3] + [2] * 7
    assert [len(c) for c in chunked(range(6), tapering(6, 2))] == [1] * 6
    assert [len(c) for c in chunked(range(7), 3)] == [3, 3, 1]


def test_headline_numbers_read_without_the_run_document():
    """An objective that reads only headline numbers (ttft_s, tpot_s, ...) gets them from the
    run's own properties, the same values as the whole document gives them; a name beyond them
    (the prefill's time by cause) gets the whole document."""
    from archsim.commands.run import load_run_inputs
    from archsim.runner.generation import run_generation
    from archsim.sweep.metrics import HEADLINE_NAMES, run_metrics

    system, w, _ = load_run_inputs("h200", "llama3_8b", batch=2, prompt=32, generate=3)
    result = run_generation(w, system)
    full = run_metrics(result, system)
    fast = run_metrics(result, system, None, {"ttft_s", "decode_tokens_per_s"})
    assert fast == {name: full[name] for name in HEADLINE_NAMES}
    assert all(type(fast[n]) is type(full[n]) for n in HEADLINE_NAMES)
    assert run_metrics(result, system, None, {"ttft_s", "prefill.time_by_cause_s.compute_s"}) == full


def test_a_unit_constant_leaves_a_point_on_the_headline_numbers(monkeypatch):
    """h200_variants' constraint `sram_total_bytes <= 40 * MiB` reads a unit constant, which is
    no run metric: its points, whose objectives read headline numbers only (decode_tokens_per_s,
    ttft_s, tpot_s), get them without building the run's document, the same values."""
    from archsim.report import export
    from archsim.sweep.evaluate import Evaluation, evaluate_point
    from archsim.sweep.points import iter_points

    spec = load_spec(Path(__file__).resolve().parents[1] / "hw_configs" / "sweeps" / "h200_variants.yaml")
    ev = Evaluation.of(spec)
    assert "MiB" in {n for e in ev.constraints for n in e.names}  # read by the constraint,
    assert "MiB" not in ev.reads  # and no fact or metric to look up
    task = next(iter_points(spec))
    row = evaluate_point(task, ev)

    def no_document(*_args, **_kw):
        raise AssertionError("the run document was built")

    monkeypatch.setattr(export, "run_dict", no_document)
    again = evaluate_point(task, ev)
    assert again == row and row["status"] == "ok"


def test_workers_import_no_config_schemas():
    """What a sweep's workers load (warm.py, the server's preload) and what unpickling a chunk of
    points and its Evaluation imports leave out the spec's loading, the config schemas and
    pydantic: the workers get designs built, and those imports cost each pool 0.2 s."""
    import pickle
    import subprocess
    import sys

    from archsim.sweep.evaluate import Evaluation
    from archsim.sweep.points import iter_points
    from archsim.sweep.spec import load_spec

    root = Path(__file__).resolve().parents[1]
    spec = load_spec(root / "hw_configs" / "sweeps" / "h200_variants.yaml")
    chunk = pickle.dumps(([next(iter_points(spec))], Evaluation.of(spec)))
    code = (
        "import pickle, sys; import archsim.sweep.warm; pickle.loads(sys.stdin.buffer.read()); "
        "print(sorted(m for m in ('pydantic', 'yaml', 'archsim.config.loader', 'archsim.config.hw_schema', "
        "'archsim.config.workload_schema', 'archsim.sweep.spec', 'archsim.sweep.schema') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], input=chunk, capture_output=True, check=True, cwd=root)
    assert out.stdout.decode().strip() == "[]"
