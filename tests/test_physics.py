"""The physics archsim must make measurable, on the shipped chips and models."""

from dataclasses import replace

import pytest

from archsim.config.loader import load_system, load_workload
from archsim.errors import DoesNotFitError
from archsim.graph.builder import Step, build_step
from archsim.graph.model import Phase
from archsim.graph.ops import OpKind
from archsim.graph.params import total_params
from archsim.hardware import DType
from archsim.runner.generation import run_generation, simulate_step


def _scenario(w, batch, prompt, out):
    return replace(w, scenario=replace(w.scenario, batch=batch, prompt_tokens=prompt, output_tokens=out))


def test_decode_batch1_is_memory_bound_and_above_weight_floor(h200, llama8b):
    step = simulate_step(llama8b, h200, Step(Phase.DECODE, 1, 1, 2048))
    weights = total_params(llama8b.model) * 2
    assert step.time_s >= weights / h200.chip.hbm.peak_bandwidth_bytes_per_s
    gemm_time = {r.timing.bound.value for r in step.ops if r.op.kind is OpKind.GEMM}
    assert gemm_time <= {"memory", "compute"}
    mem = sum(r.time_s for r in step.ops if r.timing.bound.value == "memory")
    comp = sum(r.time_s for r in step.ops if r.timing.bound.value == "compute")
    assert mem > comp


def test_prefill_2048_is_compute_bound(h200, llama8b):
    step = simulate_step(llama8b, h200, Step(Phase.PREFILL, 1, 2048, 0))
    comp = sum(r.time_s for r in step.ops if r.timing.bound.value == "compute")
    assert comp > 0.6 * step.time_s
    assert step.time_s >= step.flops / h200.chip.peak_flops(DType.BF16)


def test_decode_throughput_grows_with_batch(h200, llama8b):
    rates = [run_generation(_scenario(llama8b, b, 512, 8), h200).decode_tokens_per_s for b in (1, 8, 64, 256)]
    assert rates == sorted(rates) and rates[-1] > 20 * rates[0]


def test_70b_on_one_tpu_v5e_is_refused_with_numbers():
    tpu = load_system("tpu_v5e")[0]
    w = load_workload("llama3_70b")[0]
    with pytest.raises(DoesNotFitError) as err:
        run_generation(w, tpu)
    msg = str(err.value)
    assert "weights 141 GB" in msg and "capacity 16 GB" in msg


def test_refusal_names_the_largest_batch(h200, llama8b):
    with pytest.raises(DoesNotFitError) as err:
        run_generation(_scenario(llama8b, 4096, 4096, 4096), h200)
    assert "the largest batch that fits is" in str(err.value)


def test_moe_reads_only_routed_experts_at_small_batch(h200):
    w = load_workload("mixtral_8x7b")[0]
    ops = {op.name.split("[")[0]: op for op in build_step(w, Step(Phase.DECODE, 1, 1, 100))}
    assert ops["experts_gate_up"].groups == 2  # one token, top-2
    big = {op.name.split("[")[0]: op for op in build_step(w, Step(Phase.DECODE, 64, 1, 100))}
    assert big["experts_gate_up"].groups == 8
    step = simulate_step(w, h200, Step(Phase.DECODE, 1, 1, 100))
    expert_bytes = sum(r.op.repeat * r.timing.hbm_bytes for r in step.ops if r.op.name.startswith("experts"))
    all_experts = w.model.layers * w.model.experts * 3 * w.model.hidden * w.model.ffn * 2
    assert expert_bytes < 0.3 * all_experts


def test_more_flops_less_bandwidth_can_serve_slower(llama8b):
    """The hypothetical chip has near-H200 FLOPs but a third of the bandwidth: decode is slower,
    by less than the bandwidth ratio because the H200 pays per-kernel costs a static dataflow
    schedule does not."""
    h200 = load_system("h200")[0]
    df = load_system("dataflow_2stack")[0]
    w = _scenario(llama8b, 1, 512, 4)
    ratio = run_generation(w, df).tpot_s / run_generation(w, h200).tpot_s
    bandwidth_ratio = h200.chip.hbm.peak_bandwidth_bytes_per_s / df.chip.hbm.peak_bandwidth_bytes_per_s
    assert 1.5 < ratio < bandwidth_ratio
