"""Energy by unit of ops, steps and runs, each figure derived by hand from the chip's energies."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

import archsim
from archsim.choose import collective_energy, op_energy, time_collective, time_op
from archsim.config.loader import load_system, load_workload
from archsim.dtypes import DType
from archsim.graph.builder import Step
from archsim.graph.model import Phase
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.graph.parallel import Parallelism
from archsim.graph.params import total_params
from archsim.hardware.power import (
    ENERGY_PARTS,
    Activity,
    Energies,
    EnergySplit,
    Power,
    energy_j,
    energy_split,
    floor_power_w,
)
from archsim.runner.energy import energy_rows, energy_sum, records_energy, run_energy, step_energy
from archsim.runner.generation import run_generation, simulate_step

ROOT = Path(__file__).resolve().parents[1]
P = Power(
    limit_w=500.0,
    static_w=100.0,
    idle_w=50.0,
    min_clock_hz=0.5e9,
    max_clock_hz=2e9,
    voltage_min_v=0.6,
    voltage_max_v=1.0,
    energies=Energies(
        mac_j=(("bf16", 1e-12),),
        lane_op_j=2e-12,
        special_op_j=4e-12,
        l2_j_per_byte=5e-12,
        hbm_j_per_bit=4e-12,
        link_j_per_bit=10e-12,
        sram_j_per_byte=0.5e-12,
    ),
)


def test_the_split_is_the_formula_term_by_term():
    """At 1.25 GHz of 2 GHz, v = 0.8 (v^2 = 0.64): 1e12 MACs x 1 pJ = 1 J -> 0.64 J; 1e11 lane ops x 2 pJ
    + 1e10 specials x 4 pJ = 0.24 J -> 0.1536 J; 1e10 L2 bytes: L2 0.05 J -> 0.032 J, SRAM 2 x 1e10 x
    0.5 pJ = 0.01 J -> 0.0064 J; HBM 1e10 B x 8 x 4 pJ = 0.32 J and links 1e9 B x 8 x 10 pJ = 0.08 J
    at their own voltage; over 10 ms static 100 W = 1 J, idle 50 W x 0.625 x 0.64 = 20 W = 0.2 J."""
    a = Activity(macs=1e12, lane_ops=1e11, special_ops=1e10, l2_bytes=1e10, hbm_bytes=1e10, link_bytes=1e9)
    e = energy_split(P, a, 0.01, 1.25e9)
    expected = {
        "matrix": 0.64,
        "vector": 0.1536,
        "sram": 0.0064,
        "l2": 0.032,
        "hbm": 0.32,
        "link": 0.08,
        "static": 1.0,
        "idle": 0.2,
    }
    assert e.parts() == pytest.approx(expected)
    assert energy_j(P, a, 0.01, 1.25e9) == pytest.approx(sum(expected.values()))
    assert e.dynamic_j == pytest.approx(sum(expected.values()) - 1.2)
    assert floor_power_w(P, 2e9) == pytest.approx(150.0)


def test_splits_add_and_scale():
    a, b = EnergySplit(matrix_j=1.0, static_j=2.0), EnergySplit(matrix_j=0.5, hbm_j=3.0)
    assert (a + b).parts() == {**EnergySplit().parts(), "matrix": 1.5, "static": 2.0, "hbm": 3.0}
    assert a.scaled(3).total_j == pytest.approx(9.0)


def _made_up_chip(extra: dict | None = None):
    """The SCALE-Sim parity chip (one 128x128 array at 1 GHz, no overheads) with a power model at
    one voltage (v = 1 at every clock) and a limit it never reaches. Its memory streams at 1,048,576
    pins x 100 Gb/s = 13.1 PB/s (not SCALE-Sim's 131 EB/s, whose 5 pJ/bit no power limit could
    hold: 5.9 GW), 0.59 MW at 5 pJ/bit, 4 pJ/B of L2 and 2 x 0.5 pJ/B of SRAM, under the 1 MW limit."""
    doc = yaml.safe_load((ROOT / "hw_configs" / "scalesim_ws_128x128.yaml").read_text())
    doc["hbm"]["data_rate"] = "100 Gbps"
    doc["power"] = {
        "limit": "1 MW",
        "static": "10 W",
        "idle": "5 W",
        "min_clock": "100 MHz",
        "voltage": {"min_clock": "1 V", "max_clock": "1 V"},
        "energy": {
            "mac": {"bf16": "1 pJ"},
            "lane_op": "2 pJ",
            "special_op": "3 pJ",
            "l2": "4 pJ/B",
            "hbm": "5 pJ/bit",
            "sram": "0.5 pJ/B",
        },
    }
    doc.update(extra or {})
    return archsim.load_system(doc).system


def test_a_gemms_energy_is_its_macs_bytes_and_floor():
    """A 256^3 bf16 GEMM fits the array's SRAM whole: it reads A and B and writes C once, 3 x 256^2
    x 2 B = 393,216 HBM bytes. Its energy is 256^3 MACs x 1 pJ = 16.78 uJ, every byte it moves
    through L2 (HBM and L2 hits) x 4 pJ and twice through SRAM x 0.5 pJ, the HBM bytes x 8 x 5 pJ
    = 15.73 uJ, and 10 W static + 5 W idle over its simulated time (no overheads on this chip)."""
    chip = _made_up_chip().chip
    t = time_op(Op(OpKind.GEMM, DType.BF16, m=256, k=256, n=256, scaling=Scaling.FIXED), chip)
    tm, e = t.timing, t.energy
    assert tm.hbm_bytes == 3 * 256 * 256 * 2
    moved = tm.hbm_bytes + tm.l2_bytes
    assert e.matrix_j == pytest.approx(256**3 * 1e-12)
    assert e.hbm_j == pytest.approx(393_216 * 8 * 5e-12)
    assert e.l2_j == pytest.approx(moved * 4e-12)
    assert e.sram_j == pytest.approx(2 * moved * 0.5e-12)
    assert e.static_j == pytest.approx(10.0 * tm.time_s)
    assert e.idle_j == pytest.approx(5.0 * tm.time_s)
    assert e.vector_j == e.link_j == 0.0
    assert tm.energy_j == pytest.approx(e.total_j)
    assert t.kernel_power_w == pytest.approx(e.total_j / tm.time_s)  # no fixed cost: all of it is kernel time


def test_fixed_costs_draw_the_floor():
    """With 1 us of kernel overhead the same GEMM takes 1 us more and 15 W x 1 us = 15 uJ more,
    all of it static and idle; its actions cost the same."""
    chip = _made_up_chip().chip
    slow = replace(chip, overheads=replace(chip.overheads, kernel_s=1e-6))
    gemm = Op(OpKind.GEMM, DType.BF16, m=256, k=256, n=256, scaling=Scaling.FIXED)
    a, b = time_op(gemm, chip), time_op(gemm, slow)
    assert b.timing.time_s - a.timing.time_s == pytest.approx(1e-6)
    assert b.energy.total_j - a.energy.total_j == pytest.approx(15e-6)
    assert b.energy.dynamic_j == pytest.approx(a.energy.dynamic_j)
    assert b.kernel_power_w == pytest.approx(a.kernel_power_w)  # the fixed cost is not kernel time


def test_an_idle_heavy_decode_step_is_static_and_hbm(h200, llama8b):
    """Llama-3-8B decode at batch 1 on the H200 streams its weights once but for the embedding
    table (one row gathered): (16.06 - 1.05) GB; HBM energy is about 15.0e9 x 8 x 3.9 pJ = 0.47 J; the floor, 73.7 + 84 = 157.7 W over the ~4.4 ms step, about
    0.70 J; the MACs only 8.0e9 x 1.79 pJ = 14 mJ. Static, idle and HBM are most of the step."""
    step = simulate_step(llama8b, h200, Step(Phase.DECODE, 1, 1, 2048))
    e = step_energy(step, h200).energy
    m = llama8b.model
    weights = (total_params(m) - m.vocab * m.hidden) * 2
    assert e.hbm_j == pytest.approx(weights * 8 * 3.9e-12, rel=0.03)  # and the KV cache, 2048 x 128 KiB
    assert e.static_j + e.idle_j == pytest.approx(157.7 * step.time_s, rel=0.02)
    assert e.matrix_j == pytest.approx(total_params(llama8b.model) * 1.79e-12, rel=0.1)
    assert (e.static_j + e.idle_j + e.hbm_j) / e.total_j > 0.8
    assert max(e.matrix_j, e.vector_j, e.l2_j) < e.hbm_j


def test_a_step_is_its_ops_and_its_power_its_energy_over_time(h200, llama8b):
    step = simulate_step(llama8b, h200, Step(Phase.PREFILL, 1, 512, 0))
    s = step_energy(step, h200)
    by_op = sum(r.op.repeat * op_energy(r.op, h200.chip).total_j for r in step.ops)
    assert s.energy_j == pytest.approx(by_op)
    assert s.average_power_w == pytest.approx(s.energy_j / step.time_s)
    assert sum(k.energy.total_j for k in s.kinds) == pytest.approx(s.energy_j)
    gemm = next(k for k in s.kinds if k.kind is OpKind.GEMM)
    assert gemm.min_clock_hz <= gemm.clock_hz < h200.chip.clock_hz  # a 512-token prefill's GEMMs are held
    # the power limit holds each kernel's power to within the power manager's estimate of it
    assert s.peak_power_w <= h200.chip.power.limit_w * 1.01


def test_decode_energies_follow_the_sampled_attention(h200, llama8b):
    """Sampling attention every 64 tokens and interpolating gives each step's energy within 0.1% of
    simulating every step; the first step's energy is the first decode step's."""
    w = replace(llama8b, scenario=replace(llama8b.scenario, batch=4, prompt_tokens=512, output_tokens=40))
    exact, sampled = run_generation(w, h200, kv_stride=1), run_generation(w, h200, kv_stride=64)
    e1, e64 = run_energy(exact, w, h200, 1), run_energy(sampled, w, h200, 64)
    assert e1.decode_step_j[0] == pytest.approx(step_energy(exact.decode, h200).energy_j)
    assert e64.decode_step_j == pytest.approx(e1.decode_step_j, rel=1e-3)
    assert np.all(np.diff(e1.decode_step_j) > 0)  # a longer KV cache costs more each step
    assert e1.energy.total_j == pytest.approx(e1.prefill.energy_j + float(np.sum(e1.decode_step_j)))
    assert e1.tokens_per_j == pytest.approx(w.scenario.batch * w.scenario.output_tokens / e1.energy_j)


def test_energy_rows_are_energy_sums_to_the_bit(h200):
    """Samples of one and of two ops (random energies and repeats) and hidden times of 0 and of a
    few microseconds: each row is `energy_sum`'s split, part by part, to the bit (the same
    additions in the same order), whatever the samples' order."""
    rng = np.random.default_rng(7)

    def split() -> EnergySplit:
        return EnergySplit(*rng.uniform(0.0, 5.0, 8))

    parts = [
        ([(int(rng.integers(1, 80)), split()) for _ in range(1 + i % 2)], 0.0 if i % 3 else float(rng.uniform(0, 5e-6)))
        for i in range(9)
    ]
    rows = energy_rows(parts, h200)
    for row, (ops, hidden) in zip(rows, parts):
        want = energy_sum(ops, h200, hidden)
        assert row.tolist() == [getattr(want, f"{name}_j") for name in ENERGY_PARTS]


