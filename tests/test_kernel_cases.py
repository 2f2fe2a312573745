"""archsim/data/h200_kernels.json: the H200's per-kernel durations as validate cases, as
tools/kernel_cases.py derives them from the shipped kernel breakdown."""

import json
import sys
from pathlib import Path

import archsim

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(archsim.__file__).parent / "data"


def _tool():
    tools = str(ROOT / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import kernel_cases

    return kernel_cases


def test_the_shipped_kernel_cases_are_what_the_tool_derives():
    tool = _tool()
    derived = tool.kernel_cases(json.loads((DATA / "h200_llama3_8b_kernel_breakdown.json").read_text()))
    assert json.loads((DATA / "h200_kernels.json").read_text()) == derived


def test_a_split_k_projection_is_its_gemm_and_its_reduction():
    """The batch-1 output projection (1 x 4096 x 4096) ran as cuBLAS's split-K kernel, 350.2 us
    over 32 calls = 10.944 us, and the reduction summing its slices, 105.5 us over 64 calls (two
    split projections a layer) = 1.648 us: 12.592 us as a profiler's summed kernels read it. The
    QKV projection ran one kernel, 491.6 us / 32 = 15.363 us."""
    by_id = {c["id"]: c for c in json.loads((DATA / "h200_kernels.json").read_text())["cases"]}
    o = by_id["decode_b1_kv1024/b1.o"]
    assert (o["M"], o["K"], o["N"], o["measured_ms"]) == (1, 4096, 4096, 0.012592)
    assert by_id["decode_b1_kv1024/b1.qkv"]["measured_ms"] == 0.015363
    # the decode attention attends to the cached tokens and the new one
    assert by_id["decode_b32_kv2048/b32.attention"]["kv_len"] == 2049


def test_kernel_cases_are_timed_as_a_profiler_sums_kernels():
    from archsim.choose import Condition
    from archsim.commands.validate import load_case_file

    cases, meta, _ = load_case_file("h200_kernels")
    assert meta.timing is Condition.KERNEL and not meta.split_kv
    assert len(cases) == 20
