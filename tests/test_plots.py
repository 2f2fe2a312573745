"""PNG plots, the per-op CSV and table widths: written, non-empty, readable in a terminal."""

import csv
import json
import re

import pytest
from rich.console import Console

from archsim.cli import main
from archsim.graph.builder import Step
from archsim.graph.model import Phase
from archsim.report.plots import time_parts
from archsim.report.tables import si, step_table
from archsim.runner.generation import simulate_step

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
pytest.importorskip("matplotlib")


def is_png(path) -> bool:
    data = path.read_bytes()
    return len(data) > 5000 and data.startswith(PNG_MAGIC)


def test_run_plots_and_csv(tmp_path, capsys):
    """A small chip, so the capacity limit (and the tokens/s sweep up to it) stays small."""
    plots, table, result = tmp_path / "plots", tmp_path / "ops.csv", tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--hw",
                "tpu_v5e",
                "--workload",
                "llama2_7b",
                "--prompt",
                "64",
                "--generate",
                "4",
                "--quiet",
                "--plots",
                str(plots),
                "--csv",
                str(table),
                "--json",
                str(result),
            ]
        )
        == 0
    )
    names = ("roofline.png", "breakdown.png", "decode_kv.png", "memory.png", "throughput_batch.png")
    names += ("energy.png", "power_kind.png", "power_batch.png")  # the TPU v5e has a power section
    for name in names:
        assert is_png(plots / name), name
    rows = list(csv.DictReader(table.open()))
    run = json.loads(result.read_text())
    assert [r["phase"] for r in rows] == ["prefill"] * len(run["prefill"]["ops"]) + ["decode"] * len(
        run["decode"]["ops"]
    )
    assert [r["op"] for r in rows[: len(run["prefill"]["ops"])]] == [o["name"] for o in run["prefill"]["ops"]]
    prefill_s = sum(float(r["step_time_s"]) for r in rows if r["phase"] == "prefill")
    assert prefill_s == pytest.approx(run["ttft_s"], rel=1e-9)
    assert {"bound", "arithmetic_intensity", "stall_cycles"} <= set(rows[0])


def test_time_parts_add_up_to_the_step(h200, llama8b):
    step = simulate_step(llama8b, h200, Step(Phase.DECODE, 4, 1, 256))
    parts = time_parts(step)
    assert sum(sum(p.values()) for p in parts.values()) == pytest.approx(step.time_s, rel=1e-9)
    assert all(v >= 0 for p in parts.values() for v in p.values())


def test_per_op_table_fits_120_columns(h200, llama8b):
    step = simulate_step(llama8b, h200, Step(Phase.PREFILL, 1, 512, 0))
    console = Console(width=120, record=True)
    console.print(step_table(step, "prefill step", h200.chip.clock_hz))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "…" not in text  # no cell cut short


def test_si_numbers():
    assert [si(5.35e14), si(4.5e12), si(1.234e10), si(870), si(0), si(999_999)] == [
        "535T",
        "4.5T",
        "12.3G",
        "870",
        "0",
        "1M",
    ]


def test_roofline_places_ops_by_what_they_have(h200, llama8b):
    """An op without FLOPs (the embedding gather, the KV-cache write) has no intensity; one with
    FLOPs but no HBM bytes (its input in L2) has an unbounded one; the rest are placed at
    FLOPs / HBM bytes."""
    from archsim.report.roofline import where_ops_go

    step = simulate_step(llama8b, h200, Step(Phase.DECODE, 1, 1, 256))
    placed, no_flops, in_l2 = where_ops_go(step)
    by_name = {r.op.name: r.timing for r in step.ops}
    assert set(no_flops) == {n for n, t in by_name.items() if t.flops == 0} >= {"embedding", "kv_write"}
    assert set(in_l2) == {n for n, t in by_name.items() if t.flops > 0 and t.hbm_bytes == 0}
    assert len(placed) + len(no_flops) + len(in_l2) == len(step.ops)
    for r, x, y in placed:
        assert x == pytest.approx(r.timing.flops / r.timing.hbm_bytes) and y == pytest.approx(r.timing.achieved_flops)


def test_nearby_roofline_labels_merge():
    """(1, 4e12) and (1.2, 3e12) are 0.08 and 0.12 decades apart: one label; (10, 4e12) is a decade away."""
    from archsim.report.roofline import label_clusters

    clusters = label_clusters([(1.0, 4e12, "qkv"), (1.2, 3e12, "down"), (10.0, 4e12, "attention"), (1.0, 4e12, "qkv")])
    assert sorted((x, names) for x, _, names in clusters) == [(1.0, ["qkv", "down"]), (10.0, ["attention"])]


def test_decode_by_kv_draws_a_run_without_curves(tmp_path, h200, llama8b):
    """The decode plot of a run alone (no wider curves given): its own steps only."""
    from dataclasses import replace

    from archsim.report.plots import decode_by_kv
    from archsim.runner.generation import run_generation

    w = replace(llama8b, scenario=replace(llama8b.scenario, batch=1, prompt_tokens=64, output_tokens=4))
    run = run_generation(w, h200, kv_stride=1024)
    assert is_png(decode_by_kv(tmp_path / "alone.png", [("h200", run)]))
    assert is_png(decode_by_kv(tmp_path / "empty.png", [("h200", run)], []))