def test_a_collective_powers_every_link_while_it_transfers():
    """An all-reduce on 8 H200 keeps each chip's 18 links x 25 GB/s busy for its transfer time:
    line bytes = transfer_s x 450 GB/s, at 5 pJ per bit; the chip idles at its 157.7 W floor
    meanwhile."""
    system = load_system("h200x8")[0]
    op = Op(OpKind.ALL_REDUCE, DType.BF16, bytes=64 * 2**20, ranks=8, scaling=Scaling.FIXED)
    from archsim.hardware.collectives import Collective, collective_time, system_fabric

    t = collective_time(system_fabric(system, 8), Collective.ALL_REDUCE, 8, op.bytes)
    e = collective_energy(op, system)
    assert e.link_j == pytest.approx(t.transfer_s * 18 * 25e9 * 8 * 5e-12)
    assert e.static_j + e.idle_j == pytest.approx(157.7 * t.time_s)
    assert time_collective(op, system).timing.energy_j == pytest.approx(e.total_j)


def test_collective_time_hidden_under_compute_draws_the_floor_once():
    """Under TP the step's time takes off the collective time run under the GEMMs that produce it,
    and its energy takes off the floor over that time (the chip is drawing it for the GEMM)."""
    system, w = load_system("h200x8")[0], load_workload("llama3_8b")[0]
    step = simulate_step(w, system, Step(Phase.PREFILL, 8, 512, 0), Parallelism(tp=8))
    assert step.comm_hidden_s > 0
    e = step_energy(step, system).energy
    summed = records_energy(step.ops, system)
    assert summed.total_j - e.total_j == pytest.approx(157.7 * step.comm_hidden_s)
    assert e.dynamic_j == pytest.approx(summed.dynamic_j)


