"""Chip-family mappers (archsim/compiler/families/): the chip file's `family:` picks how its GEMMs
are tiled and its decode attention is run. The GPU family is the kernel library's mapping (its
results are the golden and recorded ones, tests/test_golden.py, test_engine_recorded.py); the TPU
family tiles from VMEM and the MXU and runs decode attention as the ragged paged-attention kernel."""

import typing
from dataclasses import replace
from pathlib import Path

import pytest

from archsim.compiler.attention import item_shape
from archsim.compiler.families import FAMILIES, dataflow, family_rule, gpu, tpu, trainium, wafer
from archsim.compiler.families.tpu import decode_block_cycles, kv_stages, mxu_menu, vmem_fits
from archsim.compiler.gemm import library_tiles, shortlist
from archsim.config.hw_schema import HardwareCfg
from archsim.config.loader import load_system, load_workload
from archsim.dtypes import DType
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware import ChipFamily
from archsim.hashing import copy_with

ROOT = Path(__file__).resolve().parents[1]
TPUS = ("tpu_v5e", "tpu_v6e", "tpu_v7")
# Llama-3-8B's decode attention: 32 query heads on 8 KV heads of 128
DECODE = Op(OpKind.ATTENTION, DType.BF16, batch=8, heads=32, kv_heads=8, head_dim=128, q_len=1, kv_len=0,
            causal=True, scaling=Scaling.FIXED)  # fmt: skip


def chip(name: str):
    return load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0].chip


def test_the_schema_offers_every_family_and_the_registry_keys_each_rule_by_its_own():
    allowed = typing.get_args(HardwareCfg.model_fields["family"].annotation)
    assert set(allowed) == {f.value for f in ChipFamily}
    assert HardwareCfg.model_fields["family"].default == "gpu"
    assert all(rule.family is family for family, rule in FAMILIES.items())


def test_every_shipped_chip_file_states_its_family_and_gets_that_mapper():
    """Files that extend a chip take its family; a family without a file of its own maps as
    the GPU library does."""
    expected = {"tpu": ChipFamily.TPU, "trainium": ChipFamily.TRAINIUM, "lpu": ChipFamily.DATAFLOW,
                "dataflow": ChipFamily.DATAFLOW, "wafer": ChipFamily.WAFER, "scalesim": ChipFamily.SYSTOLIC}  # fmt: skip
    for path in sorted((ROOT / "hw_configs").glob("*.yaml")):
        text = path.read_text()
        assert ("\nfamily: " in text) != ("\nextends: " in text), path.name
        family = next((f for prefix, f in expected.items() if path.stem.startswith(prefix)), ChipFamily.GPU)
        c = load_system(str(path))[0].chip
        assert c.family is family, path.name
        rules = {ChipFamily.TPU: tpu.RULE, ChipFamily.TRAINIUM: trainium.RULE, ChipFamily.DATAFLOW: dataflow.RULE,
                 ChipFamily.WAFER: wafer.RULE}  # fmt: skip
        assert family_rule(c) is rules.get(family, gpu.RULE)


def test_a_gpu_family_stated_keeps_the_config_hash_of_the_file_without_it(tmp_path):
    """`family: gpu` is the default: stating it leaves the resolved config and its hash as they
    were (files written before the key existed keep theirs); another family changes them."""
    from archsim.api.inputs import load_system as api_load

    text = (ROOT / "hw_configs" / "h200.yaml").read_text()
    without = tmp_path / "without.yaml"
    without.write_text("\n".join(line for line in text.splitlines() if not line.startswith("family:")) + "\n")
    assert api_load(str(without)).config_hash == api_load(str(ROOT / "hw_configs" / "h200.yaml")).config_hash
    assert api_load(str(without), family="tpu").config_hash != api_load(str(without)).config_hash


def test_an_unknown_family_is_a_located_error(tmp_path):
    from archsim.errors import ConfigError

    text = (ROOT / "hw_configs" / "tpu_v6e.yaml").read_text().replace("family: tpu ", "family: npu ")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    line = 1 + text.splitlines().index(next(x for x in text.splitlines() if x.startswith("family:")))
    with pytest.raises(ConfigError, match=rf"bad.yaml:{line}: family: "):
        load_system(str(bad))


