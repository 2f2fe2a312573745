"""What commands print: tables that read at 80 columns, 3 significant figures, --format,
--wide, and flags that cannot mislead."""

import csv
import io
import json
import re

import pytest

from archsim.cli import main
from archsim.units import format_seconds

RUN = ["run", "--prompt", "256", "--generate", "4"]


def printed(capsys, monkeypatch, args: list[str], columns: int = 80) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_at_80_columns_shows_every_column_and_full_op_names(capsys, monkeypatch, tmp_path):
    path = tmp_path / "r.json"
    code, text, _ = printed(capsys, monkeypatch, [*RUN, "--ops", "--json", str(path)])
    assert code == 0
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in text
    ops = {o["name"] for step in ("prefill", "decode") for o in json.loads(path.read_text())[step]["ops"]}
    words = set(text.split())
    assert ops <= words  # every op name whole
    for header in ("op", "x", "time", "share", "bound", "comp", "cyc", "top", "cause", "FLOP/s", "HBM", "B/s", "util"):
        assert header in words, header


def test_scale_at_80_columns_keeps_every_column(capsys, monkeypatch):
    code, text, _ = printed(capsys, monkeypatch, ["scale", "--workload", "llama3_8b", "--tp", "1,2"])
    assert code == 0 and max(map(len, text.splitlines())) <= 80 and "…" not in text
    header = " ".join(text.split("───")[0].split())
    for word in ("TP", "fits", "decode", "step", "collectives", "share", "all-reduce", "tokens/s", "speed-up", "gain"):
        assert word in header, word
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2"] and all(r[1] == "yes" for r in rows)


def test_wide_does_not_fold(capsys, monkeypatch):
    code, text, _ = printed(capsys, monkeypatch, [*RUN, "--ops", "--wide"])
    assert code == 0 and "comp cyc" in text and max(map(len, text.splitlines())) > 80


def test_three_significant_figures():
    assert [format_seconds(t) for t in (4.9965e-3, 0.9996, 12.34, 850e-6, 1234.4, 0)] == [
        "5.00 ms",
        "1.00 s",
        "12.3 s",
        "850 us",
        "1,234 s",
        "0 s",
    ]


def test_format_json_and_csv_on_stdout(capsys, monkeypatch, tmp_path):
    path = tmp_path / "r.json"
    code, text, err = printed(capsys, monkeypatch, [*RUN, "--format", "json", "--json", str(path)])
    assert code == 0 and json.loads(text) == json.loads(path.read_text())
    assert "config hash" in err  # notes go to stderr when stdout carries the document
    code, text, _ = printed(capsys, monkeypatch, [*RUN, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert code == 0 and {r["phase"] for r in rows} == {"prefill", "decode"}
    assert sum(float(r["step_time_s"]) for r in rows if r["phase"] == "prefill") == pytest.approx(
        json.loads(path.read_text())["ttft_s"], rel=1e-9
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["serve", "--slo-ttft", "200"],
            "argument --slo-ttft: a duration needs its unit, e.g. 200ms or 0.2s (got '200')",
        ),
        (["run", "--trace", "t.json"], "--trace was renamed: use --trace-out PATH"),
        (["serve", "--trace", "x.csv"], "--trace was renamed: use --requests-from FILE"),
        (["serve", "--timeline", "t.json"], "--timeline was renamed: use --trace-out PATH"),
        (["run", "--gen", "4"], "unrecognized arguments: --gen"),  # no abbreviations
        (["run", "--set", "no_such.key=8"], "expected hardware.PATH=VALUE or workload.PATH=VALUE"),
    ],
)
def test_flags_that_cannot_mislead(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_set_changes_a_file_value_and_says_where_a_bad_one_came_from(capsys, tmp_path):
    """fp8 weights halve Llama-3-70B's 141 GB of bf16 weights, so it fits on one 80 GB H100."""
    assert (
        main(["run", "--hw", "h100", "--workload", "llama3_70b", "--prompt", "64", "--generate", "2", "--quiet"]) == 2
    )
    assert "does not fit" in capsys.readouterr().err
    out = tmp_path / "r.json"
    args = ["run", "--hw", "h100", "--workload", "llama3_70b", "--prompt", "64", "--generate", "2", "--quiet"]
    args += ["--json", str(out)]
    assert main([*args, "--set", "workload.dtypes.weights=fp8"]) == 0
    assert json.loads(out.read_text())["memory"]["weights_bytes"] == pytest.approx(70.6e9, rel=0.01)
    assert main([*args, "--set", "hardware.hbm.data_rate=-3 Gbps"]) == 2
    assert "--set: hardware.hbm.data_rate: must be greater than zero (got '-3 Gbps')" in capsys.readouterr().err


def test_version(capsys):
    import archsim

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"archsim {archsim.__version__}"


TABLE_COMMANDS = {  # each command that prints a table, small enough to run in a test
    "run": [
        "run",
        "--hw",
        "h200x8",
        "--workload",
        "llama3_70b",
        "--tp",
        "8",
        "--prompt",
        "64",
        "--generate",
        "2",
        "--ops",
    ],
    "op": ["op", "gemm", "--M", "128", "--K", "4096", "--N", "4096", "--dtype", "fp8"],
    "list": ["list"],
    "compare": ["compare", "h100", "h200", "dataflow_2stack", "--prompt", "64", "--generate", "2"],
    "scale": ["scale", "--workload", "llama3_8b", "--tp", "1,2"],
    "serve": ["serve", "--rate", "1", "--requests", "20", "--prompt", "128", "--generate", "8"],
    "validate": ["validate", "h200_calibration"],
}


@pytest.mark.parametrize("command", sorted(TABLE_COMMANDS))
def test_no_token_split_at_80_columns(capsys, monkeypatch, tmp_path, command):
    """At 80 columns into a pipe, every name and number of the document (--json, or --format json)
    is whole on one line of the table: a word of the table text, not two halves on two lines."""
    args = TABLE_COMMANDS[command]
    code, text, _ = printed(capsys, monkeypatch, args)
    assert code == 0
    assert max(map(len, text.splitlines())) <= 80
    words = {w.strip("│┃,;()") for w in text.split()}
    code, doc, _ = printed(capsys, monkeypatch, [*args, "--format", "json"])
    names = set()

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("name", "op", "chip", "hw", "workload", "system") and isinstance(x, str) and " " not in x:
                    names.add(x)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    if code == 0 and doc.lstrip().startswith(("{", "[")):
        walk(json.loads(doc))
    split = {n for n in names if n not in words and any(w and n.startswith(w) and w != n for w in words)}
    assert not split, split
    for line in text.splitlines():  # no number or name cut at the line's end: "1.299e" / "+04", "a3" / "b"
        last = line.rstrip(" │┃").split()[-1:] or [""]
        assert not re.fullmatch(r"[\d.]+e|\w+_", last[0]), line
    assert "time per output token" in text or command != "serve"
