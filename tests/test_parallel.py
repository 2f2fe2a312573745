"""Tensor, pipeline and expert parallelism: one chip's ops and collectives, the per-chip memory,
the schedules (chunked overlap, the pipeline's bubble) against hand-computed values, TP=1 equal
to the single-chip result byte for byte, the invariants, and `archsim run --tp` / `archsim scale`."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.config.loader import load_system, load_workload
from archsim.config.resolved import ResolvedConfig
from archsim.errors import DoesNotFitError
from archsim.graph.builder import Step
from archsim.graph.model import Fusion, ModelSpec, Phase, Scenario
from archsim.graph.ops import OpKind, Scaling
from archsim.graph.parallel import (
    Parallelism,
    ParallelismError,
    best_chunks,
    chip_params,
    max_chunks,
    overlapped_s,
    pipeline_step_s,
    shard_step,
)
from archsim.graph.params import total_params
from archsim.hardware.collectives import Fabric
from archsim.report.export import run_dict
from archsim.runner.generation import run_generation, simulate_step
from archsim.runner.memory import check_fits, footprint

ROOT = Path(__file__).resolve().parents[1]
H200X8 = load_system(str(ROOT / "hw_configs" / "h200x8.yaml"))[0]
LLAMA70B = load_workload(str(ROOT / "workloads" / "llama3_70b.yaml"))[0]
MIXTRAL = load_workload(str(ROOT / "workloads" / "mixtral_8x7b.yaml"))[0]


def _scenario(w, batch, prompt, generate):
    return replace(w, scenario=Scenario(batch, prompt, generate))


def _names(ops, kind):
    return [op.name for op in ops if op.kind is kind]


# --- TP = 1 is the single chip, exactly -----------------------------------------------------------


def test_tp1_gives_byte_identical_results(h200, llama8b):
    w = _scenario(llama8b, 2, 256, 8)
    alone = run_generation(w, h200)
    spread = run_generation(w, h200, parallelism=Parallelism(1, 1, 1))
    as_json = [json.dumps(run_dict(r, ResolvedConfig({})), sort_keys=True) for r in (alone, spread)]
    assert as_json[0] == as_json[1]
    # Llama-3-8B: 32 layers of 4096 x 6144 (QKV) + 4096^2 (O) + 3 x 4096 x 14336 (FFN) + 2 x 4096
    # (norms) = 218,112,000 parameters, an untied 128,256 x 4096 embedding and head, a final norm:
    # 8,030,261,248 parameters of 2 bytes, on the one chip of TP 1
    assert footprint(w, h200, parallelism=Parallelism()).weights_bytes == 2 * 8_030_261_248


def test_cli_tp1_json_is_byte_identical(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    args = ["run", "--batch", "2", "--prompt", "128", "--generate", "4", "--quiet", "--json"]
    assert main(args + [str(a)]) == 0 and main(args + [str(b), "--tp", "1", "--pp", "1", "--ep", "1"]) == 0
    assert a.read_bytes() == b.read_bytes()


# --- the ops one chip runs ------------------------------------------------------------------------


@pytest.mark.parametrize("fusion", [Fusion.FUSED, Fusion.EAGER])
def test_tp_shards_heads_and_ffn_and_reduces_after_o_proj_and_down(llama8b, fusion):
    w = replace(llama8b, fusion=fusion)
    ops = shard_step(w, Step(Phase.DECODE, 4, 1, 100), Parallelism(tp=4)).ops
    by_name = {op.name: op for op in ops}
    m = w.model
    assert by_name["qkv"].n == (m.q_dim + 2 * m.kv_dim) // 4
    assert by_name["o_proj"].k == m.q_dim // 4 and by_name["down"].k == m.ffn // 4
    assert by_name["attention"].heads == 8 and by_name["attention"].kv_heads == 2
    assert by_name["lm_head"].n == m.vocab // 4
    assert _names(ops, OpKind.ALL_REDUCE) == ["embedding_allreduce", "o_proj_allreduce", "down_allreduce"]
    assert [n for n in (op.name for op in ops) if n.endswith("allreduce")] == _names(ops, OpKind.ALL_REDUCE)
    names = [op.name for op in ops]
    assert names.index("o_proj_allreduce") == names.index("o_proj") + 1
    reduce = by_name["o_proj_allreduce"]
    assert (reduce.bytes, reduce.ranks, reduce.repeat) == (4 * m.hidden * 2, 4, m.layers)
    assert _names(ops, OpKind.ALL_GATHER) == ["lm_head_allgather"]


def test_kv_heads_are_replicated_past_their_count():
    ops = shard_step(LLAMA70B, Step(Phase.DECODE, 1, 1, 10), Parallelism(tp=16)).ops
    attn = next(op for op in ops if op.kind is OpKind.ATTENTION)
    assert (attn.heads, attn.kv_heads) == (4, 1)


def test_pp_splits_layers_and_micro_batches_and_sends():
    plan = shard_step(LLAMA70B, Step(Phase.DECODE, 8, 1, 100), Parallelism(pp=4))
    assert (plan.stages, plan.micro_batches) == (4, 4)
    assert next(op for op in plan.ops if op.name == "qkv").repeat == 20  # 80 layers / 4
    assert next(op for op in plan.ops if op.name == "qkv").m == 2  # 8 sequences / 4 micro-batches
    assert _names(plan.ops, OpKind.SEND) == ["pp_send"]


def test_ep_dispatches_and_combines_around_local_experts():
    # 16 sequences over 4 groups: 4 tokens each, 16 in all routed over 8 experts at top-2, so an
    # expert is idle with probability (1 - 2/8)^16 = 0.0100; a group holds 2 of them and touches
    # 2 x (1 - 0.0100) = 1.980 in expectation: 31 of the 32 layers run 2, one runs 1 (mean
    # 1.969, the nearest to 1.980 in 32nds). The group gets 16 x 2 / 4 = 8 rows: 4 per expert
    # of two, 8 for a lone one; dispatch and combine wrap each kind of layer.
    ops = shard_step(MIXTRAL, Step(Phase.DECODE, 16, 1, 100), Parallelism(ep=4)).ops
    names = [op.name for op in ops]
    for g in (1, 2):
        up = names.index(f"experts_gate_up[{g}]")
        assert names[up - 1] == "ep_dispatch" and names[names.index(f"experts_down[{g}]") + 1] == "ep_combine"
    two, one = ops[names.index("experts_gate_up[2]")], ops[names.index("experts_gate_up[1]")]
    assert (two.groups, two.m, two.repeat) == (2, 4, 31)
    assert (one.groups, one.m, one.repeat) == (1, 8, 1)
    dispatches = [op for op in ops if op.name == "ep_dispatch"]
    assert [(d.bytes, d.ranks) for d in dispatches] == [(8 * 4096 * 2, 4)] * 2  # 8 rows of 4096 bf16
    assert sum(d.repeat for d in dispatches) == 32


@pytest.mark.parametrize(
    "par,fragment",
    [
        (Parallelism(tp=3), "TP 3 must divide the 64 attention heads"),
        (Parallelism(pp=81), "PP 81 is more stages than the 80 layers"),
        (Parallelism(ep=2), "needs a mixture-of-experts model"),
    ],
)
def test_layouts_the_model_cannot_take_are_refused(par, fragment):
    with pytest.raises(ParallelismError, match=fragment):
        shard_step(LLAMA70B, Step(Phase.DECODE, 1, 1, 10), par)


# --- memory per chip ------------------------------------------------------------------------------

TINY = ModelSpec("tiny", layers=4, hidden=8, heads=4, kv_heads=2, head_dim=2, ffn=16, vocab=32)


def test_chip_params_by_hand():
    assert chip_params(TINY, Parallelism()) == total_params(TINY)
    # TP 2: attention 8*(4 + 2*2) + 4*8 = 96, FFN 3*8*8 = 192, norms 16: 304 a layer;
    # embedding and head 16*8 each, final norm 8: 4*304 + 128 + 128 + 8
    assert chip_params(TINY, Parallelism(tp=2)) == 4 * 304 + 264
    # PP 2: 2 layers of the full 8*(8+8) + 8*8 + 3*8*16 + 16 = 592, and one end: 32*8 + 8
    assert chip_params(TINY, Parallelism(pp=2)) == 2 * 592 + 264


def test_sharded_kv_cache_by_hand(llama8b, h200):
    w = _scenario(llama8b, 4, 1000, 24)
    fp = footprint(w, H200X8, parallelism=Parallelism(tp=2, pp=2))
    # 4 sequences x 1024 tokens x K and V x 16 layers x 4 KV heads x 128 x 2 bytes
    assert fp.kv_cache_bytes == 4 * 1024 * 2 * 16 * 4 * 128 * 2
    assert fp.weights_bytes < footprint(w, h200).weights_bytes / 3


def test_does_not_fit_names_the_fewest_chips():
    """Llama-3-70B's 141 GB of bf16 weights do not fit one 80 GB H100; halved by TP 2, they do."""
    h100x8 = load_system(str(ROOT / "hw_configs" / "h100x8.yaml"))[0]
    with pytest.raises(DoesNotFitError) as err:
        check_fits(_scenario(LLAMA70B, 1, 2048, 256), h100x8, Parallelism())
    assert "the fewest chips that fit batch 1 is 2 (--tp 2)" in str(err.value)


