"""The size check before a run (archsim/runner/size.py) is arithmetic on the op and the chip: it
bounds from above the entries of every program the compiler will build for a GEMM, without
ranking rasters (no L2 walk), and refuses at once what is beyond MAX_PROGRAM_ENTRIES."""

import time
from dataclasses import replace

import pytest

from archsim.api.inputs import as_hardware
from archsim.compiler.gemm import compile_gemm, shortlist, shortlist_size
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.runner.size import gemm_entries

SHAPES = [(64, 4096, 14336), (1024, 4096, 6144), (300, 5000, 700), (8192, 14336, 4096)]


@pytest.mark.parametrize("chip_name", ["h100", "mi300x", "tpu_v6e", "scalesim_os_32x32"])
def test_the_estimate_bounds_every_compiled_candidate(chip_name):
    chip = as_hardware(chip_name).system.chip
    for m, k, n in SHAPES:
        op = Op(OpKind.GEMM, m=m, k=k, n=n, scaling=Scaling.FIXED)
        built = max(
            sum(p.entries for p in compile_gemm(op, chip, t).phases) for t in shortlist(op, chip, shortlist_size(op))
        )
        estimate = gemm_entries(op, chip)
        assert estimate >= built, (m, k, n)
        # and not loose where it matters, near the limit (measured: 1.2x to 4.8x on these)
        if built > 10_000:
            assert estimate <= 8 * built, (m, k, n)


def test_the_estimate_bounds_the_deal_over_half_the_cores(monkeypatch):
    """A GPU's one-wave tiling is also played dealt over half the cores (choose/pick.py
    `_over_half_the_cores`), up to two items a core, so the bound counts core sequences of two
    items. On an H100 (132 SMs) 1024 x 4096 x 2048 in 128 x 128 x 64 tiles is 8 x 16 = 128
    tiles, one wave (66 < 128 <= 132) of 64 K steps: bounded from that tiling alone, 128 items +
    3 sequences x 2 items x 64 steps = 512. Dealt over 66 cores, 62 run two tiles (128 steps)
    and 4 run one (64), each distinct run stored once: 192 entries."""
    import archsim.runner.size as size
    from archsim.choose.pick import fills_one_wave
    from archsim.compiler.gemm_phases import Tiling

    chip = as_hardware("h100").system.chip
    op = Op(OpKind.GEMM, m=1024, k=4096, n=2048, scaling=Scaling.FIXED)
    t = Tiling(128, 128, 64)
    assert fills_one_wave(op, chip, t)
    monkeypatch.setattr(size, "shortlist_head", lambda *_: (t,))
    built = sum(p.entries for p in compile_gemm(op, chip, replace(t, grid=chip.cores // 2)).phases)
    assert built == 192
    assert gemm_entries(op, chip) == 512


def test_the_size_check_walks_no_raster(monkeypatch):
    """Llama-3-8B's prefill at batch 64 x 1,024 tokens on one 32x32 output-stationary array has
    1.8M output tiles of 32 x 32 in its gate/up GEMM, each a wave of its own: ranking the rasters
    walked the L2 over all of them for every tied candidate (more than 18 min of CPU). The check
    now only counts them."""
    import archsim.compiler.l2reuse as l2reuse
    from archsim.api.inputs import as_workload
    from archsim.runner.size import check_run_size

    def walked(*args):
        raise AssertionError("the size check walked the L2")

    monkeypatch.setattr(l2reuse, "_wave_walk", walked)
    shortlist.cache_clear()
    w = as_workload("llama3_8b").workload
    from dataclasses import replace

    w = replace(w, scenario=replace(w.scenario, batch=64, prompt_tokens=1024, output_tokens=4))
    start = time.process_time()
    check_run_size(w, as_hardware("scalesim_os_32x32").system)
    assert time.process_time() - start < 5
    assert shortlist.cache_info().misses == 0
