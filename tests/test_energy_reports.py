"""Energy, power and area in what the commands print and write: run, traces, compare, serve,
sweep and pareto; and the decode sweep over batch the README shows."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest

import archsim
from archsim.cli import main
from archsim.config.loader import load_system, load_workload
from archsim.runner.energy import run_energy
from archsim.runner.generation import run_generation

SHORT = ["--prompt", "128", "--generate", "4"]


def test_run_json_has_energy_and_area_that_add_up(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", *SHORT, "--batch", "2", "--quiet", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    e = d["energy"]
    assert d["energy_j"] == e["energy_j"] == pytest.approx(sum(e["by_unit"].values()))
    assert e["energy_j"] == pytest.approx(e["prefill"]["energy_j"] + sum(d["decode_steps"]["energy_j"]))
    assert d["power_w"] == pytest.approx(e["energy_j"] / d["total_time_s"])
    assert d["tokens_per_j"] == pytest.approx(d["generated_tokens"] / d["energy_j"])
    assert d["power_w"] <= e["limit_w"] == 700.0
    for op in d["prefill"]["ops"] + d["decode"]["ops"]:
        assert op["energy_j"] == pytest.approx(sum(op["energy_by_unit"].values()))
        assert 0 < op["clock_hz"] <= 1.98e9
    step = d["prefill"]
    assert e["prefill"]["energy_j"] == pytest.approx(sum(o["repeat"] * o["energy_j"] for o in step["ops"]))
    assert d["area_mm2"] == d["area"]["die_mm2"] and d["area"]["fits_reticle"] is True
    assert sum(d["area"]["by_block_mm2"].values()) == pytest.approx(d["area_mm2"])


def test_run_prints_power_against_the_limit_and_the_held_clock(capsys):
    assert main(["run", "--prompt", "512", "--generate", "4", "--ops", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "against the 700 W limit of the NVIDIA H200 SXM" in out
    gemm = next(line for line in out.splitlines() if "gemm" in line and "GHz" in line)
    prefill_clock, decode_clock = (float(x) for x in re.findall(r"(\d\.\d\d) GHz", gemm))
    assert prefill_clock < 1.98 and decode_clock == 1.98  # a 512-token prefill's GEMMs are held, decode's not
    assert "die area of the NVIDIA H200 SXM (n4)" in out and "809 mm2" in out
    assert main(["run", *SHORT, "--quiet"]) == 0
    quiet = capsys.readouterr().out
    assert "W avg, 700 W limit" in quiet and "tokens/J" in quiet


def test_a_chip_without_power_or_area_prints_neither(capsys):
    assert main(["run", "--hw", "scalesim_ws_128x128", *SHORT, "--batch", "1"]) == 0
    out = capsys.readouterr().out
    assert "limit" not in out and "die area" not in out


def test_the_trace_power_counter_integrates_to_the_steps_energy(tmp_path):
    trace, result = tmp_path / "t.json", tmp_path / "r.json"
    argv = ["run", *SHORT, "--batch", "2", "--quiet", "--json", str(result), "--trace-out", str(trace)]
    assert main(argv) == 0
    doc, d = json.loads(trace.read_text()), json.loads(result.read_text())
    expected = {"prefill": d["energy"]["prefill"]["energy_j"], "decode": d["energy"]["decode"]["energy_j"]}
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    for pid, name in names.items():
        samples = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["pid"] == pid and e["name"] == "chip power"]
        step = next(e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == pid and e["tid"] == 1)
        ts = np.array([e["ts"] for e in samples])
        watts = np.array([e["args"]["W"] for e in samples])
        joules = float(np.sum(watts * np.diff(np.append(ts, step["ts"] + step["dur"])))) * 1e-6
        assert joules == pytest.approx(expected[name.split(":")[0].split(" ")[0]], rel=2e-3)
        assert watts.min() >= 157.7 * (345 / 1980) * 0.49  # never below the floor at the lowest clock


def test_compare_shows_energy_and_area(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["compare", "h200", "a100", *SHORT, "--batch", "4", "--json", str(out), "--wide"]) == 0
    text = capsys.readouterr().out
    assert "energy and area" in text and "tok/J" in text
    chips = json.loads(out.read_text())["chips"]
    for c in chips:
        assert c["tokens_per_j"] == pytest.approx(c["energy"]["tokens_per_j"]) and c["tokens_per_j"] > 0
        assert c["power_w"] <= c["energy"]["limit_w"]
    assert [round(c["area_mm2"]) for c in chips] == [809, 756]


def test_serving_one_request_costs_what_running_it_does():
    """A lone request of 512 + 128 tokens served with no host work is a batch-1 run: the same
    steps, the same energy (the serving energy model interpolates its parts, within 1%). Under
    vLLM's host profile each of its 128 steps (one prefill, 127 decodes) also waits 1.5 ms + 16 us
    for the host at the H200's floor, static 73.7 W + idle 84 W at the full clock:
    128 x 1.516 ms x 157.7 W = 30.60 J more."""
    hw = archsim.load_system("h200")
    wl = archsim.load_workload("llama3_8b", scenario={"batch": 1, "prompt_tokens": 512, "output_tokens": 128})
    run = archsim.run(hw, wl)
    one = archsim.generate_requests(1.0, 1, 512, 128)
    bare = archsim.serve(hw, wl, one, host="none").energy
    assert bare.energy_j == pytest.approx(run.energy_j, rel=0.01)
    assert bare.j_per_request == bare.energy_j and bare.j_per_output_token == pytest.approx(bare.energy_j / 128)
    assert bare.average_power_w == pytest.approx(bare.energy_j / bare.duration_s)
    hosted = archsim.serve(hw, wl, one, host="vllm").energy
    assert hosted.energy_j - bare.energy_j == pytest.approx(30.60, rel=1e-3)


def test_a_serving_instance_draws_on_its_layouts_chips():
    """A TP 2 instance on an eight-GPU system draws on its 2 chips, not the system's 8. At batch 1
    the floor (157.7 W a chip) is most of the energy, and a TP 8 step is more than a quarter of a
    TP 2 step (the weights' HBM stream divides by the chips, the all-reduces do not), so the same
    request costs more on 8 chips than on 2."""
    hw, wl = archsim.load_system("h200x8"), archsim.load_workload("llama3_8b")
    one = archsim.generate_requests(1.0, 1, 512, 128)
    two, eight = (archsim.serve(hw, wl, one, host="none", tp=tp).energy for tp in (2, 8))
    assert (two.chips, eight.chips) == (2, 8)
    assert eight.energy_j > two.energy_j
    assert two.average_power_per_chip_w == pytest.approx(two.energy_j / two.duration_s / 2)
    assert max(two.peak_power_per_chip_w, eight.peak_power_per_chip_w) <= 700 * 1.05


def test_serve_reports_energy_and_plots_power(tmp_path, capsys):
    plots, out = tmp_path / "plots", tmp_path / "s.json"
    argv = ["serve", "--rate", "20", "--requests", "40", "--prompt", "256", "--generate", "32"]
    assert main([*argv, "--plots", str(plots), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "energy per output token" in text and "of the 700 W limit" in text
    e = json.loads(out.read_text())["energy"]
    assert e["j_per_request"] == pytest.approx(e["energy_j"] / 40)
    (inst,) = e["instances"]
    assert inst["energy_j"] == pytest.approx(e["energy_j"])
    assert min(inst["over_time"]["power_w"]) > 80 and max(inst["over_time"]["power_w"]) <= 700 * 1.01
    assert (plots / "power.png").stat().st_size > 10_000


LIMITS = """  limit_w:
    path: hardware.power.limit
    values: [300, 700]
    unit: W
"""


def _spec(tmp_path, constraints: list[str], hardware: str = "h200", parameters: str = LIMITS) -> str:
    text = f"""name: energy_small
hardware: {hardware}
workload: llama3_8b
set:
  workload.scenario.prompt_tokens: 32
  workload.scenario.output_tokens: 2
kv_stride: 1024
parameters:
{parameters}constraints: {json.dumps(constraints)}
objectives:
  decode_tokens_per_s: decode_tokens_per_s
"""
    path = tmp_path / "spec.yaml"
    path.write_text(
        text + ("  decode_tokens_per_j: decode_tokens_per_j\n  watts: power_w\n" if "power" in parameters else "")
    )
    return str(path)


def test_a_power_constraint_is_checked_once_a_point_has_run(tmp_path):
    """Under a 300 W limit the prefill is held to 300 W, the run averages less; under 700 W it
    draws more than 300 W on average: the constraint rules it out but keeps what it computed."""
    pytest.importorskip("pyarrow")
    _, results = archsim.sweep(_spec(tmp_path, ["power_w <= 300", "area_mm2 <= 850"]), tmp_path / "out", workers=1)
    rows = {r["limit_w"]: r for r in results.rows()}
    assert rows[300.0]["status"] == "ok" and rows[300.0]["watts"] <= 300
    assert rows[700.0]["status"] == "infeasible" and rows[700.0]["watts"] > 300
    assert rows[700.0]["error"].startswith("constraint not met: power_w <= 300 (power_w = ")


def test_an_area_constraint_rules_a_design_out_before_it_runs(tmp_path):
    pytest.importorskip("pyarrow")
    _, results = archsim.sweep(_spec(tmp_path, ["area_mm2 <= 800"]), tmp_path / "out", workers=1)
    for r in results.rows():
        assert r["status"] == "infeasible" and r["watts"] is None
        assert r["error"] == "constraint not met: area_mm2 <= 800 (area_mm2 = 808.9)"


def test_a_chip_without_the_section_a_constraint_needs_fails_with_why(tmp_path):
    pytest.importorskip("pyarrow")
    clock = "  clock_ghz:\n    path: hardware.clock\n    values: [1.0]\n    unit: GHz\n"
    spec = _spec(tmp_path, ["area_mm2 <= 800"], "scalesim_ws_128x128", clock)
    _, results = archsim.sweep(spec, tmp_path / "out", workers=1)
    (row,) = results.rows()
    assert row["status"] == "failed"
    assert row["error"] == "area_mm2: the chip file has no area section (area_mm2 <= 800)"


def test_the_shipped_energy_spec_maximises_tokens_per_joule_under_area_and_power():
    from archsim.api.calls import shipped_spec
    from archsim.sweep.evaluate import split_constraints
    from archsim.sweep.spec import load_spec

    spec = load_spec(shipped_spec("h200_energy"))
    before, after = split_constraints(spec.constraints)
    assert [c.text for c in before] == ["fits_hbm", "area_mm2 <= 800"]
    assert [c.text for c in after] == ["power_w <= 600"]
    assert "decode_tokens_per_j" in {o.name for o in spec.objectives}


@pytest.mark.parametrize("chip", ["h100", "h200"])
def test_decode_power_rises_and_joules_per_token_fall_with_batch(chip):
    """Llama-3-8B decode on the shipped H100 and H200 (the README's curves): a bigger batch
    draws more power and spends much less energy per token, never above the power limit."""
    system, w = load_system(chip)[0], load_workload("llama3_8b")[0]
    power, joules = [], []
    for batch in (1, 8, 64, 256):
        wb = replace(w, scenario=replace(w.scenario, batch=batch, prompt_tokens=512, output_tokens=8))
        e = run_energy(run_generation(wb, system, kv_stride=1024), wb, system, 1024)
        power.append(e.decode_power_w)
        joules.append(e.decode_j_per_token)
        assert e.average_power_w <= e.limit_w and e.decode_power_w <= e.limit_w
    assert power == sorted(power) and joules == sorted(joules, reverse=True)
    assert joules[0] > 30 * joules[-1]


def test_the_power_table_of_a_run_without_decode_leaves_its_columns_empty():
    """A run that generates one token has a prefill step only: every op kind's decode joules,
    share and clock are '-' (three cells), and its prefill shares add to 100%."""
    from archsim.report.energy import power_table

    system, w = load_system("h200")[0], load_workload("llama3_8b")[0]
    w = replace(w, scenario=replace(w.scenario, batch=1, prompt_tokens=128, output_tokens=1))
    e = run_energy(run_generation(w, system, kv_stride=1024), w, system, 1024)
    assert e.decode is None
    t = power_table(e, system.chip.name)
    cells = [list(c.cells) for c in t.columns]
    assert t.row_count == len(e.prefill.kinds)
    assert all(cell == "-" for column in cells[4:] for cell in column)
    assert sum(float(s.rstrip("%")) for s in cells[2]) == pytest.approx(100.0, abs=0.1 * t.row_count)


def test_the_power_plot_reads_each_kinds_power_and_clock_against_the_limit(tmp_path):
    """report/energy_plots.py `power_by_kind`: one row of bars per op kind, its average power
    against the limit (top) and its held clock against the chip's (bottom); ticks read as plain
    numbers and the op kinds' names, and each bar is the kind's energy over its time."""
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from archsim.report.energy_plots import power_by_kind

    system, w = load_system("h200")[0], load_workload("llama3_8b")[0]
    w = replace(w, scenario=replace(w.scenario, batch=2, prompt_tokens=512, output_tokens=2))
    e = run_energy(run_generation(w, system, 64), w, system, 64)
    drawn: list[Figure] = []
    savefig = Figure.savefig

    def keep(fig, *args, **kwargs):
        drawn.append(fig)
        return savefig(fig, *args, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Figure, "savefig", keep)
        path = power_by_kind(tmp_path / "p.png", [("prefill", e.prefill), ("decode", e.decode)], 700.0, 1.98e9)
    assert path.stat().st_size > 10_000
    (fig,) = drawn
    FigureCanvasAgg(fig).draw()
    power, clock = fig.axes[0], fig.axes[2]  # the prefill's column: row-major, two steps a row
    kinds = sorted(e.prefill.kinds, key=lambda k: k.time_s)
    assert [t.get_text() for t in power.get_yticklabels()] == [k.kind.value for k in kinds]
    assert [t.get_text() for t in clock.get_yticklabels()] == [k.kind.value for k in kinds]
    for ax in (power, clock):
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels and all(re.fullmatch(r"[\d.,]+", t) for t in labels), labels
    bars = {k.kind.value: p.get_width() for k, p in zip(kinds, power.patches)}
    gemm = next(k for k in kinds if k.kind.value == "gemm")
    assert bars["gemm"] == pytest.approx(gemm.energy.total_j / gemm.time_s)
    assert bars["gemm"] <= 700.0  # held under the limit
    limit_x = [line.get_xdata()[0] for line in power.get_lines()]
    assert limit_x == [700.0]
    held = {k.kind.value: p.get_width() for k, p in zip(kinds, clock.patches)}
    assert (
        held["gemm"] == pytest.approx(gemm.clock_hz / 1e9) and held["gemm"] < 1.98
    )  # a 512-token prefill's GEMMs are held
