"""An op's time by cause (docs/MODEL.md "Time by cause") and its bound from the binding unit
("The bound"): the stall split by the event loop, terms that add up op -> step -> run, and
each unit's utilisation of its own peak."""

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from archsim.choose import simulate_op
from archsim.choose.timed import time_by_cause, unit_utilisation
from archsim.config.loader import load_system
from archsim.engine.simulate import play_phase_on
from archsim.engine.timing import UNIT_BOUND, TimeByCause, binding_unit
from archsim.graph.builder import Step
from archsim.graph.model import Phase as StepPhase
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware.memory import MemoryParams
from archsim.program import Phase
from archsim.runner.generation import run_generation, simulate_step

ROOT = Path(__file__).parent.parent

# a memory system of round numbers, in cycles and bytes: HBM latency L = 100, L2 latency 20,
# HBM 10 B/cycle on one channel (so one load may take all of it), L2 100 B/cycle, no queueing,
# bytes in flight that never cap a load (Little's law: 1e9 / 100 B/cycle)
ROUND = MemoryParams(
    hbm_latency=100.0,
    hbm_queue_latency=0.0,
    l2_latency=20.0,
    hbm_bytes_per_cycle=10.0,
    l2_bytes_per_cycle=100.0,
    channel_bytes_per_cycle=10.0,
    interleave_bytes=1.0e9,
    channels=1.0,
    load_inflight_bytes=1.0e9,
    store_inflight_bytes=1.0e9,
)


def _phase(hbm, l2, cycles, stages=1):
    n = len(cycles)
    return Phase(
        core_start=np.array([0, n], np.int64),
        core_weight=np.array([1], np.int64),
        hbm_bytes=np.array(hbm, np.float64),
        l2_bytes=np.array(l2, np.float64),
        compute_cycles=np.array(cycles, np.int64),
        store_bytes=np.zeros(n),
        store_l2_bytes=np.zeros(n),
        load_trips=np.ones(n),
        stages=stages,
    )


@pytest.mark.parametrize("trace", [False, True])
def test_a_load_then_compute_stalls_its_latency_then_its_bytes_over_the_bandwidth(trace):
    # B = 1000 HBM bytes: data from L = 100, flowing at 10 B/cycle for 100 cycles, done at 200;
    # compute C = 50 then: stall 200 = latency 100 + HBM bandwidth 100, end 250
    r = play_phase_on(_phase([1000.0], [0.0], [50]), ROUND, trace)
    assert r.total_cycles == 250 and r.stall_cycles[0] == 200
    assert r.stall_by_cause[:, 0].tolist() == [100.0, 100.0, 0.0]


def test_a_load_from_hbm_and_l2_splits_its_transfer_by_their_bytes():
    # 600 HBM + 400 L2 bytes: latency 0.6 x 100 + 0.4 x 20 = 68; one channel caps the load at
    # 10 / 0.6 B/cycle (its HBM share then fills the HBM's 10), so 1000 bytes flow in 60 cycles,
    # done at 128: stall 128 = latency 68 + flowing 60, of which 0.6 on HBM (36) and 0.4 on L2 (24)
    r = play_phase_on(_phase([600.0], [400.0], [10]), ROUND)
    assert r.stall_cycles[0] == 128
    np.testing.assert_allclose(r.stall_by_cause[:, 0], [68.0, 36.0, 24.0], rtol=1e-12)


def test_a_second_load_hides_its_latency_behind_the_first_transfer():
    # two buffers: entry 1's latency runs from cycle 0 (its buffer is free) and is over when the
    # DMA takes it at 200 (after entry 0's data), its bytes flow 200-300; entry 0 computes
    # 200-250, so entry 1's compute waits 250-300, all while its bytes flow: stall 200 + 50 =
    # latency 100 + HBM bandwidth 150
    r = play_phase_on(_phase([1000.0, 1000.0], [0.0, 0.0], [50, 50], stages=2), ROUND)
    assert r.total_cycles == 350 and r.stall_cycles[0] == 250
    assert r.stall_by_cause[:, 0].tolist() == [100.0, 150.0, 0.0]


def test_a_load_issued_as_the_one_before_drains_sees_no_queue():
    # queueing Lq = 100 cycles at half the bandwidth. Entry 0's data flows 100-200 at the whole
    # 10 B/cycle (utilisation 1). The DMA takes entry 1 at 200, as entry 0's flow drains: no
    # request is left ahead of it, so its latency is the unloaded 100 (counted from cycle 0, its
    # buffer free), over by 200, not 100 + 49 x 100 = 5,000 (the utilisation before the drain,
    # capped at 0.98). So as without queueing: entry 1 flows 200-300, computes 300-350
    queued = ROUND._replace(hbm_queue_latency=100.0)
    r = play_phase_on(_phase([1000.0, 1000.0], [0.0, 0.0], [50, 50], stages=2), queued)
    assert r.total_cycles == 350 and r.stall_by_cause[:, 0].tolist() == [100.0, 150.0, 0.0]