def test_mxu_menu_doubles_the_array_edge_up_to_the_dimension():
    """8192 on a 256 array: 256, 512, ..., 8192 (6 edges, none capped at 512); 300: 256 and 512
    (under 600) and 300 itself; a dimension under the edge is one block of itself."""
    assert mxu_menu(8192, 256) == [256, 512, 1024, 2048, 4096, 8192]
    assert mxu_menu(300, 256) == [256, 300, 512]
    assert mxu_menu(8, 128) == [8]  # a decode's 8 rows: the edge 128 is not under 16


def test_tpu_gemm_tiles_are_those_double_buffered_vmem_holds():
    """A 512^3 bf16 GEMM on the v6e (MXU edge 256): edges 256 and 512 each way, 8 blocks. With
    VMEM cut to 1 MiB only 256^3 fits: 2 x (256 x 256 x 2 + 256 x 256 x 2) + 256 x 256 x 4 =
    786,432 B; 512 x 256 x 256 needs 2 x (262,144 + 131,072) + 524,288 = 1,310,720 B."""
    v6e = chip("tpu_v6e")
    op = Op(OpKind.GEMM, DType.BF16, m=512, k=512, n=512, scaling=Scaling.FIXED)
    tm, tn, tk = tpu.RULE.gemm_tiles(op, v6e)
    assert len(tm) == 8 and set(tm) == set(tn) == set(tk) == {256, 512}
    assert vmem_fits(256, 256, 256, 2, 2, 786_432) and not vmem_fits(256, 256, 256, 2, 2, 786_431)
    small = replace(v6e, core=replace(v6e.core, sram=replace(v6e.core.sram, capacity_bytes=1 << 20)))
    tm, tn, tk = tpu.RULE.gemm_tiles(op, small)
    assert (tm.tolist(), tn.tolist(), tk.tolist()) == ([256], [256], [256])


