"""A kernel library's autotuner also times the GEMM tiling it picked dealt over half the cores
where its tiles fill one wave (choose/pick.py `fills_one_wave`, `_over_half_the_cores`)."""

from dataclasses import replace

import pytest
from family_chips import chip, more_of

from archsim.choose import simulate_op
from archsim.choose.pick import choose, fills_one_wave
from archsim.compiler.families import family_rule
from archsim.compiler.gemm_phases import GemmMapping, Tiling
from archsim.dtypes import DType
from archsim.graph.ops import Op, OpKind, Scaling

GEMM = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
# a B200 of 8 arrays a core (tests/family_chips.py's draw), the large GEMM's 256 x 256 tiles
# filling 256 of its 148 x 2 cores in one wave where it has twice its cores
B200 = (
    "b200",
    (
        (("cores", "matrix_units", "count"), 8),
        (("cores", "sram", "capacity"), "466944.0 B"),
        (("l2", "capacity"), "31500000.0 B"),
        (("hbm", "data_rate"), "5859375000.0 bps"),
        (("power", "limit"), "4000.0 W"),
    ),
)


@pytest.mark.parametrize(("cores", "one_wave"), [(296, True), (256, True), (148, False), (512, False)])
def test_tiles_fill_one_wave_where_half_the_cores_could_not_run_them(cores, one_wave):
    """256 x 256 tiles of 4096 x 1024 x 4096: 16 x 16 = 256 tiles. On 296 cores one wave that 148
    could not run (148 < 256 <= 296); on 256 the same (128 < 256 <= 256); on 148 two waves
    already (256 > 148); on 512 one wave that 256 cores run as well (256 <= 256)."""
    c = chip("b200", ((("cores", "count"), cores),))
    assert fills_one_wave(GEMM, c, Tiling(256, 256, 32)) is one_wave


def test_only_data_parallel_tiles_on_every_core_are_dealt_over_half():
    """Stream-K and split-K tiles balance their own waves, and a tiling dealt over fewer cores
    already is not dealt again."""
    c = chip("b200", ((("cores", "count"), 296),))
    t = Tiling(256, 256, 32)
    assert not fills_one_wave(GEMM, c, replace(t, mapping=GemmMapping.STREAM_K))
    assert not fills_one_wave(GEMM, c, replace(t, mapping=GemmMapping.SPLIT_K, split=2))
    assert not fills_one_wave(GEMM, c, replace(t, grid=148))


def test_only_a_kernel_librarys_autotuner_tries_half_the_cores():
    """The GPU family's; the families whose compilers search their tilings have the move in
    their search, and the wafer's kernel library does not deal GEMMs over fewer cores."""
    assert family_rule(chip("h200", ())).tries_half_the_cores()
    assert not family_rule(chip("tpu_v6e", ())).tries_half_the_cores()
    assert not family_rule(chip("trainium2", ())).tries_half_the_cores()


def test_a_b200_with_twice_its_cores_deals_its_one_wave_over_half_of_them():
    """On 296 cores the 256 tiles of 256 x 256 x 32 ran in one wave that finished together and
    wrote its 32 MiB of outputs at once, 28.61 us against 27.42 on 148 cores; dealt over 148 of
    the 296 it plays as the 148-core chip does (the same items on as many cores, the same L2 and
    HBM), to the bit."""
    small = chip(*B200)
    big = more_of(*B200, "cores", 2.0)
    assert big is not None and big.cores == 2 * small.cores == 296
    picked = choose(GEMM, big)
    assert picked.program.phases[0].label == "gemm 256x256x32 split1 row on 148 cores"
    assert simulate_op(GEMM, big).time_s == simulate_op(GEMM, small).time_s
