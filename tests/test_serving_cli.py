"""`archsim serve` as a user runs it (a two-layer model keeps the steps cheap)."""

import json

import pytest

from archsim.cli import main


def serve_json(tmp_path, *args) -> dict:
    out = tmp_path / "serve.json"
    assert main(["serve", *args, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def test_serve_json_has_the_promised_fields(tmp_path, tiny):
    data = serve_json(
        tmp_path,
        "--workload",
        tiny,
        "--requests",
        "40",
        "--rate",
        "500",
        "--prompt",
        "uniform:16:200",
        "--generate",
        "exponential:20",
        "--slo-ttft",
        "1ms",
        "--slo-tpot",
        "0.2 ms",
        "--host",
        "none",  # the tiny model's steps take microseconds: the SLOs are set for the bare GPU
    )
    assert data["requests"] == 40
    for key in ("ttft_s", "tpot_s", "e2e_s", "itl_s", "queue_s"):
        assert set(data[key]) == {"mean", "p50", "p90", "p99"}
        assert data[key]["p50"] <= data[key]["p99"]
    for key in (
        "throughput_tokens_per_s",
        "goodput_requests_per_s",
        "preemptions",
        "config_hash",
        "kv_cache",
        "batch_size",
        "instances",
        "littles_law",
    ):
        assert key in data
    assert data["slo"] == {"ttft_s": 0.001, "tpot_s": 0.0002}
    assert 0 < data["goodput_requests_per_s"] <= data["requests_per_s"]
    assert data["instances"][0]["over_time"]["kv_cache_use"]


def test_same_inputs_same_json(tmp_path, tiny):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    for p in (a, b):
        args = ["serve", "--workload", tiny, "--requests", "30", "--rate", "800", "--json", str(p), "--quiet"]
        assert main(args) == 0
    assert a.read_bytes() == b.read_bytes()


def test_trace_with_plots_and_timeline(tmp_path, tiny):
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"arrival_s": i * 0.001, "prompt_tokens": 50 + i, "output_tokens": 5}) + "\n" for i in range(20)
        )
    )
    timeline = tmp_path / "timeline.json"
    data = serve_json(
        tmp_path,
        "--workload",
        tiny,
        "--requests-from",
        str(trace),
        "--time-scale",
        "0.5",
        "--policy",
        "sarathi",
        "--plots",
        str(tmp_path / "plots"),
        "--trace-out",
        str(timeline),
    )
    assert data["requests"] == 20 and data["config"]["options"]["serving"]["max_batched_tokens"] == 512
    for name in ("latency_cdf.png", "kv_cache.png", "batch_size.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 1000
    events = json.loads(timeline.read_text())["traceEvents"]
    spans = {e["name"] for e in events if e["ph"] == "X"}
    assert {"prefill", "decode"} <= spans and any(e["ph"] == "C" for e in events)


def test_disaggregated_and_capacity(tmp_path, tiny):
    data = serve_json(
        tmp_path,
        "--workload",
        tiny,
        "--requests",
        "30",
        "--rate",
        "300",
        "--prefill-instances",
        "1",
        "--decode-instances",
        "2",
        "--decode-hw",
        "a100",
    )
    assert [i["role"] for i in data["instances"]] == ["prefill", "decode", "decode"]
    assert data["instances"][1]["chip_name"] != data["instances"][0]["chip_name"]
    data = serve_json(
        tmp_path,
        *("--workload", tiny, "--requests", "60", "--rate", "200", "--slo-ttft", "0.5ms", "--find-capacity"),
        *("--host", "none"),
    )
    assert data["capacity"]["rate_per_s"] > 0 and data["capacity"]["attainment"] >= 0.9


@pytest.mark.parametrize(
    "args,message",
    [
        (["--find-capacity"], "--find-capacity needs --slo-ttft"),
        (["--requests-from", "azure_llm_2023_code", "--prompt", "5"], "--prompt does not apply to --requests-from"),
        (["--time-scale", "2"], "--time-scale applies to --requests-from only"),
        (["--policy", "static", "--decode-instances", "2"], "static batching cannot be disaggregated"),
        (["--requests-from", "nope.csv"], "nope.csv: no such trace file"),
    ],
)
def test_bad_input_exits_2(capsys, args, message):
    assert main(["serve", *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_flag_values_exit_2(capsys):
    for args, message in (
        (["--prompt", "uniform:9:3"], "--prompt: uniform:LO:HI needs"),
        (["--slo-ttft", "fast"], "--slo-ttft: not a quantity"),
        (["--gpu-memory-utilization", "1.5"], "must be in (0, 1]"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["serve", *args])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
