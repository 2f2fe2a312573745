"""Each timing formula against a value computed by hand."""

from dataclasses import replace

import numpy as np
import pytest

from archsim.hardware import Dataflow, FoldMode
from archsim.hardware.systolic import array_cycles, scalesim_cycles


@pytest.mark.parametrize("df,expected", [(Dataflow.WS, 22399), (Dataflow.OS, 20351), (Dataflow.IS, 22399)])
def test_scalesim_256_cube_on_32x32(df, expected):
    # WS: (256/32)*(256/32) = 64 folds of 2*32 + 32 + 256 - 2 = 350 -> 22400 - 1
    assert scalesim_cycles(256, 256, 256, 32, 32, df) == expected


def test_scalesim_m128_k4096_n4096_on_128x128_ws():
    # 32 * 32 folds of 2*128 + 128 + 128 - 2 = 510 -> 522240 - 1
    assert scalesim_cycles(128, 4096, 4096, 128, 128, Dataflow.WS) == 522239


def test_pipelined_ws_by_hand():
    # 8 folds (K=128 over 16 rows, N=32 over 32 cols) of max(M=64, R=16) = 64, plus R + C - 2 = 46
    assert int(array_cycles(64, 128, 32, 16, 32, Dataflow.WS, FoldMode.PIPELINED)) == 8 * 64 + 46
    # a short stream still pays the R cycles of loading the stationary weights
    assert int(array_cycles(4, 128, 32, 16, 32, Dataflow.WS, FoldMode.PIPELINED)) == 8 * 16 + 46


def test_fp8_doubles_reduction_rate():
    bf16 = array_cycles(128, 256, 128, 16, 32, Dataflow.WS, FoldMode.PIPELINED, 1)
    fp8 = array_cycles(128, 256, 128, 16, 32, Dataflow.WS, FoldMode.PIPELINED, 2)
    assert int(bf16) == 16 * 4 * 128 + 46 and int(fp8) == 8 * 4 * 128 + 46


def test_zero_dimension_costs_nothing():
    assert int(array_cycles(0, 128, 128, 16, 32, Dataflow.WS, FoldMode.SERIAL)) == 0


def test_vectorised():
    out = array_cycles(np.array([32, 64]), 32, 32, 32, 32, Dataflow.WS, FoldMode.SERIAL)
    assert out.tolist() == [2 * 32 + 32 + 32 - 2, 2 * 32 + 32 + 64 - 2]


def test_hbm_efficiency_by_hand(h200):
    """A made-up channel: 64 bits at 6.4 Gb/s per pin is 51.2 GB/s, so a 2 KiB batch in one
    direction takes 2048 / 51.2e9 = 40 ns; refresh takes 390 ns of every 3.9 us (10%). Reads only:
    0.9. Half writes: the bus turns 2 x 0.5 = once per batch, 10 ns per 40 ns: 0.9 / 1.25 = 0.72.
    A tenth writes: 0.2 turns per batch, 0.9 / 1.05."""
    hbm = replace(
        h200.chip.hbm,
        channel_width_bits=64,
        data_rate_bits_per_s=6.4e9,
        refresh_s=390e-9,
        refresh_interval_s=3.9e-6,
        turnaround_s=10e-9,
        rw_batch_bytes=2048,
    )
    assert hbm.efficiency(0.0) == pytest.approx(0.9)
    assert hbm.efficiency(0.5) == pytest.approx(0.72)
    assert hbm.efficiency(0.1) == pytest.approx(0.9 / 1.05)


def test_h200_headline_numbers(h200):
    from archsim.hardware import DType

    chip = h200.chip
    assert chip.hbm.peak_bandwidth_bytes_per_s == pytest.approx(4.8e12)
    assert chip.core.macs_per_cycle(DType.BF16) == 2048
    assert chip.peak_flops(DType.FP8) == pytest.approx(2 * chip.peak_flops(DType.BF16))