# --- schedules, by hand ---------------------------------------------------------------------------


def test_overlap_of_chunked_collectives_by_hand():
    # 8 us of GEMM in 4 pieces of 2 us, each followed by a 1 us collective: 2 + 1 + 3 * 2 = 9 us
    assert overlapped_s(8.0, 1.0, 4) == 9.0
    assert overlapped_s(8.0, 5.0, 1) == 13.0  # one piece: no overlap
    # collective of c pieces: c * 1 us latency + 4 us of bytes; GEMM 8 us. c=1: 13; c=2: 4 + 3 + 4 = 11;
    # c=4: 2 + 2 + 3 * 2 = 10; c=8: 1 + 1.5 + 7 * 1.5 = 13 -> 4 pieces, 8 + 8 - 10 = 6 us hidden
    assert best_chunks(8.0, lambda c: c * 1.0 + 4.0, 8) == (4, 6.0)
    assert best_chunks(8.0, lambda c: c * 1.0 + 4.0, 1) == (1, 0.0)


def test_chunks_need_bytes_and_rows():
    from archsim.graph.ops import Op

    op = Op(OpKind.ALL_REDUCE, m=4, bytes=64 << 20, ranks=8, scaling=Scaling.FIXED)
    assert max_chunks(op, 4 << 20) == 4  # four rows
    assert max_chunks(replace(op, m=4096), 4 << 20) == 16
    assert max_chunks(replace(op, m=4096), 0) == 1


