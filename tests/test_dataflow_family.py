"""The dataflow and wafer families (archsim/compiler/families/dataflow.py, wafer.py): weights
installed into the matrix units from the SRAM streams rather than a row a cycle, GEMM tiles of
resident weights, decode attention with K/V installed at the stream rate; and what that gives on
the shipped SRAM-only presets (the LPU, Dataflow-2S, the wafer)."""

from pathlib import Path

import pytest

from archsim.compiler.attention import item_shape
from archsim.compiler.families import dataflow, family_rule, gpu, wafer
from archsim.compiler.families.dataflow import resident_fits, stream_install_bytes_per_cycle, weights_resident
from archsim.compiler.gemm import tile_menu
from archsim.config.loader import load_system, load_workload
from archsim.dtypes import DType
from archsim.engine.timing import Bound
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware.chip import Dataflow, FoldMode
from archsim.hardware.systolic import array_cycles, fill_drain_cycles, fold_install_cycles, fold_install_exact

ROOT = Path(__file__).resolve().parents[1]
# Llama-3-8B's decode attention: 32 query heads on 8 KV heads of 128
DECODE = Op(OpKind.ATTENTION, DType.BF16, batch=8, heads=32, kv_heads=8, head_dim=128, q_len=1, kv_len=0,
            causal=True, scaling=Scaling.FIXED)  # fmt: skip
GEMM = Op(OpKind.GEMM, DType.BF16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
GEMV = Op(OpKind.GEMM, DType.BF16, m=1, k=8192, n=8192, scaling=Scaling.FIXED)


def system(name: str):
    return load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0]


def chip(name: str):
    return system(name).chip


def test_a_fold_installs_its_bytes_over_the_streams_between_one_cycle_and_a_row_a_cycle():
    """320 x 320 bf16 (204,800 B): at 88,889 B a cycle ceil(2.3) = 3; at 1,024 B 200; at 100 B
    2,048 capped at the 320 rows; int8 with four products per PE (409,600 B) at 88,889: 5."""
    assert fold_install_cycles(320, 320, 1, 2, 88_889) == 3
    assert fold_install_cycles(320, 320, 1, 2, 1_024) == 200
    assert fold_install_cycles(320, 320, 1, 2, 100) == 320
    assert fold_install_cycles(320, 320, 4, 1, 88_889) == 5
    assert fold_install_cycles(8, 8, 1, 1, 1e9) == 1


def test_pipelined_folds_take_the_install_cycles_in_place_of_the_rows():
    """1 x 640 x 640 on a 320 x 320 WS array: 4 folds of a 1-row stream. A row a cycle:
    4 x max(1, 320) + 638 = 1,918; installed in 3 cycles: 4 x 3 + 638 = 650; a stream longer
    than the install (m = 500) hides it: 4 x 500 + 638 = 2,638 either way."""
    ws, piped = Dataflow.WS, FoldMode.PIPELINED
    assert int(array_cycles(1, 640, 640, 320, 320, ws, piped)) == 1918
    assert int(array_cycles(1, 640, 640, 320, 320, ws, piped, 1, 3)) == 650
    assert int(array_cycles(500, 640, 640, 320, 320, ws, piped, 1, 3)) == 2638
    assert int(array_cycles(500, 640, 640, 320, 320, ws, piped)) == 2638


def test_chained_folds_install_without_rounding_each_and_leave_the_skew_to_the_kernel():
    """A fold of 320 x 320 bf16 streamed back to back: 204,800 / 88,889 = 2.304 cycles (capped
    at the 320 rows). 1 x 8192 x 8192 chained: 26 x 26 folds x 2.304 = 1,557.5 -> 1,558 (each
    rounded to 3 and the skew: 676 x 3 + 638 = 2,666); a 320 x 320 array's skew 638."""
    assert fold_install_exact(320, 320, 1, 2, 88_889) == pytest.approx(2.30399, rel=1e-5)
    assert fold_install_exact(320, 320, 1, 2, 100) == 320
    ws, piped = Dataflow.WS, FoldMode.PIPELINED
    load = fold_install_exact(320, 320, 1, 2, 88_889)
    assert int(array_cycles(1, 8192, 8192, 320, 320, ws, piped, 1, load, chained=True)) == 1558
    assert int(array_cycles(1, 8192, 8192, 320, 320, ws, piped, 1, 3)) == 2666
    assert fill_drain_cycles(320, 320) == 638
    # a stream longer than the install hides it, chained or not but for the skew: 4 x 500
    assert int(array_cycles(500, 640, 640, 320, 320, ws, piped, 1, load, chained=True)) == 2000