def test_time_by_cause_records_add_and_scale():
    a = TimeByCause(compute_s=1.0, hbm_bandwidth_s=2.0, fixed_s=0.5)
    b = TimeByCause(memory_latency_s=0.25, schedule_s=-0.5)
    assert (a + b).total_s == 3.25 and a.scaled(2).hbm_bandwidth_s == 4.0 and a.largest == "hbm_bandwidth"


def test_a_held_play_that_comes_out_shorter_takes_no_time_back():
    # an unheld play of 1,000 cycles at 1 GHz: 500 compute, stalls 300 (HBM 200, latency 60, L2
    # 40), stores 200; 20 fixed. Held, it counts 1,100 cycles at 1 GHz: held clock 100 cycles,
    # 0.1 us, the rest as played. Held and 10 cycles shorter (990): no held clock, the six terms
    # scaled by 990 / 1,000 (compute 495, HBM 198, latency 59.4, L2 39.6, stores 198), and the
    # sum still the held play's 990 + 20 = 1,010 cycles
    unheld = SimpleNamespace(
        compute_cycles=500,
        stall_cycles=300,
        cycles=1000,
        latency_stall_cycles=60,
        hbm_stall_cycles=200,
        l2_stall_cycles=40,
    )
    slower = time_by_cause(unheld, 1, 1100, 20, 1e9)
    assert slower["held_clock_s"] == pytest.approx(100e-9) and slower["compute_s"] == pytest.approx(500e-9)
    shorter = time_by_cause(unheld, 1, 990, 20, 1e9)
    assert shorter["held_clock_s"] == 0 and min(shorter.values()) >= 0
    assert [shorter[k] * 1e9 for k in ("compute_s", "hbm_bandwidth_s", "memory_latency_s", "l2_s", "stores_s")] == (
        pytest.approx([495, 198, 59.4, 39.6, 198])
    )
    assert sum(shorter.values()) == pytest.approx(1010e-9)


CHIPS = ("h200", "b200", "mi300x", "tpu_v6e", "trainium2", "lpu")


@pytest.fixture(scope="module")
def chips():
    return {name: load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0].chip for name in CHIPS}


@settings(max_examples=25, deadline=None)
@given(
    chip=st.sampled_from(CHIPS),
    m=st.integers(1, 4096),
    k=st.sampled_from([64, 512, 4096]),
    n=st.sampled_from([128, 1024, 8192]),
    gemm=st.booleans(),
)
@example(chip="h200", m=3841, k=4096, n=128, gemm=True)  # its held play 44 cycles shorter than its unheld one
def test_the_terms_add_up_to_the_op_time(chips, chip, m, k, n, gemm):
    op = (
        Op(OpKind.GEMM, m=m, k=k, n=n, scaling=Scaling.FIXED)
        if gemm
        else Op(OpKind.VECTOR, m=m, n=n, vop=VectorOp.ADD, scaling=Scaling.FIXED)
    )
    t = simulate_op(op, chips[chip])
    assert t.by_cause.total_s == pytest.approx(t.time_s, rel=1e-12, abs=1e-18)
    assert all(v >= -1e-12 * t.time_s for v in t.by_cause.as_dict().values())  # no cause takes time back
    u = t.unit_utilisation
    assert t.bound.value == UNIT_BOUND[t.binding_unit] and u[t.binding_unit] == max(u.values())
    assert u["latency"] == pytest.approx(t.memory_latency_s / t.time_s)


def test_a_step_and_a_run_add_up_their_ops(h200, llama8b):
    w = replace(llama8b, scenario=replace(llama8b.scenario, batch=2, prompt_tokens=256, output_tokens=4))
    step = simulate_step(w, h200, Step(StepPhase.DECODE, 2, 1, 512))
    assert step.by_cause.total_s == pytest.approx(step.time_s, rel=1e-12)
    assert step.by_cause.largest == "hbm_bandwidth"  # a batch-2 decode step streams its weights
    run = run_generation(w, h200)
    assert run.by_cause.total_s == pytest.approx(run.total_time_s, rel=1e-12)
    assert run.by_cause.schedule_s == pytest.approx(0.0, abs=1e-9 * run.total_time_s)  # one chip: nothing overlaps
    assert run.by_cause.compute_s > 0 and run.by_cause.hbm_bandwidth_s > 0


def test_a_gemv_waits_on_bandwidth_and_a_large_gemm_computes(h200):
    gemv = simulate_op(Op(OpKind.GEMM, m=1, k=8192, n=8192, scaling=Scaling.FIXED), h200.chip)
    gemm = simulate_op(Op(OpKind.GEMM, m=8192, k=8192, n=8192, scaling=Scaling.FIXED), h200.chip)
    assert gemv.by_cause.largest == "hbm_bandwidth" and gemm.by_cause.largest == "compute"
    assert gemm.held_clock_s > 0  # the H200's power holds an 8192^3 GEMM's clock


