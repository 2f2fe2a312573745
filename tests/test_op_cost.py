"""`choose.op_cost`: an op's time, energy and kernel power without the rest of its timing, the
numbers `time_op` gives to the bit; a decode's attention samples are timed by it (and kept on
disk as such), so a run is the same as when every sample was timed in full."""

from dataclasses import replace

import numpy as np
import pytest

from archsim import opcache
from archsim.choose import op_cost, time_op
from archsim.graph.model import Scenario
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.memo import clear_all
from archsim.runner import generation
from archsim.runner.energy import run_energy

OPS = [
    Op(OpKind.GEMM, m=64, k=4096, n=1024, scaling=Scaling.FIXED),
    Op(OpKind.GEMM, m=8192, k=8192, n=8192, scaling=Scaling.FIXED),  # held below the clock by its power
    Op(
        OpKind.ATTENTION,
        batch=64,
        heads=32,
        kv_heads=8,
        head_dim=128,
        q_len=1,
        kv_len=2049,
        split_kv=True,
        scaling=Scaling.KV_LENGTH,
    ),
    Op(
        OpKind.ATTENTION,
        batch=1,
        heads=32,
        kv_heads=8,
        head_dim=128,
        q_len=512,
        kv_len=512,
        causal=True,
        scaling=Scaling.KV_LENGTH,
    ),
]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.kind.value)
def test_op_cost_is_time_op_to_the_bit(h200, op):
    full, cost = time_op(op, h200.chip), op_cost(op, h200.chip)
    assert cost.time_s == full.timing.time_s and cost.kernel_power_w == full.kernel_power_w
    assert cost.energy == full.energy


def test_the_held_gemm_is_held(h200):
    """The large GEMM above runs under the power limit (so the held clock's path is compared)."""
    assert time_op(OPS[1], h200.chip).timing.clock_hz < h200.chip.clock_hz


def _run(w, system):
    clear_all()
    opcache._open.cache_clear()
    r = generation.run_generation(w, system, kv_stride=1)
    return r, run_energy(r, w, system, 1)


def test_a_run_read_from_its_op_cost_entries_is_the_same(cache_dir, h200):
    """Cold (every sample simulated and written) and warm (every sample read back): the same
    decode step times and energies, bit for bit."""
    from test_serving import TINY

    w = replace(TINY, scenario=Scenario(4, 96, 40))
    cold, cold_e = _run(w, h200)
    warm, warm_e = _run(w, h200)
    assert np.array_equal(cold.decode_step_s, warm.decode_step_s)
    assert np.array_equal(cold_e.decode_step_j, warm_e.decode_step_j)
    assert cold_e.energy == warm_e.energy and cold_e.peak_power_w == warm_e.peak_power_w
