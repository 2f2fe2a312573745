"""Accuracy of the shipped chip models on every shipped measurement, as `archsim validate all`
computes it (mean and worst absolute error per kind, per chip, calibration and held-out cases
apart): a change that makes the model less accurate fails here.

The bounds are the figures README reports, rounded up by about half a point: they move only with
the README's accuracy table, and only down unless a change says why. A100 all-reduce cases under
1 MiB scatter by up to 6x between neighbouring sizes (the measurement's own noise), hence their
loose worst-case bounds.
"""

import json

import pytest

from archsim.cli import main

BOUNDS = {  # (set, cases): {kind: (mean, worst) absolute error in %}
    ("h200_calibration", "calibration"): {
        "attention_decode": (4.5, 11.5),
        "attention_prefill": (3.5, 8.0),
        "copy": (4.5, 12.5),
        "gemm": (5.0, 13.5),
        "model_step": (3.2, 7.5),
        "vector": (9.0, 29.0),
    },
    ("h200_holdout", "development"): {
        "attention_decode": (7.0, 10.0),
        "attention_prefill": (7.0, 9.0),
        "copy": (4.5, 9.0),
        "gemm": (5.5, 12.0),
        "vector": (8.5, 22.0),
    },
    ("a100_calibration", "calibration"): {
        "allreduce": (29.5, 75.0),
        "gemm": (6.5, 37.5),
        "vector": (14.5, 40.5),
    },
    ("a100_calibration", "held out"): {
        "allreduce": (28.0, 96.0),
        "gemm": (6.5, 28.5),
        "vector": (15.0, 48.0),
    },
}


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    out = tmp_path_factory.mktemp("validate") / "all.json"
    assert main(["validate", "all", "--quiet", "--json", str(out)]) == 0
    return json.loads(out.read_text())["sets"]


@pytest.mark.parametrize(("name", "role"), sorted(BOUNDS))
def test_error_per_kind(sets, name, role):
    summary = sets[name][role]
    assert set(summary) == set(BOUNDS[name, role]), "every kind of the set is bounded"
    for kind, (mean, worst) in BOUNDS[name, role].items():
        got = summary[kind]
        assert got["mean_abs_error_pct"] <= mean, (
            f"{name} {role} {kind}: mean {got['mean_abs_error_pct']:.1f}% > {mean}%"
        )
        assert got["max_abs_error_pct"] <= worst, (
            f"{name} {role} {kind}: worst {got['max_abs_error_pct']:.1f}% > {worst}%"
        )


def test_every_shipped_set_is_bounded(sets):
    assert {(name, role) for name, parts in sets.items() for role in parts if role != "chip"} == set(BOUNDS)
