"""Shipped sweep templates (archsim/sweep/templates.py): best per mm2, per joule, under a power cap.

Each template runs on a few points with a short scenario; the ranking tests fix the designs (one
parameter varied, the rest at the base chip's values) so their order can be derived by hand."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("pyarrow")

import archsim
from archsim.cli import main
from archsim.sweep.driver import run_sweep
from archsim.sweep.executors import SerialExecutor
from archsim.sweep.sampling import Domain
from archsim.sweep.store import read_results
from archsim.sweep.templates import TEMPLATES, TemplateError, TemplateOptions, ranked, template_spec

SHORT = {"prompt": 32, "generate": 2}  # a few decode steps: the ranking is of decode speed, cheap to simulate
H200 = {  # the base's own values, as the template's parameters hold them
    "cores": 132,
    "matrix_units": 4,
    "sram_kib": 228,
    "l2_kib": 61440,
    "hbm_stacks": 6,
    "clock_ghz": 1.98,
}


def run_designs(tmp_path, name: str, varied: str, values: tuple, power_cap_w: float | None = None) -> list[dict]:
    """The ranked rows of template `name` around the H200 on the designs that differ from it in `varied` only."""
    spec = template_spec(name, TemplateOptions("h200", power_cap_w=power_cap_w, **SHORT))
    params = tuple(
        dataclasses.replace(p, domain=Domain(choices=values if p.name == varied else (H200[p.name],)))
        for p in spec.parameters
    )
    spec = dataclasses.replace(spec, parameters=params, strategy="grid", points=None)
    run_sweep(spec, tmp_path / name, SerialExecutor(), None, None, None, "full")
    rows = read_results(tmp_path / name).to_pylist()
    assert len(rows) == len(values)
    return rows


def test_base_values_are_the_h200s():
    """The designs are drawn around the base: its own values lie inside every range."""
    spec = template_spec("best_per_area", TemplateOptions("h200", points=4))
    for p in spec.parameters:
        d = p.domain
        inside = H200[p.name] in d.choices if d.choices is not None else d.low <= H200[p.name] <= d.high
        assert inside, p.name
    assert [c.text for c in spec.constraints] == ["fits_hbm", "fits_reticle"]


def test_per_area_ranks_fewer_matrix_units_first(tmp_path):
    # Batch-1 decode streams the 16 GB of Llama-3-8B's weights from HBM once a token: ~3.4 ms at
    # 4.8 TB/s, whatever the arrays do (their 2 x 8e9 FLOP take 0.03 ms at 2 units per SM), so
    # tokens/s is the same within 1%. Area is not: a 16 x 32 array of PEs that multiply bf16,
    # fp16, fp8 and int8 is 512 x (5824 + 5824 + 1642 + 419) um2 at 45 nm x (3.33 / 182.2) =
    # 0.128 mm2, on 144 SMs / (1 - 0.1 uncore) = 20.5 mm2 per unit per SM: from the H200's 809 mm2
    # (archsim run's die; the GH100 is 814), 3 units -> 788 mm2, 2 -> 768. Per mm2: 2 > 3 > 4.
    rows = ranked(run_designs(tmp_path, "best_per_area", "matrix_units", (2, 3, 4)), TEMPLATES["best_per_area"])
    assert [r["matrix_units"] for r in rows] == [2, 3, 4]
    assert rows[0]["decode_tokens_per_s"] == pytest.approx(rows[2]["decode_tokens_per_s"], rel=0.01)
    assert [round(r["die_mm2"]) for r in rows] == pytest.approx([809 - 2 * 20.5, 809 - 20.5, 809], abs=1)
    assert rows[0]["tokens_per_s_per_mm2"] == pytest.approx(rows[0]["decode_tokens_per_s"] / rows[0]["die_mm2"])


def test_per_joule_ranks_lower_clocks_first(tmp_path):
    # Memory-bound decode takes about as long at any clock, but the core's voltage follows the
    # clock down its curve (0.7 V at 345 MHz to 1.0 V at 1.98 GHz): at 1.19 GHz it is 0.855 V, and
    # the idle power of the clock tree, 84 W x f/f_max x V^2, falls from 84 W to 84 x 0.6 x 0.73 =
    # 37 W, as every core action costs 0.73 of its energy. So tokens per joule: 1.19 > 1.58 > 1.98 GHz.
    rows = ranked(run_designs(tmp_path, "best_per_joule", "clock_ghz", (1.98, 1.58, 1.19)), TEMPLATES["best_per_joule"])
    assert [r["clock_ghz"] for r in rows] == [1.19, 1.58, 1.98]
    assert rows[0]["decode_tokens_per_j"] > 1.05 * rows[2]["decode_tokens_per_j"]


def test_under_cap_ranks_by_speed(tmp_path):
    # Under a 500 W cap, batch-1 decode (about 300 W) is not held back: tokens/s follows the HBM
    # bandwidth, 4, 6 or 8 stacks of 0.8 TB/s each, so 8 > 6 > 4 stacks, near 8/6 apart.
    rows = ranked(run_designs(tmp_path, "best_under_cap", "hbm_stacks", (4, 6, 8), 500.0), TEMPLATES["best_under_cap"])
    assert [r["hbm_stacks"] for r in rows] == [8, 6, 4]
    assert rows[0]["decode_tokens_per_s"] / rows[1]["decode_tokens_per_s"] == pytest.approx(8 / 6, rel=0.1)


def test_a_cap_bounds_the_hbm_stacks():
    # At its lowest clock the H200 draws 80.9 W idle, and streaming HBM at 4.8 TB/s 162 W more:
    # 27 W a stack. Under 260 W: 80.9 + 27 x 6 = 243 W fits, 7 stacks (270 W) do not, so the designs
    # have 4 to 6 stacks; under 80 W not even 4 stacks (80.9 + 108 = 189 W) do: refused.
    spec = template_spec("best_under_cap", TemplateOptions("h200", power_cap_w=260.0))
    stacks = next(p.domain for p in spec.parameters if p.name == "hbm_stacks")
    assert (stacks.low, stacks.high) == (4, 6)
    assert "peak_power_w <= 260.0" in [c.text for c in spec.constraints]
    assert ("hardware", "power", "limit") in dict(spec.fixed)
    with pytest.raises(TemplateError, match=r"--power-cap 80 W: below the 189 W a design with 4 HBM stacks draws"):
        template_spec("best_under_cap", TemplateOptions("h200", power_cap_w=80.0))
    with pytest.raises(TemplateError, match=r"--power-cap: 10 W is below what the chip draws .* 156 W"):
        template_spec("best_under_cap", TemplateOptions("lpu", power_cap_w=10.0))  # its memory is on the die


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_template_runs_and_prints_its_best_sorted(tmp_path, capsys, name):
    out = tmp_path / name
    cap = ["--power-cap", "600W"] if name == "best_under_cap" else []
    argv = ["sweep", name, "--hw", "tpu_v6e", "--points", "3", "--prompt", "32", "--generate", "2"]
    assert main([*argv, *cap, "--out", str(out), "--workers", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    t = TEMPLATES[name]
    rows = ranked(read_results(out).to_pylist(), t)
    assert rows and [r[t.rank] for r in rows] == sorted((r[t.rank] for r in rows), reverse=True)
    assert f"designs by {t.rank_label}" in text and "Pareto front" in text
    assert f"archsim pareto {out} --maximize decode_tokens_per_s" in text
    tables = [line for line in text.splitlines() if not line.startswith((f"{name}:", "results", "plot and"))]
    assert max(len(line) for line in tables) <= 80  # the tables and the legend fit 80 columns
    assert main([*argv, *cap, "--out", str(out), "--workers", "1", "--quiet"]) == 0  # resumes: nothing to run
    assert "0 run now" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["best_per_area"], "best_per_area needs --hw CHIP"),
        (["best_under_cap", "--hw", "h200"], "best_under_cap needs --power-cap WATTS"),
        (["best_per_area", "--hw", "scalesim_ws_32x32"], "the chip file has no `area` section (best_per_area needs it"),
        (["best_per_joule", "--hw", "scalesim_ws_32x32"], "the chip file has no `power` section (best_per_joule"),
        (["best_per_area", "--hw", "h200x8"], "a system of 8 chips; a template designs one chip"),
        (["h200_variants", "--hw", "h200"], "--hw goes with a template"),
        (["h200_variants", "--power-cap", "500W"], "--power-cap goes with a template"),
        (["best_per_aera", "--hw", "h200"], "no such spec file, shipped spec or template; did you mean best_per_area?"),
        (["best_per_area", "--hw", "h200", "--power-cap", "5GHz"], "--power-cap: unit 'GHz' is Hz, but W is due"),
        (["best_per_area", "--hw", "h200", "--power-cap=-5W"], "--power-cap: must be above 0 W"),
        (["best_per_area", "--hw", "h200", "--power-cap", "0"], "--power-cap: must be above 0 W"),
        (["best_per_area", "--hw", "h200", "--points", "0"], "--points: must be greater than zero"),
        (["best_under_cap", "--hw", "h200", "--power-cap", "80W"], "--power-cap 80 W: below the 189 W"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(tmp_path, capsys, args, message):
    try:
        code = main(["sweep", *args, "--out", str(tmp_path / "out")])
    except SystemExit as exit:  # argparse's own refusals
        code = exit.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1], err
    assert not any("Traceback" in line for line in err)
    assert not (tmp_path / "out").exists()


def test_a_missing_area_is_refused_in_python_too():
    with pytest.raises(TemplateError, match="no `area` section"):
        template_spec("best_per_area", TemplateOptions("scalesim_ws_32x32"))


def test_the_command_names_the_templates_there_are():
    from archsim.commands.sweep_templates import TEMPLATE_NAMES  # kept apart so `--help` imports no sweep code

    assert set(TEMPLATE_NAMES) == set(TEMPLATES)


def test_the_api_runs_a_template_and_ranks_its_designs(tmp_path):
    """archsim.sweep_template runs a template as the command does: its designs that ran, best
    first by the objective; a bad argument is one ConfigError naming it."""
    report, results, best = archsim.sweep_template("best_per_joule", tmp_path / "out", hw="h200", points=3)
    assert report.points_ok == len(best) >= 1 and len(results) == 3
    joules = [r["decode_tokens_per_j"] for r in best]
    assert joules == sorted(joules, reverse=True)
    for kwargs, message in [
        ({"name": "best_per_jule"}, "name: must be one of best_per_area, best_per_joule, best_under_cap"),
        ({"name": "best_under_cap"}, "power_cap: best_under_cap needs a power cap"),
        ({"name": "best_under_cap", "power_cap": "5 parsecs"}, "power_cap: unknown unit 'parsecs'"),
        ({"name": "best_per_area", "points": 0}, "points: must be greater than zero"),
        ({"name": "best_per_area", "hw": "scalesim_ws_32x32"}, "no `area` section"),
    ]:
        args = {"hw": "h200", **kwargs}
        with pytest.raises(archsim.ConfigError, match=message):
            archsim.sweep_template(args.pop("name"), tmp_path / "bad", **args)
    assert not (tmp_path / "bad").exists()
