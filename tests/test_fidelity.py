"""Screen fidelity (archsim/choose/fidelity.py): what it plays less than full fidelity, that its
decode-attention interpolation is exact where the time is linear, that it stays within 2% of full
fidelity, and that full fidelity is untouched by it (results of the two never mix)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from archsim.choose import choose, fidelity
from archsim.choose.clock import close_under
from archsim.choose.fidelity import Fidelity, at_fidelity
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.runner.generation import _attention_time, grid_samples, run_generation

ROOT = Path(__file__).resolve().parents[1]


def scenario(w, batch: int, prompt: int, output: int):
    return replace(w, scenario=replace(w.scenario, batch=batch, prompt_tokens=prompt, output_tokens=output))


def test_fidelity_is_full_by_default_and_restored_after_a_block():
    assert fidelity.current() is Fidelity.FULL
    with pytest.raises(RuntimeError), at_fidelity("screen"):
        assert fidelity.screening()
        raise RuntimeError
    assert fidelity.current() is Fidelity.FULL
    with pytest.raises(ValueError):
        at_fidelity("draft").__enter__()


def test_screen_plays_only_the_first_tilings_of_the_shortlist(h200, monkeypatch):
    # the shipped count plays all of a decode-shaped GEMM's shortlist (8, the leanest and, on a chip
    # ranking by feed, the best without it), and the pick's 112 tiles of 8 x 128 (one wave of the
    # 132 SMs) dealt over 66 (pick.py `fills_one_wave`): 9; 2 the first 2, the ranking trusted
    assert fidelity.SCREEN_TILINGS == 10
    monkeypatch.setattr(fidelity, "SCREEN_TILINGS", 2)
    gemm = Op(OpKind.GEMM, m=8, k=4096, n=14335, scaling=Scaling.FIXED)  # a shape no other test times
    full = choose(gemm, h200.chip)
    with at_fidelity("screen"):
        screen = choose(gemm, h200.chip)
    assert full.candidates == 9 and screen.candidates == 2
    assert choose(gemm, h200.chip) is full  # memoised apart: full fidelity's choice untouched


def test_a_held_clock_stands_at_screen_fidelity_within_one_percent_under_the_limit():
    # limit 700 W, tolerance 1%: [693, 700] W lands; 692.9 W is too far under, 700.1 W is over
    assert close_under(693.0, 700.0) and close_under(700.0, 700.0)
    assert not close_under(692.9, 700.0) and not close_under(700.1, 700.0)


def test_grid_samples_are_both_sides_of_every_multiple_of_16_and_the_ends():
    kv = np.arange(100, 150)  # 100..149: multiples 112, 128, 144
    assert grid_samples(kv).tolist() == [100, 112, 113, 128, 129, 144, 145, 149]
    assert grid_samples(kv[:0]).tolist() == []


@pytest.mark.parametrize("at", ["full", "screen"])
def test_decode_attention_from_the_kv_grid_is_exact_at_its_samples_and_within_half_a_percent(h200, llama8b, at):
    # every KV length from 200 to 330 simulated, against the grid's 2 per 16 tokens interpolated
    w = scenario(llama8b, 8, 200, 130)
    kv = np.arange(200, 331)
    with at_fidelity(at):
        exact = np.array([_attention_time(w, h200, 8, int(k), None) for k in kv])
        samples = grid_samples(kv)
        sampled = np.array([_attention_time(w, h200, 8, int(k), None) for k in samples])
    assert len(samples) < len(kv) / 5
    interp = np.interp(kv, samples, sampled)
    on = np.isin(kv, samples)
    assert np.array_equal(interp[on], exact[on])  # to the bit where simulated
    assert np.max(np.abs(interp / exact - 1)) <= 0.005


def test_a_screen_run_records_its_fidelity_and_leaves_full_results_bit_for_bit(h200, llama8b):
    from archsim.memo import clear_all
    from archsim.runner.energy import run_energy

    w = scenario(llama8b, 4, 64, 40)
    clear_all()
    before = run_generation(w, h200)
    screen = run_generation(w, h200, fidelity="screen")
    after = run_generation(w, h200)
    assert screen.fidelity is Fidelity.SCREEN and before.fidelity is Fidelity.FULL
    assert np.array_equal(before.decode_step_s, after.decode_step_s) and before.ttft_s == after.ttft_s
    assert run_energy(before, w, h200, 1).energy_j == run_energy(after, w, h200, 1).energy_j
    for mine, theirs in ((screen.tpot_s, before.tpot_s), (screen.ttft_s, before.ttft_s)):
        assert abs(mine / theirs - 1) <= 0.02
    e_screen, e_full = run_energy(screen, w, h200, 1), run_energy(before, w, h200, 1)
    assert abs(e_screen.decode_tokens_per_j / e_full.decode_tokens_per_j - 1) <= 0.02


def test_screen_is_within_two_percent_on_a_case_of_each_validate_kind():
    from archsim.commands.validate import SHIPPED, load_case_file
    from archsim.config.loader import load_system
    from archsim.runner.validation import validate_cases

    cases, meta, _ = load_case_file("h200_calibration")
    system, _ = load_system(SHIPPED["h200_calibration"].chip)
    firsts = {}
    for c in cases:
        firsts.setdefault(c["kind"], c)
    assert {"gemm", "attention_decode", "vector", "model_step"} <= firsts.keys()
    picked = list(firsts.values())
    full, _ = validate_cases(picked, system, meta)
    with at_fidelity("screen"):
        screen, _ = validate_cases(picked, system, meta)
    assert len(full) == len(screen) == len(picked)
    for f, s in zip(full, screen, strict=True):
        assert abs(s.simulated_ms / f.simulated_ms - 1) <= 0.02, (f.kind, f.id)


def _rows(out: Path) -> dict[str, dict]:
    from archsim.sweep.store import read_results

    return {r["config_hash"]: r for r in read_results(out).to_pylist()}


def test_auto_sweep_has_full_fidelitys_fronts_and_screen_is_within_two_percent(tmp_path):
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.executors import SerialExecutor
    from archsim.sweep.pareto import pareto_mask
    from archsim.sweep.spec import load_spec

    pytest.importorskip("pyarrow")
    spec = load_spec(ROOT / "tests" / "data" / "sweep_small.yaml")
    rows = {}
    for at in ("full", "screen", "auto"):
        report = run_sweep(spec, tmp_path / at, SerialExecutor(), fidelity=at)
        assert report.complete
        rows[at] = _rows(tmp_path / at)
    full, screen, auto = rows["full"], rows["screen"], rows["auto"]
    assert {r["fidelity"] for r in full.values()} == {"full"} and {r["fidelity"] for r in screen.values()} == {"screen"}
    names = [o.name for o in spec.objectives]
    ok = sorted(h for h, r in full.items() if r["status"] == "ok")
    for h, n in itertools.product(ok, names):
        assert abs(screen[h][n] / full[h][n] - 1) <= 0.02
    maximize = [o.maximize for o in spec.objectives]  # tokens/s maximised, TTFT minimised

    def front(rows: dict) -> list[str]:
        values = np.array([[rows[h][n] for n in names] for h in ok])
        return [h for h, on in zip(ok, pareto_mask(values, maximize), strict=True) if on]

    assert maximize == [True, False]
    assert front(auto) == front(full)
    assert all(auto[h] == full[h] for h in front(full))  # every front point re-run at full fidelity
    # the same folder as an earlier archsim wrote it (format 1: no fidelity column) is read as
    # full fidelity, and a sweep refuses to add to it
    import json

    import pyarrow.parquet as pq

    from archsim.sweep.store import ResultStore, StoreError, read_results

    old = tmp_path / "full"
    for part in old.glob("points/part-*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["fidelity"]).replace_schema_metadata(table.schema.metadata), part)
    manifest = json.loads((old / "sweep.json").read_text())
    (old / "sweep.json").write_text(json.dumps({**manifest, "format": 1}))
    assert {r["config_hash"]: {**r} for r in read_results(old).to_pylist()} == full
    with pytest.raises(StoreError, match="format 1, written before each row recorded the fidelity"):
        ResultStore(old, spec.settings(), spec.columns()).open()


def test_refine_keeps_every_point_a_two_percent_error_could_put_on_the_front():
    from archsim.sweep.refine import refine_mask

    # tokens/s maximised: the best is 100, at worst 98 at full fidelity; 99 at best 100.98 is kept,
    # 95 at best 96.9 is not. Minimised: the least is 10, at worst 10.2; 10.3 at best 10.094 is
    # kept, 50 at best 49 is not.
    values = np.array([[100.0], [99.0], [95.0], [90.0], [50.0], [10.0], [10.3]])
    assert refine_mask(values, [True], [True]).tolist() == [True, True, False, False, False, False, False]
    assert refine_mask(values, [False], [True]).tolist() == [False] * 5 + [True, True]
    # two objectives, both maximised: (2, 2) at worst (1.96, 1.96) beats (1, 1) and (1.5, 1.5) at
    # best (1.53, 1.53); (2, 1) and (1, 2) at best (2.04, 1.02) and (1.02, 2.04) are not beaten
    corners = [[2.0, 2.0], [1.0, 1.0], [2.0, 1.0], [1.0, 2.0]]
    both = [True, True]
    assert refine_mask(np.array([*corners, [1.5, 1.5]]), both, both).tolist() == [True, False, True, True, False]
    # (1.98, 1.98) at best 2.0196 is not beaten by (2, 2) at worst 1.96: kept
    assert refine_mask(np.array([*corners, [1.98, 1.98]]), both, both).tolist() == [True, False, True, True, True]
    # the first maximised, the second minimised: (2, 1) at worst (1.96, 1.02) beats (1.5, 1.5) at
    # best (1.53, 1.47) and (1, 2) at best (1.02, 1.96); (2, 2) at best (2.04, 1.96) is beaten by
    # no one (1.96 < 2.04), nor (1, 1) at best (1.02, 0.98) (0.98 < 1.02)
    mixed = refine_mask(np.array([*corners, [1.5, 1.5]]), [True, False], both).tolist()
    assert mixed == [True, True, True, False, False]
    # exact objectives (of the design alone): (2, 2) dominates every other point outright
    exact = refine_mask(np.array([*corners, [1.99, 1.99]]), both, [False, False]).tolist()
    assert exact == [True, False, False, False, False]
