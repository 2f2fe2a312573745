"""The command line as a user runs it."""

import json

from archsim.cli import main


def test_run_json_has_the_promised_fields(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--batch", "2", "--prompt", "256", "--generate", "8", "--json", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    for key in ("ttft_s", "tpot_s", "throughput_tokens_per_s", "config_hash", "config"):
        assert key in data
    assert {"weights_bytes", "kv_cache_bytes", "capacity_bytes"} <= set(data["memory"])
    for phase in ("prefill", "decode"):
        op = data[phase]["ops"][0]
        assert {"kind", "name", "time_s", "compute_cycles", "stall_cycles", "hbm_bytes", "bound"} <= set(op)
    assert data["ttft_s"] > 0 and data["tpot_s"] > 0


def test_same_inputs_same_json(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for p in (a, b):
        assert main(["run", "--prompt", "128", "--generate", "4", "--json", str(p), "--quiet"]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_bad_flag_exits_2(capsys):
    try:
        main(["run", "--batch", "-3"])
    except SystemExit as e:
        assert e.code == 2
    assert "--batch: must be greater than zero (got -3)" in capsys.readouterr().err


def test_unknown_chip_exits_2(capsys):
    assert main(["run", "--hw", "h201"]) == 2
    assert "did you mean 'h200'" in capsys.readouterr().err


def test_does_not_fit_exits_2(capsys):
    assert main(["run", "--hw", "tpu_v5e", "--workload", "llama3_70b"]) == 2
    assert "does not fit" in capsys.readouterr().err


def test_a_format_the_chip_lacks_is_refused_not_costed_at_another(capsys):
    # Ampere has no fp8 MMA: attention maths in fp8 are refused (exit 2) naming the formats the
    # chip has; an fp8 KV cache under bf16 maths is the dequantising kernel serving engines run
    # there (each K/V block converted as it arrives), so it runs.
    assert main(["run", "--hw", "a100_pcie", "--set", "workload.dtypes.attention=fp8"]) == 2
    err = capsys.readouterr().err
    assert "attention" in err and "no fp8 rate" in err and "bf16, fp16, int8" in err
    assert main(["run", "--hw", "a100_pcie", "--set", "workload.dtypes.kv_cache=fp8", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["op", "gemm", "--hw", "a100_pcie", "--dtype", "fp8", "--M", "64", "--K", "64", "--N", "64"]) == 2
    assert "no fp8 rate" in capsys.readouterr().err
    # fp8 weights with bf16 activations run at the bf16 rate (weight-only): not refused
    assert main(["run", "--hw", "a100_pcie", "--set", "workload.dtypes.weights=fp8", "--format", "json"]) == 0


def test_op_gemm_json(tmp_path):
    out = tmp_path / "op.json"
    assert main(["op", "gemm", "--M", "128", "--K", "4096", "--N", "4096", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["cycles"] >= data["compute_cycles"] > 0 and data["stall_cycles"] >= 0 and data["time_s"] > 0


def test_op_says_when_the_power_limit_holds_the_clock(capsys):
    """A 4096^3 GEMM draws more than the A100 PCIe's 300 W at 1.41 GHz: the line names the limit
    and the clock it holds (the JSON's clock_hz); a 64^3 GEMM is held by nothing."""
    assert main(["op", "gemm", "--hw", "a100_pcie", "--M", "4096", "--K", "4096", "--N", "4096"]) == 0
    held = " ".join(capsys.readouterr().out.split())
    assert "the 300 W power limit holds it at" in held and "(of 1.41)" in held
    assert main(["op", "gemm", "--hw", "a100_pcie", "--M", "64", "--K", "64", "--N", "64"]) == 0
    assert "power limit" not in capsys.readouterr().out


def test_op_takes_hardware_values_as_run_does(tmp_path, capsys):
    # a 1 x 8192 x 8192 GEMV streams its 134 MB of weights from HBM: at half the pin rate the
    # stream takes twice as long, less than twice in all for its fixed costs and latencies
    base, half = tmp_path / "base.json", tmp_path / "half.json"
    gemv = ["op", "gemm", "--M", "1", "--K", "8192", "--N", "8192", "--json"]
    assert main([*gemv, str(base)]) == 0
    assert main([*gemv, str(half), "--set", "hardware.hbm.data_rate=3.125 Gbps"]) == 0
    a, b = (json.loads(p.read_text()) for p in (base, half))
    assert 1.8 < b["time_s"] / a["time_s"] < 2.0
    assert b["config"]["hardware"]["hbm"]["data_rate"] != a["config"]["hardware"]["hbm"]["data_rate"]
    assert b["config_hash"] != a["config_hash"]
    capsys.readouterr()
    assert main(["op", "gemm", "--M", "1", "--K", "64", "--N", "64", "--set", "workload.scenario.batch=2"]) == 2
    assert "--set: workload.scenario.batch: archsim op runs no workload" in capsys.readouterr().err
    assert main(["op", "gemm", "--M", "1", "--K", "64", "--N", "64", "--set", "hardware.hbm.data_rate=-1 Gbps"]) == 2
    assert "--set: hardware.hbm.data_rate: must be greater than zero" in capsys.readouterr().err


def test_op_strided_vector_and_misplaced_flag(tmp_path, capsys):
    out = tmp_path / "mul.json"
    assert main(["op", "mul", "--M", "512", "--N", "4096", "--strided", "--json", str(out)]) == 0
    strided = json.loads(out.read_text())
    assert main(["op", "mul", "--M", "512", "--N", "4096", "--json", str(out)]) == 0
    assert strided["time_s"] > json.loads(out.read_text())["time_s"]
    assert main(["op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--hot"]) == 2
    assert "--hot: applies to vector ops and copies, not gemm" in capsys.readouterr().err


def test_op_needs_its_sizes(capsys):
    """No 1x1x1 GEMM by default: an op without its sizes is refused, naming what is missing."""
    assert main(["op", "gemm", "--M", "128"]) == 2
    assert "op gemm needs its sizes: --M, --K, --N (missing --K, --N)" in capsys.readouterr().err
    assert main(["op", "rmsnorm", "--M", "4"]) == 2
    assert "op rmsnorm needs its sizes: --M, --N (missing --N)" in capsys.readouterr().err
    assert main(["op", "allreduce", "--hw", "h200x8"]) == 2
    assert "(missing --bytes)" in capsys.readouterr().err


def test_validate_all_runs_each_set_on_its_own_chip(tmp_path, capsys):
    out = tmp_path / "all.json"
    assert main(["validate", "all", "--kind", "copy", "--quiet", "--json", str(out)]) == 0
    sets = json.loads(out.read_text())["sets"]
    # the H200 sets have 9 and 4 copies; the A100 set has none, and keeps its chip
    assert sets["h200_calibration"]["calibration"]["copy"]["n"] == 9
    assert sets["h200_holdout"]["development"]["copy"]["n"] == 4
    assert sets["a100_calibration"]["chip"] == "a100_pcie"
    capsys.readouterr()
    assert main(["validate", "all", "--kind", "copy", "--quiet", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()  # a header, then the table's rows: own fit, then transfer
    assert lines[0] == "chip,set,role,kind,n,mean_abs_error_pct,max_abs_error_pct,floor_pct"
    assert [line.split(",")[:5] for line in lines[1:]] == [
        ["h200", "h200_calibration", "calibration", "copy", "9"],
        ["h200", "h200_holdout", "development", "copy", "4"],
        ["h200", "h200_calibration", "calibration (transfer from a100_pcie)", "copy", "9"],
        ["h200", "h200_holdout", "held out (transfer from a100_pcie)", "copy", "4"],
    ]
    assert main(["validate", "all", "--hw", "h200"]) == 2
    assert "--hw: does not apply to 'validate all'" in capsys.readouterr().err


def test_op_shows_a_progress_line_while_it_simulates(monkeypatch, capsys):
    """`archsim op` runs its size check and simulation under a progress line (on a terminal),
    as run, serve and validate do: an op on a small array can take seconds."""
    import contextlib

    from archsim.commands import op

    labels = []

    @contextlib.contextmanager
    def recorded(args, label, *a, **kw):
        labels.append(label)
        yield None

    monkeypatch.setattr(op, "progress", recorded)
    assert main(["op", "gemm", "--M", "64", "--K", "64", "--N", "64", "--hw", "scalesim_ws_32x32"]) == 0
    assert labels == ["simulating the gemm on SCALE-Sim 32x32 WS"]


def test_a_run_freezes_what_starting_made_only_in_a_process_of_its_own(monkeypatch):
    """`archsim run` in its own process (console_main) moves what starting made out of the
    garbage collector's full passes once its inputs are loaded; the same command through
    `main` in this process (a test's) freezes nothing, as this process goes on making and
    dropping objects."""
    import gc

    from archsim import commands

    gc.unfreeze()
    main(["run", "--batch", "1", "--prompt", "16", "--generate", "2", "--quiet"])
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(commands, "_own_process", [True])
    try:
        main(["run", "--batch", "1", "--prompt", "16", "--generate", "2", "--quiet"])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