def test_tpu_gemm_tiles_go_past_the_librarys_512():
    """8192^3 on the v6e: the library's edges stop at 512 (or the whole 8192), the TPU family's
    shortlist holds only tiles of a larger edge that the library never offers, e.g. 4096 x 4096 x 2048: 2 x 2 x 4096 x 2048 x 2 B = 64 MiB of stages and
    a 64 MiB accumulator, 128 MiB of VMEM."""
    v6e = chip("tpu_v6e")
    op = Op(OpKind.GEMM, DType.BF16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
    library = set(library_tiles(op, v6e)[0].tolist())
    assert library & {1024, 2048, 4096} == set() and max(library - {8192}) == 512
    assert all(max(t.tm, t.tn) in {1024, 2048, 4096} for t in shortlist(op, v6e, 4))
    assert vmem_fits(4096, 4096, 2048, 2, 2, 128 << 20)


def test_the_folded_decode_item_rows_and_block_cycles():
    """Llama-3-8B on the v6e: the GQA group's 4 query heads are the item's rows; a K/V block of
    512 tokens takes 512 x (128 + 128) / (2 MXUs x 256 rows x 2 bf16 products) = 128 cycles on
    the MXUs, its softmax 8 (4 rows padded to 8 sublanes) x 512 x 4 lane ops / 1024 lanes = 16
    and 8 x 512 / 256 = 16 exps, overlapped: 128. The GPU family pads the softmax to the MMA's
    rows and plays smaller blocks."""
    v6e = chip("tpu_v6e")
    assert decode_block_cycles(DECODE, v6e, 4, 512, (4, 1)) == 128.0
    assert item_shape(DECODE, v6e) == (4, 4, 512, 128.0)
    assert item_shape(DECODE, chip("h200"))[2] < 512


def test_the_decode_kernel_keeps_hbms_latency_bandwidth_product_in_flight():
    """v6e: 2 x 1.6384 TB/s x (500 + 5) ns = 1,654,784 B to cover; a block of 512 tokens of one
    KV head's K and V (512 B a token) is 262,144 B: ceil(6.31) = 7 loading and 1 computing."""
    v6e = chip("tpu_v6e")
    assert v6e.hbm.peak_bandwidth_bytes_per_s == pytest.approx(1.6384e12)
    assert kv_stages(v6e, 262_144) == 8
    assert kv_stages(v6e, 64 << 20) == 2  # a block larger than the cover: double buffering


def test_folded_decode_attention_moves_its_kv_near_hbm_bandwidth():
    """Llama-3-8B's decode attention at batch 8 and 8,192 tokens on the v6e reads its K and V
    (8 x 8 KV heads x 8,192 x 512 B = 268 MB) at >= 80% of HBM's peak: memory-bound, as the
    ragged paged-attention kernel runs (86% measured on TPU7x, arXiv:2604.15464)."""
    from archsim.choose.timed import time_op

    v6e = chip("tpu_v6e")
    t = time_op(copy_with(DECODE, kv_len=8192), v6e).timing
    assert t.hbm_bytes >= 8 * 8 * 8192 * 512
    assert t.hbm_bytes / t.time_s >= 0.8 * v6e.hbm.peak_bandwidth_bytes_per_s


@pytest.mark.parametrize("name", TPUS)
def test_a_large_gemm_reaches_55_percent_of_peak_on_every_tpu(name):
    """8192^3 bf16 at >= 55% of peak (42% on the v6e with the library's 512 tiles, which read
    11x the compulsory bytes), reading <= 5x its compulsory bytes."""
    from archsim.choose.timed import time_op

    c = chip(name)
    op = Op(OpKind.GEMM, DType.BF16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
    t = time_op(op, c).timing
    assert op.flops() / t.time_s >= 0.55 * c.peak_flops(DType.BF16)
    assert t.hbm_bytes <= 5 * op.min_bytes()


def test_a_tilings_neighbours_are_one_move_away_and_legal():
    """1024 x 1024 x 512 tiles of a 4096 x 1024 x 4096 GEMM on a TPU v6e (one TensorCore, 128 MiB
    of VMEM; menu edges 256 .. 4096, K steps 256 .. 1024): every tile and K move stays on the
    menu and fits VMEM (the largest, 2048 x 1024 x 512: 2 x (2048 x 512 + 512 x 1024) x 2 B +
    2048 x 1024 x 4 B = 14 MiB), so all 8 are legal; stream-K is not (16 tiles fill whole waves
    of one core), two-way split-K is (2 K steps of 512), and one core has no half. A search of
    the K step alone has the two K moves."""
    from archsim.choose.tilings import neighbours
    from archsim.compiler.chip_family import SearchMove
    from archsim.compiler.gemm_phases import GemmMapping, Tiling

    op = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    v6e, t = chip("tpu_v6e"), Tiling(1024, 1024, 512)
    got = [(n.tm, n.tn, n.tk, n.mapping, n.split) for n in neighbours(op, v6e, t)]
    dp, sk = GemmMapping.DATA_PARALLEL, GemmMapping.SPLIT_K
    assert got == [
        (2048, 1024, 512, dp, 1),
        (1024, 2048, 512, dp, 1),
        (512, 1024, 512, dp, 1),
        (1024, 512, 512, dp, 1),
        (2048, 512, 512, dp, 1),
        (512, 2048, 512, dp, 1),
        (1024, 1024, 1024, dp, 1),
        (1024, 1024, 256, dp, 1),
        (1024, 1024, 512, sk, 2),
    ]
    assert [n.tk for n in neighbours(op, v6e, t, frozenset({SearchMove.K_STEP}))] == [1024, 256]


def test_a_search_may_deal_a_gemm_over_fewer_cores():
    """On the 2-stack dataflow chip (16 cores) a tiling's neighbours include it dealt over 8
    cores, and one on 8 cores returns to 16 (every core: `grid` 0) or goes to 4; a grid of every
    core or more is no tiling, and its kernel runs on the cores it names: 16 tiles of 1024 x
    1024 of a 4096 x 1024 x 4096 GEMM on 8 cores, 2 a core."""
    from archsim.choose.tilings import legal_tiling, neighbours
    from archsim.compiler.gemm import compile_gemm
    from archsim.compiler.gemm_phases import Tiling

    c = chip("dataflow_2stack")
    op = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    t = Tiling(1024, 1024, 128)
    assert [n.grid for n in neighbours(op, c, t)].count(8) == 1
    assert {n.grid for n in neighbours(op, c, replace(t, grid=8))} >= {0, 4}
    assert not legal_tiling(op, c, replace(t, grid=16)) and legal_tiling(op, c, replace(t, grid=8))
    phase = compile_gemm(op, c, replace(t, grid=8)).phases[0]
    assert phase.label.endswith("on 8 cores")
    assert int(phase.core_weight.sum()) == 8


@pytest.mark.parametrize(("name", "every_move"), [("tpu_v6e", True), ("trainium2", True), ("dataflow_2stack", True),
                                                 ("h200", False), ("wafer", False)])  # fmt: skip
def test_the_search_around_the_shortlist_never_loses_what_it_played(name, every_move):
    """The TPU's, Trainium's and a dataflow chip's compilers search every move around the
    shortlist: they play more candidates than the shortlist and keep the fastest, so the GEMM is
    never slower than the shortlist's best; a GPU library (and the wafer's) plays its shortlist
    only."""
    from archsim.choose.clock import play_held
    from archsim.choose.pick import choose, program_time_s
    from archsim.choose.tilings import cached_tilings
    from archsim.compiler.chip_family import EVERY_MOVE
    from archsim.compiler.compile import compile_candidates
    from archsim.engine.simulate import play_program

    c = chip(name)
    assert family_rule(c).search_moves() == (EVERY_MOVE if every_move else frozenset())
    op = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    tilings = cached_tilings(op, c)
    picked = choose(op, c)
    assert (picked.candidates > len(tilings)) is every_move
    listed = []
    for p in compile_candidates(op, c, tilings):
        clock, held = play_held(p, c, play_program(p, c))
        listed.append(program_time_s(p, held, c, clock))
    assert program_time_s(picked.program, picked.played, c, picked.clock_hz) <= min(listed)


def test_the_trainium_decode_item_takes_512_keys_a_moving_tile():
    """Trainium2 (one 128 x 128 engine a core, 1 bf16 product per PE): a block of 512 tokens
    (nc_matmul's most moving columns) costs 512 x 256 / 128 = 1,024 cycles on the engine; the
    softmax's 4 rows (unpadded) x 512 x 4 lane ops / 512 lanes = 16, 4 x 512 / 128 = 16 exps."""
    trn = chip("trainium2")
    assert item_shape(DECODE, trn) == (4, 4, 512, 1024.0)


@pytest.mark.parametrize("name", ["tpu_v6e", "trainium2"])
def test_decode_step_grows_with_kv_as_its_bytes_over_bandwidth(name):
    """Llama-3-8B at batch 8, KV 2,048 -> 8,192: the step grows by 0.9-1.6x the added K/V bytes
    over HBM bandwidth (on the v6e 8 x 6,144 tokens x 131,072 B over 32 layers / 1.6384 TB/s =
    3.93 ms; 11.9x and 2.6x before); and tokens/s keeps rising with the batch past 16 (the
    attention does not cap it)."""
    from archsim.runner.steps import step_model

    system = load_system(str(ROOT / "hw_configs" / f"{name}.yaml"))[0]
    llama = load_workload(str(ROOT / "workloads" / "llama3_8b.yaml"))[0]
    steps = step_model(llama, system)
    grown = steps.decode_step_s(8, 8 * 8192, 8192) - steps.decode_step_s(8, 8 * 2048, 2048)
    kv_s = 8 * 6144 * (2 * 8 * 128 * 2 * 32) / system.chip.hbm.peak_bandwidth_bytes_per_s
    assert 0.9 <= grown / kv_s <= 1.6
    rate = {b: b / steps.decode_step_s(b, b * 2048, 2048) for b in (8, 16, 64)}
    assert rate[8] < rate[16] < rate[64] and rate[64] > 1.5 * rate[16]
