"""`archsim run`'s default output: a summary that fits one screen, TTFT and TPOT first, the bound
of each phase and one line of diagnosis; the per-op tables (with their legend) behind --ops."""

from archsim.cli import main
from archsim.report.tables import STEP_LEGEND

SHORT = ["run", "--prompt", "256", "--generate", "4"]


def _printed(capsys, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(args) == 0
    return capsys.readouterr().out


def test_run_prints_a_summary_of_at_most_40_lines_naming_ttft_and_tpot_first(capsys, monkeypatch):
    text = _printed(capsys, monkeypatch, ["run"])
    lines = text.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 80
    head = "\n".join(lines[:4])
    assert "TTFT" in head and "TPOT" in head
    assert "comp cyc" not in text.replace("\n", " ") and "qkv" not in text  # no per-op table
    # llama3_8b at batch 1 on an H200: the 2048-token prefill is matrix-bound, decode HBM-bound
    assert "prefill bound by" in text and "compute: matrix units" in text
    assert "decode bound by" in text and "memory: HBM bandwidth" in text
    diagnosis = " ".join(text.split("diagnosis:")[1].split("\n")[:2])
    assert "decode" in diagnosis.split("(")[0] and "HBM bandwidth" in diagnosis
    assert "--ops" in text


def test_ops_adds_the_per_op_tables_each_with_its_legend(capsys, monkeypatch):
    text = _printed(capsys, monkeypatch, [*SHORT, "--ops"])
    words = " ".join(text.split())
    assert "prefill step" in words and "first decode step" in words and "qkv" in words
    legend = " ".join(STEP_LEGEND.split())
    assert words.count(legend) == 2  # under each step table
    for term in ("x:", "share:", "bound:", "comp cyc:", "top cause:", "util:", "mat ", "hbm ", "fixed "):
        assert term in legend, term  # every header and abbreviation the table uses is named
    quiet = _printed(capsys, monkeypatch, [*SHORT, "--quiet"])
    assert "TTFT" in quiet and "qkv" not in quiet and "--ops" not in quiet
