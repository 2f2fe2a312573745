"""Accuracy of the shipped chip models on every shipped measurement, as `archsim validate all`
computes it (mean and worst absolute error per kind, per chip, calibration and held-out cases
apart): a change that makes the model less accurate fails here.

The bounds are the figures README reports, rounded up by about half a point: they move only with
the README's accuracy table, and only down unless a change says why. A100 all-reduce cases under
1 MiB scatter by up to 6x between neighbouring sizes (the measurement's own noise), hence their
loose worst-case bounds; they rose when the wait for the last rank became its own term and the
protocol costs were held to their stated ranges (their transfer fell from 57.4% to 44.9%), and
the calibration cases' mean again (31.7% -> 37.6%) when a100x8 took NCCL's published latency
constants in place of fitted ones, its fit left only the LL128 and Simple efficiencies: held
out 34.4% -> 26.0%, transfer 44.9% -> 37.6% (held out 34.9% -> 26.0%). The A100's timer reports whole microseconds, so a vector kernel near
one reads one or the other: measured 1 us and predicted at 2.0x us, +100%, is its worst, on both
sides of the split.
The H200's measured latencies and L2 bandwidth (MODEL.md section 8) raised its prefill attention
(3.0% -> 4.1%, held out worst 8.6% -> 10.5%), its GEMMs' worst (13.1% -> 14.6%; the compute-bound
ones 4.8% -> 5.1%) and its held-out vector ops (8.2% -> 9.0%), where the transfer both ways fell on
every kind but decode attention.
Fitting the H200 on its per-kernel durations too (h200_kernels: its matrix prologue 0.1 -> 1.96
us, 0.6 of its L2 dirty after a flush) took its GEMMs' worst to 17.1% (a 1,024-row output projection)
and its batch-1 decode steps at short KV to 10% slow (the tiny kernels between the GEMVs, section 6
of MODEL.md), the steps' mean 3.1% -> 3.5%, where GEMM transfer fell from 8.8% to 5.6% (to the A100)
and 7.7% to 4.4% (to the H200). The per-kernel set's tiny vector kernels are shown, not fitted.
Dealing a small vectorised op's thread blocks over cores as PyTorch does (2 KiB an operand, not a
16 KiB chunk) took them from 52.8% to 37.8%, the H200's vector ops from 8.2% to 6.3% (held out
8.8% -> 8.4%) and its model steps from 3.5% to 3.2%.
Two of the H200's targets are bounded on their own: the 8192^3 GEMM against the calibration
file's measured ceiling, and the compute-bound GEMMs (M >= 1024).
"""

import json
from pathlib import Path

import pytest

import archsim
from archsim.cli import main
from archsim.config.loader import load_system
from archsim.runner.validation import CaseFile, predict_ms, validate_cases

DATA = Path(archsim.__file__).parent / "data"

BOUNDS = {  # (set, cases): {kind: (mean, worst) absolute error in %}
    ("h200_calibration", "calibration"): {
        "attention_decode": (4.0, 7.5),
        "attention_prefill": (3.5, 8.0),
        "copy": (3.5, 9.0),
        "gemm": (5.0, 17.5),
        "model_step": (3.5, 10.0),
        "vector": (7.0, 17.5),
    },
    ("h200_kernels", "calibration"): {
        "attention_decode": (1.0, 1.5),
        "attention_prefill": (9.0, 9.0),
        "gemm": (4.5, 7.0),
        "vector": (38.5, 109.0),
    },
    ("h200_holdout", "development"): {
        "attention_decode": (6.0, 12.0),
        "attention_prefill": (7.5, 11.0),
        "copy": (3.0, 5.5),
        "gemm": (5.5, 12.0),
        "vector": (9.0, 21.0),
    },
    ("a100_calibration", "calibration"): {
        "allreduce": (38.0, 79.0),
        # 5.6% -> 6.0% since a load issued as the loads before it drain waits no queue: the small
        # GEMVs had been slowed by a queue of 98% their lockstep cores never formed
        "gemm": (6.5, 36.5),
        "vector": (9.5, 100.5),
    },
    ("a100_calibration", "held out"): {
        "allreduce": (26.5, 74.5),
        "gemm": (6.5, 28.5),
        "vector": (9.0, 100.5),
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


def _h200_calibration() -> dict:
    return json.loads((DATA / "h200_calibration.json").read_text())


def test_the_8192_cubed_gemm_runs_within_3_percent_of_the_measured_ceiling():
    """The calibration file's own `meta.ceilings.gemm_8192_TFLOPs` (715.2 TFLOP/s, timed as its
    cases are): the model's 2 x 8192^3 FLOP over its predicted time must be within 3% of it."""
    doc = _h200_calibration()
    case = {"id": "gemm/8192^3", "kind": "gemm", "M": 8192, "K": 8192, "N": 8192, "dtype": "bf16", "measured_ms": 1.0}
    ms = predict_ms(case, load_system("h200")[0], CaseFile.from_meta(doc["meta"]))
    measured = doc["meta"]["ceilings"]["gemm_8192_TFLOPs"]
    assert abs(2 * 8192**3 / (ms * 1e-3) / 1e12 / measured - 1) <= 0.03


def test_compute_bound_h200_gemms_are_bounded():
    """The calibration set's GEMMs with M >= 1024 (18 cases, bound by the tensor cores and the
    clock the power limit holds): mean absolute error at most 6.0% (5.7% now, with the 1.96 us
    matrix prologue the H200's per-kernel durations ask for; 5.1% at 0.1 us, 4.8% at the fitted
    latencies before the measured ones)."""
    doc = _h200_calibration()
    cases = [c for c in doc["cases"] if c["kind"] == "gemm" and c["M"] >= 1024]
    results, errors = validate_cases(cases, load_system("h200")[0], CaseFile.from_meta(doc["meta"]))
    assert not errors and len(results) == 18
    assert sum(abs(r.error_pct) for r in results) / len(results) <= 6.0