def test_pipeline_schedule_by_hand():
    # prefill, 4 stages, 3 micro-batches of 10 us, 1 us sends: (3 + 3) * 10 + 3 * 1
    assert pipeline_step_s(10.0, 1.0, 4, 3, Phase.PREFILL) == 63.0
    # decode: a stage serves 3 micro-batches (30 us) but a token goes round 4 stages: 4 * 11
    assert pipeline_step_s(10.0, 1.0, 4, 3, Phase.DECODE) == 44.0
    assert pipeline_step_s(10.0, 1.0, 2, 4, Phase.DECODE) == 40.0
    assert pipeline_step_s(10.0, 1.0, 1, 1, Phase.DECODE) == 10.0


# --- whole runs -----------------------------------------------------------------------------------


def test_llama70b_tp8_runs_and_reports_communication():
    r = run_generation(_scenario(LLAMA70B, 8, 512, 4), H200X8, parallelism=Parallelism(tp=8))
    for step in (r.prefill, r.decode):
        assert 0 < step.comm_s < step.time_s and 0 <= step.comm_hidden_s <= step.comm_s
        assert step.time_s == pytest.approx(sum(x.time_s for x in step.ops) - step.comm_hidden_s)
    assert r.prefill.comm_hidden_s > 0  # 4 MiB pieces run under the GEMMs
    assert r.decode.comm_hidden_s == 0  # 128 KiB: too small to cut
    assert r.decode_step_s[0] == pytest.approx(r.decode.time_s)


