"""The memo registry (archsim/memo.py): one decorator for every simulation memo, and `clear_all`
that empties them all."""

from __future__ import annotations

import ast
from pathlib import Path

import archsim
from archsim import memo
from archsim.graph.ops import Op, OpKind, Scaling

PACKAGE = Path(archsim.__file__).resolve().parent


def test_a_memo_computes_once_until_cleared():
    calls: list[int] = []

    @memo.memo(maxsize=4)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert (square(3), square(3)) == (9, 9) and calls == [3]  # the second call is a hit
    memo.clear_all()
    assert square(3) == 9 and calls == [3, 3]  # forgotten: computed again
    assert square.cache_info().currsize == 1  # type: ignore[attr-defined]


def test_clear_all_forgets_what_a_simulation_memoised(h200):
    """A GEMM's timing fills the choice, the timing, the GEMM's shortlist and plans, its tile
    steps' cycles and its phases' memory figures; clear_all empties every one."""
    from archsim.choose import time_op
    from archsim.compiler import gemm, gemm_phases
    from archsim.compiler.tiles import step_cycles
    from archsim.hardware.memory import memory_params

    time_op(Op(OpKind.GEMM, m=512, k=1024, n=768, scaling=Scaling.FIXED), h200.chip)
    from archsim.choose import pick, timed

    # choose and time_op memoise per fidelity (choose/fidelity.py): their memos are the inner ones
    memos = (pick._choose, timed._time_op, gemm.shortlist, gemm_phases.wave_layout, step_cycles, memory_params)
    assert all(m.cache_info().currsize > 0 for m in memos) and gemm_phases._plans
    memo.clear_all()
    assert [m.cache_info().currsize for m in memos] == [0] * len(memos) and not gemm_phases._plans


def test_simulation_memos_go_through_the_registry():
    """No lru_cache of its own in the layers whose memos clear_all must reach."""
    layers = ("choose", "compiler", "engine", "runner")
    found = []
    for path in sorted(p for layer in layers for p in (PACKAGE / layer).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            imported = isinstance(node, ast.ImportFrom) and node.module == "functools"
            if imported and {a.name for a in node.names} & {"lru_cache", "cache"}:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("lru_cache", "cache"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, "use archsim.memo.memo: " + ", ".join(found)