PLOTTING = {  # each command that draws, small enough to run in a test, and the plots it draws
    "run": ["run", "--hw", "tpu_v5e", "--workload", "llama2_7b", "--prompt", "64", "--generate", "4", "--quiet"],
    "compare": ["compare", "h200", "h100", "--batch", "8", "--prompt", "64", "--generate", "4"],
    "serve": ["serve", "--rate", "2", "--requests", "30", "--prompt", "128", "--generate", "16", "--quiet"],
}
RAW_TICK = re.compile(r"\\mathdefault|\$|\de[+-]\d")  # mathtext left as text, 1.06e+03


@pytest.mark.parametrize("command", sorted(PLOTTING))
def test_every_tick_label_reads_as_a_plain_number(tmp_path, monkeypatch, capsys, command):
    """Every figure a command saves is drawn (Agg) and its tick labels read: none is mathtext
    left as text (`$\\mathdefault{10^{0}}$`) or a number in e-notation; log axes included."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    savefig = Figure.savefig

    def keep(fig, *args, **kwargs):
        drawn.append(fig)
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    assert main([*PLOTTING[command], "--plots", str(tmp_path)]) == 0
    assert drawn
    logs = 0
    for fig in drawn:
        FigureCanvasAgg(fig).draw()
        for ax in fig.axes:
            logs += (ax.get_xscale() == "log") + (ax.get_yscale() == "log")
            for minor in (False, True):
                labels = [t.get_text() for t in (*ax.get_xticklabels(minor=minor), *ax.get_yticklabels(minor=minor))]
                raw = [t for t in labels if RAW_TICK.search(t)]
                assert not raw, (command, ax.get_title(), raw)
    assert logs or command != "run"  # the roofline and joules per token are log axes


def test_names_with_math_characters_are_drawn_as_written(tmp_path):
    """A `$` in a name is escaped wherever it is drawn (ticks, title, legend), not read as math:
    `$\\frac{a}{` would otherwise fail to draw; `_` outside math is plain text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from archsim.report.plots import bar_number, figure, literal, readable_number

    names = ["chip_$\\frac{a}{", "a$b$c"]
    fig, ax = figure()
    ax.barh(names, [1060.0, 4.56], label="$x$ roof")
    ax.set_title("on $\\frac{a}{")
    ax.legend()
    FigureCanvasAgg(fig).draw()  # raises on unescaped mathtext
    assert [t.get_text() for t in ax.get_yticklabels()] == ["chip_\\$\\frac{a}{", "a\\$b\\$c"]
    assert literal("a\\$b") == "a\\$b"  # escaped once, not twice
    assert [bar_number(v) for v in (1060.0, 4.56, 0.0123)] == ["1,060", "4.56", "0.0123"]
    assert [readable_number(v) for v in (0.1, 1.0, 2000.0, 1e4, 1e6, 1e-4)] == ["0.1", "1", "2000", "10k", "1M", "100u"]


def test_the_batch_plot_marks_where_decode_turns_compute_bound():
    """Llama-3-8B on the H200 with a 16-token prompt: the decode step re-reads 16 GB of weights.
    At batch 1 and 64 a GEMM's M is far below the ridge point (1,071 TFLOP/s / 4.8 TB/s = 223
    FLOP/B, about 223 rows of bf16 weights), so decode is memory-bound; at 512 rows it is
    compute-bound. A memory-bound batch after a compute-bound one starts the count again."""
    import archsim
    from archsim.report.plots import compute_bound_from

    h200 = archsim.load_system("h200")
    runs = {
        b: archsim.run(
            h200, archsim.load_workload("llama3_8b", scenario={"batch": b, "prompt_tokens": 16, "output_tokens": 2})
        ).result
        for b in (1, 64, 512)
    }
    assert compute_bound_from([1, 64, 512], [runs[1], runs[64], runs[512]]) == 512
    assert compute_bound_from([1, 64], [runs[1], runs[64]]) is None
    assert compute_bound_from([512, 1], [runs[512], runs[1]]) is None


def test_the_roofline_names_its_ridge_point(h200, llama8b):
    """1,071 TFLOP/s of bf16 over 4.8 TB/s of HBM: the ridge at 223 FLOP per byte."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from archsim.report.roofline import _roofs

    fig, ax = plt.subplots()
    _roofs(ax, h200.chip, llama8b.dtypes.activations, [1.0, 1000.0])
    ridge = [line for line in ax.get_lines() if line.get_label().startswith("ridge point")]
    plt.close(fig)
    assert [line.get_label() for line in ridge] == ["ridge point 223 FLOP/B"]
    assert ridge[0].get_xdata()[0] == pytest.approx(h200.chip.peak_flops(llama8b.dtypes.activations) / 4.8e12)
