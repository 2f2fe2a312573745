"""A dataflow chip's GEMM tile streamed out a block of output columns at a time
(archsim/compiler/output_stream.py): the blocks it cuts, the entries it plays, the SRAM buffers
it keeps, and the time it saves on the Dataflow-2S; other families play as before."""

from pathlib import Path

import numpy as np
import pytest
from family_chips import chip as family_chip
from family_chips import more_of, scaled

from archsim.choose import simulate_op
from archsim.compiler.families.dataflow import stream_install_bytes_per_cycle
from archsim.compiler.gemm import compile_gemm
from archsim.compiler.gemm_phases import GemmMapping, Tiling
from archsim.compiler.output_stream import (
    drained_cols,
    feed_floor_cycles,
    output_block_cols,
    streamed_item,
    streamed_stages,
)
from archsim.config.loader import load_system
from archsim.dtypes import DType
from archsim.graph.ops import Op, OpKind, Scaling

ROOT = Path(__file__).resolve().parents[1]
GEMM = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
TWICE_THE_CORES = {"cores": 2.0, "clock": 0.8, "sram_capacity": 0.5, "inflight": 0.5, "l2_capacity": 0.25,
                   "hbm_data_rate": 1.5, "hbm_stacks": 2.0, "power_limit": 0.75}  # fmt: skip


def chip(name: str):
    return load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0].chip


def test_a_wide_tile_streams_in_blocks_of_an_arrays_width_where_its_panels_fit():
    """Dataflow-2S: 2 arrays of 128 x 128, 16 MiB a core, 2,048 B a cycle. A 512 x 1024 x 128
    tile, K = 1,024: A panel 512 x 1,024 x 2 = 1 MiB; 2 x 1 MiB + 2 x 128 x 128 x 2 = 2.06 MiB
    fits; a block of 128 columns: 512 rows shared by the 2 arrays, 128 deep, 256 cycles, 8 of
    them = 2,048, the whole step's -> 128. A tile no wider than an array: 0. In 2 MiB the panels
    do not fit -> 0. A 32-row tile: 8 blocks of 32 cycles (256) or 4 of 256 columns (4 x 36 =
    144) against its step's 132 -> 0."""
    c = chip("dataflow_2stack")
    install = stream_install_bytes_per_cycle(c)
    assert output_block_cols(GEMM, c, Tiling(512, 1024, 128), install) == 128
    assert output_block_cols(GEMM, c, Tiling(512, 128, 128), install) == 0
    small = Op(OpKind.GEMM, DType.BF16, m=32, k=1024, n=4096, scaling=Scaling.FIXED)
    assert output_block_cols(small, c, Tiling(32, 1024, 128), install) == 0
    tight = family_chip("dataflow_2stack", scaled("dataflow_2stack", {"sram_capacity": 0.125}))
    assert tight.core.sram.capacity_bytes == 2 << 20
    assert output_block_cols(GEMM, tight, Tiling(512, 1024, 128), install) == 0


def test_a_streamed_tile_keeps_buffers_for_its_b_steps_beside_two_a_panels():
    """8 MiB, 512 x 1024 x 128 tiles over K = 1,024 in blocks of 128: (8 MiB - 2 x 1 MiB) /
    (128 x 128 x 2 = 32 KiB) = 192, capped at a tile's 8 blocks x 8 steps = 64; with 2.5 MiB
    (2.5 - 2) MiB / 32 KiB = 16."""
    assert streamed_stages(GEMM, Tiling(512, 1024, 128), 128, 8 << 20) == 64
    assert streamed_stages(GEMM, Tiling(512, 1024, 128), 128, 5 << 19) == 16


def test_a_streamed_tile_loads_a_with_its_first_block_and_stores_each_block_at_its_last_step():
    """512 x 1024 over 8 steps of 128, blocks of 128, bf16, 3/4 of the bytes from HBM: 64
    entries; the first 8 load 512 x 128 x 2 + 128 x 128 x 2 = 163,840 B (122,880 from HBM),
    the other 56 128 x 128 x 2 = 32,768 B; entries 7, 15, ..., 63 store 512 x 128 x 2 =
    131,072 B, the rest nothing; all 512 x 1024 x 2 = 1 MiB stored, and A's 1 MiB and B's 2 MiB
    loaded, as the K-outer order does. Every step one shape, (512, 128, 128)."""
    shapes: dict = {}
    seq = streamed_item(512, 1024, np.full(8, 128), 128, (2.0, 2.0), 0.75, ("store_bytes", 2), shapes)
    loads = seq["hbm_bytes"] + seq["l2_bytes"]
    assert len(seq) == 64 and loads[0] == 163_840 and seq["hbm_bytes"][0] == 122_880
    assert (loads[8:] == 32_768).all()
    assert (seq["store_bytes"][7::8] == 131_072).all() and seq["store_bytes"].sum() == 1 << 20
    assert loads.sum() == 3 << 20
    assert shapes == {(512, 128, 128): 0} and (seq["cycles"] == 0).all()


