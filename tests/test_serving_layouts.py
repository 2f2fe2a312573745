"""Serving on layouts of chips, memory as engines plan it, and the command line's layouts, offline
mode and capacity search."""

import json
from dataclasses import replace

import pytest

from archsim.api import load_system
from archsim.cli import main
from archsim.config.loader import load_workload
from archsim.graph.model import Scenario
from archsim.graph.parallel import Parallelism
from archsim.runner.generation import run_generation
from archsim.runner.memory import largest_batch
from archsim.serving.kvpool import size_pool
from archsim.serving.requests import make_requests
from archsim.serving.setup import ServeSetup, ServeSetupError
from archsim.serving.simulate import serve


def test_largest_batch_as_an_engine_plans_memory(h200, llama8b):
    # context 2048 + 256 = 2304 tokens x 131,072 B = 301,989,888 B a sequence. 90% of the 143,771 MiB
    # (150,754,820,096 B) the device reports, less 16,060,522,496 B of weights, less 735,313,920 B of
    # one step's activations = 118,883,501,670 B: 393 sequences (the whole batch prefilling at once
    # would leave room for far fewer)
    assert largest_batch(llama8b, h200) == 393


def test_llama3_70b_bf16_serves_on_one_h200_as_engines_run_it():
    w = load_workload("llama3_70b")[0]
    h200 = load_system("h200").system
    # 150,754,820,096 B x 0.95 = 143,217,079,091.2 B less 141,107,412,992 B of weights less
    # 8192 x (2 x 28672 + 2 x 8192) x 2 B + 256 x 128256 x 4 B = 1,339,293,696 B of activations leaves
    # 770,372,403.2 B of KV: 146 blocks of 16 x 327,680 B (2,336 tokens)
    pool = size_pool(w, h200, 16, 0.95, 8192, 256)
    assert pool.blocks == 146
    with pytest.raises(Exception, match="leaves no room for a KV cache"):
        size_pool(w, h200, 16, 0.9, 8192, 256)  # at vLLM's default 0.9 it does not fit


def test_a_request_at_low_load_sees_the_pipeline_steps_of_archsim_run(llama8b):
    eight = load_system("h200x8").system
    setup = ServeSetup(llama8b, eight, parallelism=Parallelism(pp=2), resolution=0)
    reqs = make_requests([0.0, 100.0], [300, 300], [24, 24])
    m = serve(reqs, setup).metrics()
    run = run_generation(replace(llama8b, scenario=Scenario(1, 300, 24)), eight, parallelism=Parallelism(pp=2))
    # one sequence, one micro-batch: each decode step is 2 x (stage + send), as run times it
    assert m.tpot_s.mean == pytest.approx(run.tpot_s, rel=0.01)
    single = serve(reqs, ServeSetup(llama8b, replace(eight, chips=1, interconnect=None), resolution=0)).metrics()
    assert m.tpot_s.mean > single.tpot_s.mean  # two stages in sequence, and a send between them


def test_tensor_parallel_layouts_and_refusals(llama8b):
    eight = load_system("h200x8").system
    reqs = make_requests([0.0, 50.0], [512, 512], [32, 32])
    tp2 = serve(reqs, ServeSetup(llama8b, eight, parallelism=Parallelism(tp=2))).metrics()
    tp1 = serve(reqs, ServeSetup(llama8b, eight, parallelism=Parallelism(tp=1))).metrics()
    assert tp2.tpot_s.mean < tp1.tpot_s.mean
    with pytest.raises(ServeSetupError, match="TP 3 must divide the 32 attention heads"):
        serve(reqs, ServeSetup(llama8b, eight, parallelism=Parallelism(tp=3)))


def test_expert_parallel_ranks_each_schedule_their_share():
    eight = load_system("h200x8").system
    mixtral = load_workload("mixtral_8x7b")[0]
    reqs = make_requests([0.01 * i for i in range(8)], [256] * 8, [8] * 8)
    res = serve(reqs, ServeSetup(mixtral, eight, parallelism=Parallelism(tp=2, ep=2)))
    assert len(res.instances) == 2 and res.metrics().requests == 8  # two ranks, four requests each


def serve_json(tmp_path, *args) -> dict:
    out = tmp_path / "serve.json"
    assert main(["serve", *args, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def test_offline_sends_every_request_at_once(tmp_path, tiny):
    data = serve_json(tmp_path, "--workload", tiny, "--requests", "400", "--offline", "--host", "none")
    assert data["requests"] == 400 and data["config"]["options"]["requests"]["rate_per_s"] is None
    # 400 x 128 prompt tokens at once, 8192 a step and 256 requests at most: the rest wait
    assert data["queue_s"]["p99"] > data["queue_s"]["p50"] >= 0 and data["queue_s"]["mean"] > 0
    assert main(["serve", "--workload", tiny, "--offline", "--rate", "3"]) == 2


def test_layout_flags_on_a_multi_chip_system(tmp_path, tiny, capsys):
    data = serve_json(
        tmp_path, "--workload", tiny, "--hw", "h200x8", "--tp", "2", "--instances", "2", "--requests", "20"
    )
    assert data["config"]["options"]["serving"]["layout"] == {"tp": 2, "pp": 1, "ep": 1}
    assert len(data["instances"]) == 2
    assert main(["serve", "--workload", tiny, "--hw", "h200", "--tp", "2"]) == 2
    assert "TP 2 needs 2 chips; NVIDIA H200 SXM x1 has 1" in capsys.readouterr().err


def test_capacity_search_says_where_each_slo_breaks(tmp_path, tiny):
    data = serve_json(
        tmp_path,
        *("--workload", tiny, "--requests", "60", "--rate", "200", "--host", "none"),
        *("--slo-ttft", "0.5ms", "--slo-tpot", "10ms", "--find-capacity"),
    )
    cap = data["capacity"]
    names = {b["name"]: b for b in cap["breaks"]}
    assert set(names) == {"TTFT", "TPOT"}
    assert names["TTFT"]["holds_to_per_s"] >= cap["rate_per_s"] * 0.999  # TTFT binds the capacity
    assert names["TTFT"]["breaks_at_per_s"] > names["TTFT"]["holds_to_per_s"]
    assert data["ttft_attainment"] >= 0.9 and 0 <= data["utilisation"] <= 1


def test_serve_takes_a_hugging_face_model_and_a_draft(tmp_path, tiny):
    data = serve_json(
        tmp_path,
        *("--model", "tests/data/hf/Meta-Llama-3-8B/config.json", "--requests", "3", "--rate", "1"),
        *("--mtp-layers", "1", "--spec-tokens", "2", "--spec-acceptance", "0.8"),
    )
    assert data["config"]["workload"]["model"]["layers"] == 32
    # E(0.8, 2) = (1 - 0.8^3) / 0.2 = 2.44 tokens a verify, over a few verifies
    assert 1.5 < data["tokens_per_verify"] <= 3.0
    assert main(["serve", "--workload", tiny, "--mtp-layers", "1"]) == 2  # no acceptance rate given