def test_the_dataflow_schedule_pays_the_arrays_skew_once_per_core():
    """The LPU's GEMV of 1 x 8192 x 8192 as 26 items of 320 columns, each one step over the
    whole K: 8,192 x 320 x 2 B installed over 26 folds at 88,889 B a cycle = 58.98 cycles, its
    16 KiB of activations with them over the streams 59.17 -> 60; the last item's 192 columns
    (3,145,728 B: 35.4, with the activations 35.6 -> 36) and the 638 of skew: 25 x 60 + 674.
    Unchained (a GPU's kernels), each fold rounded up, 3 cycles (2 for the last item's 192
    columns), and the skew every step: 26 x 3 + 638 = 716, 26 x 2 + 638 = 690."""
    from archsim.compiler.gemm_phases import Tiling, gemm_phase

    lpu = chip("lpu")
    assert dataflow.RULE.chains_folds(lpu) and not gpu.RULE.chains_folds(lpu)
    assert not wafer.RULE.chains_folds(chip("wafer"))
    t = Tiling(1, 320, 8192)
    phase = gemm_phase(GEMV, lpu, t, "gemv", None, 88_889.0, True)
    assert phase.compute_cycles.tolist() == [60] * 25 + [36 + 638]
    unchained = gemm_phase(GEMV, lpu, t, "gemv", None, 88_889.0)
    assert unchained.compute_cycles.tolist() == [716] * 25 + [690]


def test_a_fold_at_an_edge_installs_only_the_weights_it_holds():
    """A 256 x 256 array, bf16, at 5,681.75 B a cycle (the wafer's 22,727 over 4 arrays): a
    block of 8,192 x 128 in 32 folds of 256 x 128 (65,536 B): 11.53 -> 12 cycles a fold, a whole
    array's 131,072 B 23.07 -> 24; exact, 11.53. So twice the arrays splitting N = 512 install
    no slower: 2 arrays, 8,192 x 256 each at 11,363.5 B a cycle, 32 folds x 12; 4 arrays,
    8,192 x 128 each at 5,681.75, 32 folds x 12."""
    from archsim.hardware.systolic import block_install_cycles

    ws = Dataflow.WS
    assert int(block_install_cycles(8192, 128, 256, 256, ws, 1, 2, 5_681.75, False)) == 12
    assert int(block_install_cycles(8192, 256, 256, 256, ws, 1, 2, 5_681.75, False)) == 24
    assert float(block_install_cycles(8192, 128, 256, 256, ws, 1, 2, 5_681.75, True)) == pytest.approx(11.534, rel=1e-3)
    assert int(block_install_cycles(8192, 256, 256, 256, ws, 1, 2, 11_363.5, False)) == 12
    assert fold_install_cycles(256, 256, 1, 2, 5_681.75) == 24  # other dataflows: a whole array's


def test_each_sram_only_preset_gets_its_familys_mapper_at_its_streams_rate():
    """The LPU's install rate is its SRAM streams' 80 TB/s at 900 MHz = 88,889 B a cycle; a
    wafer cluster's 21 PB/s / 840 / 1.1 GHz = 22,727 B; the GPU family keeps a row a cycle."""
    assert family_rule(chip("lpu")) is dataflow.RULE and family_rule(chip("lpu_x576")) is dataflow.RULE
    assert family_rule(chip("dataflow_2stack")) is dataflow.RULE
    assert family_rule(chip("wafer")) is wafer.RULE and family_rule(chip("wafer_x4")) is wafer.RULE
    assert stream_install_bytes_per_cycle(chip("lpu")) == 88_889
    assert stream_install_bytes_per_cycle(chip("wafer")) == 22_727
    assert gpu.RULE.weight_install_bytes_per_cycle(chip("h200")) == 0.0


def test_weights_are_resident_where_the_main_memory_is_the_on_chip_sram():
    """The LPU's 230 MB and the wafer's 44 GB are their l2's SRAM; Dataflow-2S has 48 GB of HBM
    behind 64 MiB."""
    assert weights_resident(chip("lpu")) and weights_resident(chip("wafer"))
    assert not weights_resident(chip("dataflow_2stack"))


