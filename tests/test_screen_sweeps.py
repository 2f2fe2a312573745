"""Screen fidelity on a shipped sweep (archsim/choose/fidelity.py, tools/screen_check.py measures
all of them): within 2% of full fidelity on every objective, the same Pareto front; and a sweep
point works out the run's energy only where an expression reads it."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _corner_of_variants(folder: Path) -> Path:
    """h200_variants on a corner of its grid, 16 designs: 4 or 8 tensor cores of 16 or 32 rows,
    228 KiB of SRAM, 4 or 8 HBM stacks, 1.4 or 2.0 GHz (the limit holds the 2.0 GHz designs'
    prefill GEMMs below their clock, so the held clock's screen stop is in play)."""
    doc = yaml.safe_load((ROOT / "hw_configs" / "sweeps" / "h200_variants.yaml").read_text())
    corner = {"tensor_cores": [4, 8], "array_rows": [16, 32], "sram_kib": [228], "hbm_stacks": [4, 8]}
    corner["clock_ghz"] = [1.4, 2.0]
    for name, values in corner.items():
        doc["parameters"][name]["values"] = values
    path = folder / "h200_variants_corner.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_screen_is_within_two_percent_and_keeps_the_front_of_a_shipped_sweep(tmp_path):
    from archsim.memo import clear_all
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.executors import SerialExecutor
    from archsim.sweep.pareto import pareto_mask
    from archsim.sweep.spec import load_spec
    from archsim.sweep.store import read_results

    pytest.importorskip("pyarrow")
    spec = load_spec(_corner_of_variants(tmp_path))
    rows = {}
    for at in ("full", "screen"):
        clear_all()
        assert run_sweep(spec, tmp_path / at, SerialExecutor(), fidelity=at).complete
        rows[at] = {r["config_hash"]: r for r in read_results(tmp_path / at).to_pylist()}
    full, screen = rows["full"], rows["screen"]
    ok = sorted(h for h, r in full.items() if r["status"] == "ok")
    assert len(full) == 16 and len(ok) == 16 and all(screen[h]["status"] == "ok" for h in ok)
    names = [o.name for o in spec.objectives]
    for h, n in itertools.product(ok, names):
        assert abs(screen[h][n] / full[h][n] - 1) <= 0.02, (n, h)

    def front(at: dict, maximize: list[bool]) -> list[str]:
        values = np.array([[at[h][n] for n in names] for h in ok])
        return [h for h, on in zip(ok, pareto_mask(values, maximize), strict=True) if on]

    # as the spec ranks its objectives, and every other way
    rankings = [[o.maximize for o in spec.objectives], *map(list, itertools.product([True, False], repeat=len(names)))]
    for maximize in rankings:
        assert front(screen, maximize) == front(full, maximize), maximize


def test_a_point_works_out_the_energy_only_where_an_expression_reads_it(monkeypatch):
    import archsim.runner.energy as energy
    from archsim.sweep.evaluate import Evaluation, evaluate_point
    from archsim.sweep.points import iter_points
    from archsim.sweep.spec import load_spec

    variants = load_spec(ROOT / "hw_configs" / "sweeps" / "h200_variants.yaml")  # tokens/s, TTFT, TPOT
    energies = load_spec(ROOT / "hw_configs" / "sweeps" / "h200_energy.yaml")  # tokens/J, power_w <= 600
    assert not Evaluation.of(variants).reads_energy and Evaluation.of(energies).reads_energy
    calls = []
    real = energy.run_energy
    monkeypatch.setattr(energy, "run_energy", lambda *a, **k: calls.append(1) or real(*a, **k))
    task = next(t for t in iter_points(variants) if t.design is not None)
    assert evaluate_point(task, Evaluation.of(variants))["status"] == "ok" and calls == []
    per_joule = replace(Evaluation.of(variants), objectives=energies.objectives[:1])  # decode_tokens_per_j
    row = evaluate_point(task, per_joule)
    assert calls == [1] and row["status"] == "ok" and row["decode_tokens_per_j"] > 0


def test_every_metric_only_an_energy_gives_needs_the_power_section():
    # `Evaluation.reads_energy` leaves the energy out where no expression reads a name that
    # `missing_section` puts under power: so every name a run's energy adds must be one of them
    from archsim.config.resolved import ResolvedConfig
    from archsim.report.export import run_dict
    from archsim.sweep.metrics import empty_run, flatten_numbers, metric_names, missing_section

    with_energy = metric_names()  # a run's names with an energy and an area
    assert "energy.by_unit.hbm_j" in with_energy and "decode_tokens_per_j" in with_energy
    without = flatten_numbers(run_dict(empty_run(), ResolvedConfig({}), None, None, None))
    added = {n for n in with_energy - without.keys() if missing_section(n) != "area"}
    assert {"energy_j", "power_w", "energy.by_unit.hbm_j"} <= added
    assert all(missing_section(n) == "power" for n in added), sorted(added)