def test_utilisation_by_hand(h200):
    # H200: 4.8 TB/s HBM, 132 cores x 128 FP32 lanes at 1.98 GHz; an elementwise op of 1 ms that
    # moves 2.4 GB from HBM and does 1.6728e10 FLOPs: HBM 2.4e9 / (1e-3 x 4.8e12) = 0.5, vector
    # 1.6728e10 / (1e-3 x 132 x 128 x 1.98e9 = 3.345408e10) = 0.50003, no L2 hits; fixed 0.1: the
    # vector units bind, by a hair
    chip = h200.chip
    assert (chip.hbm.peak_bandwidth_bytes_per_s, chip.cores, chip.core.vector.lanes) == (4.8e12, 132, 128)
    assert chip.clock_hz == 1.98e9
    op = Op(OpKind.VECTOR, m=1, n=1, vop=VectorOp.ADD, scaling=Scaling.FIXED)
    program = type("P", (), {"matrix": False})()
    u = unit_utilisation(chip, op, program, 1e-3, (2.4e9, 0.0, 1.6728e10), 0.1)  # type: ignore[arg-type]
    assert u["hbm"] == pytest.approx(0.5) and u["vector"] == pytest.approx(0.50003, rel=1e-5)
    assert u["l2"] == 0.0 and u["matrix"] == 0.0 and binding_unit(u) == "vector"


def test_the_sram_unit_counts_the_bytes_a_tile_step_charges_to_it(h200):
    # each byte loaded is read out of the SRAM once, as a tile step's time charges it (its operands'
    # reads over the SRAM's bandwidth): 2.4 GB over 1 ms on 132 SMs of 128 B a cycle at 1.98 GHz,
    # 2.4e9 / (1e-3 x 132 x 128 x 1.98e9 = 3.345408e10) = 0.07174 (0.1435 counting the fill's write too)
    chip = h200.chip
    assert chip.core.sram.bandwidth_bytes_per_cycle == 128
    program = type("P", (), {"matrix": True})()
    op = Op(OpKind.GEMM, m=1, k=8192, n=8192, scaling=Scaling.FIXED)
    u = unit_utilisation(chip, op, program, 1e-3, (2.4e9, 0.0, 0.0), 0.0)  # type: ignore[arg-type]
    assert u["sram"] == pytest.approx(0.07174, rel=1e-4)


HBM_PRESETS = ("a100", "a100_pcie", "h100", "h200", "b200", "gb200", "mi300x", "mi325x")
HBM_PRESETS += ("tpu_v5e", "tpu_v6e", "tpu_v7", "trainium2", "dataflow_2stack")  # not the SRAM-only lpu, wafer,
# nor the scalesim_* files, whose memory is idealised to replay SCALE-Sim's compute-only timing


@pytest.mark.parametrize("name", HBM_PRESETS)
def test_a_batch_1_gemv_is_memory_bound_on_every_chip_with_hbm(name):
    chip = load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0].chip
    t = simulate_op(Op(OpKind.GEMM, m=1, k=8192, n=8192, scaling=Scaling.FIXED), chip)
    assert t.bound.value == "memory" and t.binding_unit == "hbm" and t.hbm_utilisation > 0.6


@pytest.mark.parametrize("name", ("a100_pcie", "h100", "h200", "b200", "gb200", "mi300x", "mi325x"))
def test_a_large_gemm_is_compute_bound_on_the_gpus(name):
    # (the A100 SXM file is not here: its 8192^3 GEMM fills its calibrated 2.6 TB/s L2 to 99%,
    # and L2 stalls take 18% of its time, so its bound is the L2)
    chip = load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0].chip
    t = simulate_op(Op(OpKind.GEMM, m=8192, k=8192, n=8192, scaling=Scaling.FIXED), chip)
    assert t.bound.value == "compute" and t.binding_unit == "matrix"


def test_a_pipeline_bubble_is_the_schedule_s_part_of_a_step():
    """Llama-3-70B over 576 LPUs, pipelined 9 ways (tests/test_presets.py): at batch 1 each token
    waits for every stage, so the step is more than its ops' sum, and the rest is the schedule's."""
    from archsim import api

    w = api.load_workload(
        "llama3_70b", {"dtypes.weights": "fp8", "scenario": {"batch": 1, "prompt_tokens": 64, "output_tokens": 2}}
    )
    report = api.run(api.load_system("lpu_x576"), w, tp=64, pp=9)
    step = report.result.decode
    assert step.by_cause.schedule_s > 0.5 * step.time_s
    assert step.by_cause.total_s == pytest.approx(step.time_s, rel=1e-12)
    assert report.time_by_cause.total_s == pytest.approx(report.total_time_s, rel=1e-12)