def test_a_tile_of_resident_weights_stages_only_its_activations():
    """1 x 8192 x 8192 bf16 on the LPU's 32 MiB stream buffer: 2 x 8,192 x 2 B + 8,192 x 4 B =
    64 KiB fits (its 128 MiB of weights stay where they are); 8,192 x 8,192 x 8,192 needs 2 x
    128 MiB of A: it does not."""
    cap = 32 << 20
    assert resident_fits(1, 8192, 8192, 2, cap)
    assert not resident_fits(8192, 8192, 8192, 2, cap)
    tm, tn, tk = tile_menu(GEMV, chip("lpu"))
    assert ((tn == 8192) & (tk == 8192)).any()  # the whole weight in one tile
    tm, tn, tk = tile_menu(GEMV, chip("dataflow_2stack"))  # staged from HBM: two stages fit 16 MiB
    assert not ((tn == 8192) & (tk == 8192)).any()
    assert (2 * (tm * tk + tk * tn) * 2 + tm * tn * 4 <= 16 << 20).all()


def test_decode_attention_installs_its_kv_blocks_at_the_stream_rate():
    """Llama-3-8B (4 query rows per KV head), blocks of 2,048 tokens of K and V (2,048 x 256 x
    2 B = 1,048,576 B). LPU: 1,048,576 / 88,889 -> 12 cycles; lanes 4 x 2,048 x 4 / 5,120 -> 7;
    exps 4 x 2,048 / 320 = 25.6 -> 26: the exps. Wafer: 1,048,576 / 22,727 -> 47; lanes
    4 x 2,048 x 4 / 8,192 = 4; exps 4 x 2,048 / 1,024 = 8: the install."""
    assert item_shape(DECODE, chip("lpu")) == (4, 4, 2048, 26.0)
    assert item_shape(DECODE, chip("wafer")) == (4, 4, 2048, 47.0)


@pytest.mark.parametrize("name", ["lpu", "dataflow_2stack", "wafer"])
def test_a_large_gemm_reaches_55_percent_of_peak(name):
    """8192^3 bf16 >= 55% of peak (before the family mappers: LPU 77%, Dataflow-2S 69%, wafer
    58%; now: 97%, 94%, 69%)."""
    from archsim.choose.timed import time_op

    c = chip(name)
    t = time_op(GEMM, c).timing
    assert GEMM.flops() / t.time_s >= 0.55 * c.peak_flops(DType.BF16)


@pytest.mark.parametrize(("name", "share"), [("lpu", 0.6), ("dataflow_2stack", 0.6)])
def test_a_batch_1_gemv_streams_its_weights_and_is_memory_bound(name, share):
    """1 x 8192 x 8192 bf16 reads its 128 MiB of weights once and is labelled memory-bound.
    Dataflow-2S streams them from HBM at >= 60% of its 1.64 TB/s (96%). The LPU installs each
    320 x 320 fold from its SRAM streams in 2.304 cycles while the previous fold computes, its
    folds chained over the kernel: 26 K steps of 320 x 8,192 of 59 cycles each (5.24 MB at
    88,889 B a cycle; the last, 192 deep, 36), the first streamed in before the array starts,
    and the skew of 638 once: 59 + 25 x 59 + 36 + 638 = 2,208 cycles and ~20 of latency, 2,229,
    2.48 us, 68% of 80 TB/s (before: each fold rounded to 3 cycles and the whole weight
    streamed before the array began, 4.66 us, 36%; before that, a row a cycle, 0.55%)."""
    from archsim.choose.timed import time_op

    c = chip(name)
    t = time_op(GEMV, c).timing
    assert t.hbm_bytes >= 8192 * 8192 * 2
    assert t.hbm_bytes / t.time_s >= share * c.hbm.peak_bandwidth_bytes_per_s
    assert t.bound is Bound.MEMORY


def gemv_mesh_floor_cycles(weight_bytes: float, core_bytes_per_cycle: float, hop_cycles: float) -> float:
    """Fewest cycles a batch-1 GEMV takes on a 2-D mesh of cores that each read only their own
    SRAM: its K x N weights spread over an n x n square of cores, K over its height and N over its
    width, the vector streamed in across one side and the partial sums reduced out across the
    other (Cerebras' GEMV layout: csl-examples, benchmarks/gemv-checkerboard-pattern and
    gemv-collectives_2d), each walk n hops of `hop_cycles`:

        T(n) = W / (b n^2) + 2 h n,  least where n^3 = W / (h b):  T = 3 h n

    E.g. 8192 x 8192 bf16 (W = 134,217,728 B) on WSE-3 cores of b = 21 PB/s / 900,000 cores /
    1.1 GHz = 21.21 B a cycle, h = 1 cycle: n = 185 cores, T = 555 cycles (0.50 us, 1.27% of 21
    PB/s); a wider square reads faster and walks longer. A floor: the square is the best
    rectangle (AM-GM), and the vector's own arrival and the partial sums' adds are not counted."""
    side_cores = (weight_bytes / (hop_cycles * core_bytes_per_cycle)) ** (1.0 / 3.0)
    return 3.0 * hop_cycles * side_cores