def test_the_estimate_drains_an_arrays_width_on_a_chained_schedule_and_the_whole_tile_elsewhere():
    """1,024 columns on 128 x 128 arrays: 128 where the schedule chains (the dataflow family),
    1,024 where it does not."""
    c = chip("dataflow_2stack")
    assert drained_cols(np.array([1024]), c, True)[0] == 128
    assert drained_cols(np.array([1024]), c, False)[0] == 1024


def test_streaming_drains_a_one_wave_gemm_under_its_compute():
    """The Dataflow-2S with twice its cores (32) and stacks, 1.5 x its HBM data rate, half its
    SRAM and bytes in flight, 80% of its clock: 4096 x 1024 x 4096 in one wave of 32 tiles of
    512 x 1024 x 128, 16,638 cycles of compute a core. In the K-outer order its first compute
    waited for 32 x 384 KiB from L2 and its 32 MiB of outputs drained after its last: 33,467
    cycles, 47.5% of peak. Streamed, 64 entries a tile, each of its 8 blocks' 128 KiB stored
    at the block's last step, 1 / 8 of the outputs left after the last compute: >= 50%."""
    c = family_chip("dataflow_2stack", scaled("dataflow_2stack", TWICE_THE_CORES))
    program = compile_gemm(GEMM, c, Tiling(512, 1024, 128))
    phase = program.phases[0]
    seq = phase.store_bytes[phase.core_start[0] : phase.core_start[1]]
    assert len(seq) == 64 and np.count_nonzero(seq) == 8 and seq[7] == 131_072
    t = simulate_op(GEMM, c)
    assert GEMM.flops() / t.time_s >= 0.5 * c.peak_flops(DType.BF16)


def test_a_block_is_no_wider_than_main_memory_feeds_its_steps():
    """The 2-stack dataflow chip on 32 cores at 60% of its clock (1.08 GHz), 2 MiB in flight, 4x
    its L2 and one HBM stack at 4.8 Gb/s (614.4 GB/s): a 4096 x 1024 x 4096 bf16 GEMM
    as 512 x 4096 x 128 tiles in 2 K slices (16 items, one wave of 4 steps of 128 a core). Its
    50,331,648 compulsory bytes take 50,331,648 / 614.4e9 x 1.08e9 = 88,474 cycles, 22,118 a
    step (`feed_floor_cycles`). On 4 arrays of 128 x 128 installing 2,048 B a cycle between
    them (512 each), a 128-column block step is 512 rows / 4 = 128 an array, 128 cycles (its
    fold installs in 32 KiB / 512 = 64): 32 of them take the whole step's 4,096 -> 128 either
    way. On 8 arrays (256 B a cycle each) a 128-column block is 64 rows an array behind a
    128-cycle install: 32 x 128 = 4,096 against the whole step's 2,048 (512 columns an array, 4
    folds of 512 rows); 1,024 columns (128 an array, 512 rows) are 4 x 512 = 2,048: the arrays
    alone would stream 1,024-column blocks, 4 entries a step, which played 91.60 us against the
    4 arrays' 87.66 (their first compute behind a larger load, their last after the loads); the
    feed's 22,118 cycles a step take longer than either, so 128 columns on both, and twice the
    arrays run the GEMM no slower: 87.66 us. Dealt to one core, its 64 steps would be fed in
    1,382 cycles each, under the whole step's 2,048: 1,024 columns, as the arrays alone set."""
    factors = {"cores": 2.0, "clock": 0.6, "matrix_units": 2.0, "inflight": 2.0, "l2_capacity": 4.0,
               "hbm_data_rate": 0.75, "hbm_stacks": 0.5}  # fmt: skip
    params = scaled("dataflow_2stack", factors)
    base, more = family_chip("dataflow_2stack", params), more_of("dataflow_2stack", params, "matrix_units", 2.0)
    assert more is not None and (base.core.matrix_units, more.core.matrix_units) == (4, 8)
    assert base.hbm.peak_bandwidth_bytes_per_s == 614.4e9 and base.clock_hz == 1.08e9 and base.cores == 32
    t = Tiling(512, 4096, 128, GemmMapping.SPLIT_K, 2)
    assert feed_floor_cycles(GEMM, base, t, 32) == pytest.approx(50_331_648 / 614.4e9 * 1.08e9 / 4)
    install = stream_install_bytes_per_cycle(base)
    assert output_block_cols(GEMM, base, t, install) == 128
    assert output_block_cols(GEMM, more, t, install) == 128
    assert output_block_cols(GEMM, more, t, install, 1) == 1024
    assert simulate_op(GEMM, more).time_s <= simulate_op(GEMM, base).time_s
    assert simulate_op(GEMM, base).time_s == pytest.approx(87.662e-6, rel=1e-4)
