"""Accuracy of the shipped chip models on their calibration sets, as `archsim validate` computes
it (mean absolute error per kind): a change that makes the model less accurate fails here.

The bounds are the figures README reports, rounded up by about half a point: they move only with
the README's accuracy table, and only down unless a change says why.
"""

import pytest

from archsim.commands.validate import load_cases
from archsim.config.loader import load_system
from archsim.runner.validation import summarise, validate_cases

H200_CALIBRATION = {  # kind: (mean, worst) absolute error in %
    "attention_decode": (6.0, 21.0),
    "attention_prefill": (7.5, 12.0),
    "copy": (5.0, 13.0),
    "gemm": (8.5, 18.0),
    "model_step": (3.0, 5.5),
    "vector": (10.0, 27.0),
}


@pytest.fixture(scope="module")
def h200_summary():
    results, errors = validate_cases(load_cases("h200_calibration"), load_system("h200")[0])
    assert errors == []
    return summarise(results)


@pytest.mark.parametrize("kind", sorted(H200_CALIBRATION))
def test_h200_calibration_error_per_kind(h200_summary, kind):
    mean, worst = H200_CALIBRATION[kind]
    got = h200_summary[kind]
    assert got["mean_abs_error_pct"] <= mean, f"{kind}: mean error {got['mean_abs_error_pct']:.1f}% > {mean}%"
    assert got["max_abs_error_pct"] <= worst, f"{kind}: worst error {got['max_abs_error_pct']:.1f}% > {worst}%"


def test_every_calibration_kind_is_bounded(h200_summary):
    assert set(h200_summary) == set(H200_CALIBRATION)