def test_a_pipeline_bubble_idles_at_the_floor():
    """A PP 2 decode step runs its micro-batch's ops and idles for the rest of the step."""
    system, w = load_system("h200x8")[0], load_workload("llama3_8b")[0]
    step = simulate_step(w, system, Step(Phase.DECODE, 1, 1, 512), Parallelism(tp=1, pp=2))
    p = step.pipeline
    busy_s = sum(r.time_s for r in step.ops) - step.comm_hidden_s
    e = step_energy(step, system)
    idle_s = step.time_s - p.micro_batches * busy_s
    assert idle_s > 0
    expected = p.micro_batches * records_energy(step.ops, system, step.comm_hidden_s).total_j + 157.7 * idle_s
    assert e.energy_j == pytest.approx(expected)


def test_no_power_section_no_energy():
    system, w = load_system("scalesim_ws_128x128")[0], load_workload("llama3_8b")[0]
    w = replace(w, scenario=replace(w.scenario, batch=1, prompt_tokens=16, output_tokens=2))
    assert run_energy(run_generation(w, system, kv_stride=64), w, system, 64) is None
    assert (
        op_energy(Op(OpKind.GEMM, DType.BF16, m=128, k=128, n=128, scaling=Scaling.FIXED), system.chip).total_j == 0.0
    )