def test_more_tp_is_faster_and_more_link_bandwidth_never_slower():
    w = _scenario(LLAMA70B, 8, 512, 2)
    step = Step(Phase.DECODE, 8, 1, 512)
    times = [simulate_step(w, H200X8, step, Parallelism(tp)).time_s for tp in (2, 4, 8)]
    assert times[0] > times[1] > times[2]
    link: Fabric = H200X8.interconnect
    fast = replace(H200X8, interconnect=replace(link, link_bandwidth_bytes_per_s=4 * link.link_bandwidth_bytes_per_s))
    for tp, t in zip((2, 4, 8), times):
        assert simulate_step(w, fast, step, Parallelism(tp)).time_s <= t
    prefill = Step(Phase.PREFILL, 1, 512, 0)
    slow_s, fast_s = (simulate_step(w, s, prefill, Parallelism(8)).time_s for s in (H200X8, fast))
    assert fast_s <= slow_s


def test_pipeline_run_has_a_bubble_and_consistent_steps():
    r = run_generation(_scenario(LLAMA70B, 4, 256, 3), H200X8, parallelism=Parallelism(tp=2, pp=2))
    p = r.prefill.pipeline
    assert (p.stages, p.micro_batches) == (2, 2)
    assert p.bubble_s == pytest.approx(p.stage_s + p.send_s)  # (2 + 2 - 1) stages less 2 of work
    assert r.decode.pipeline.bubble_s >= 0
    assert r.decode_step_s[0] == pytest.approx(r.decode.time_s)


def test_expert_parallel_mixtral_runs():
    r = run_generation(_scenario(MIXTRAL, 16, 256, 2), H200X8, parallelism=Parallelism(tp=2, ep=4))
    kinds = {x.op.kind for x in r.decode.ops}
    assert {OpKind.ALL_TO_ALL, OpKind.ALL_REDUCE} <= kinds and r.tpot_s > 0


def test_torus_system_runs_tensor_parallel(llama8b):
    tpu8 = load_system(str(ROOT / "hw_configs" / "tpu_v5e_x8.yaml"))[0]
    r = run_generation(_scenario(llama8b, 4, 256, 2), tpu8, parallelism=Parallelism(tp=4))
    assert 0 < r.decode.comm_s < r.decode.time_s


# --- command line ---------------------------------------------------------------------------------


def test_run_tp8_on_h200x8(tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = [
        "run",
        "--hw",
        "h200x8",
        "--workload",
        "llama3_70b",
        "--tp",
        "8",
        "--prompt",
        "256",
        "--generate",
        "2",
        "--quiet",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    assert "communication on the busiest chip (TP 8" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["config"]["options"]["parallelism"] == {"tp": 8, "pp": 1, "ep": 1}
    assert 0 < data["communication"]["decode"]["exposed_share"] < 1


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--hw", "h200", "--tp", "2"], "TP 2 needs 2 chips; the system has 1 (NVIDIA H200 SXM x1)"),
        (["--hw", "h200x8", "--tp", "3"], "TP 3 must divide the 32 attention heads"),
        (["--hw", "h200x8", "--ep", "2"], "EP 2 needs a mixture-of-experts model"),
    ],
)
def test_run_refuses_layouts_with_exit_2(argv, message, capsys):
    assert main(["run", "--prompt", "64", "--generate", "2", *argv]) == 2
    assert message in capsys.readouterr().err


def test_scale_shows_where_allreduce_latency_stops_the_gains(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["scale", "--workload", "llama3_8b", "--batch", "1", "--kv-len", "2048", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "the gains stop at TP" in text and "all-reduces of" in text
    data = json.loads(out.read_text())
    assert [p["tp"] for p in data["points"]] == [1, 2, 4, 8] and data["gains_stop_tp"] in (4, 8)
    shares = [p["share"] for p in data["points"]]
    assert shares == sorted(shares) and shares[0] == 0