def test_a_gemv_on_a_mesh_takes_its_reads_and_two_walks_across_the_square_that_holds_it():
    """T(n) = W / (b n^2) + 2 h n at its least, n^3 = W / (h b), T = 3 h n: W = 1,000 B, b = 1 B
    and h = 1 cycle: n = 10, 10 + 20 = 30 cycles; W = 8,000 B: n = 20, 60; h = 2 cycles: n =
    500^(1/3) = 7.937, 1,000 / 63.0 + 4 x 7.937 = 15.87 + 31.75 = 47.62. Every other n is
    slower (n = 9 and 11 at W = 1,000: 12.35 + 18 = 30.35, 8.26 + 22 = 30.26)."""
    assert gemv_mesh_floor_cycles(1000, 1, 1) == pytest.approx(30)
    assert gemv_mesh_floor_cycles(8000, 1, 1) == pytest.approx(60)
    assert gemv_mesh_floor_cycles(1000, 1, 2) == pytest.approx(47.62, abs=0.01)
    for n in (9, 11):
        assert 1000 / n**2 + 2 * n > gemv_mesh_floor_cycles(1000, 1, 1)


def test_a_wafer_gemv_takes_what_its_mesh_allows_not_what_its_sram_could_feed():
    """1 x 8192 x 8192 bf16 on the wafer. Its 134,217,728 B of weights would stream in 6.4 ns at
    21 PB/s, but a GEMV's weights lie over a square of cores, each reading its own 48 KB SRAM at
    21 PB/s / 900,000 cores / 1.1 GHz = 21.21 B a cycle, the vector walking in across the square
    and the sums out, a hop of the file's 1 ns (1.1 cycles) each: n^3 = 134,217,728 / (1.1 x
    21.21), n = 179 cores, T = 3 x 1.1 x 179 = 591 cycles, 0.538 us: 1.19% of 21 PB/s
    (`gemv_mesh_floor_cycles`). The model deals it to 512 clusters, each reading its 262 KB in
    2 folds of 6 cycles and paying the cluster array's fill and drain, 510 cycles: 522 cycles
    of compute, 543 with latency and stores, 0.494 us, 0.92x the floor. It must take no more than
    twice the floor (>= 50% of what the mesh lets it move) and beat it by no more than 20% (a
    cluster of ~1,070 cores taken as one 256 x 256 array). 50% of 21 PB/s would be 50x faster
    than the mesh allows."""
    from archsim.choose.timed import time_op

    c = chip("wafer")
    per_core = 21e15 / 900_000 / c.clock_hz  # [DS]: 21 PB/s over 900,000 cores
    hop_cycles = c.noc.hop_latency_s * c.clock_hz
    floor_s = gemv_mesh_floor_cycles(8192 * 8192 * 2, per_core, hop_cycles) / c.clock_hz
    assert floor_s == pytest.approx(0.5375e-6, rel=1e-3)
    t = time_op(GEMV, c).timing
    assert 0.8 * floor_s <= t.time_s <= 2.0 * floor_s
    assert t.hbm_bytes / t.time_s < 0.03 * c.hbm.peak_bandwidth_bytes_per_s


def test_the_decode_step_grows_with_context_as_kv_bytes_over_bandwidth():
    """Llama-3-8B at batch 8, KV 2,048 -> 8,192 on Dataflow-2S: by 0.9-1.6x the added
    8 x 6,144 x 131,072 B over its HBM's 1.64 TB/s (1.03x)."""
    from archsim.runner.steps import step_model

    s = system("dataflow_2stack")
    llama = load_workload(str(ROOT / "workloads" / "llama3_8b.yaml"))[0]
    steps = step_model(llama, s)
    grown = steps.decode_step_s(8, 8 * 8192, 8192) - steps.decode_step_s(8, 8 * 2048, 2048)
    kv_s = 8 * 6144 * (2 * 8 * 128 * 2 * 32) / s.chip.hbm.peak_bandwidth_bytes_per_s
    assert 0.9 <= grown / kv_s <= 1.6
