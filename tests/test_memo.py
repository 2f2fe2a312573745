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


def test_a_memo_by_bytes_lets_the_least_recently_used_go_past_its_budget():
    """Results of 40, 40 and 30 bytes in a memo of 100: the third brings it to 110, so the least
    recently used goes (the first, had it not been asked for again; the second, as it was):
    40 + 30 = 70 kept. One result larger than the budget is still kept, alone."""
    calls: list[int] = []

    @memo.memo_bytes(100, len)
    def blob(n: int) -> bytes:
        calls.append(n)
        return bytes(n)

    blob(40), blob(41), blob(40)  # 40 used last: 41 is the least recently used
    assert blob.cache_info().currsize == 2  # type: ignore[attr-defined]
    blob(30)  # 81 + 30 = 111 > 100: 41 goes
    assert blob.cache_info().currsize == 2  # type: ignore[attr-defined]
    blob(40), blob(30)
    assert calls == [40, 41, 30]  # both still kept: no call
    blob(41)
    assert calls == [40, 41, 30, 41]  # asked again: computed again
    blob(500)  # alone over the budget: every other result goes, it stays
    assert blob.cache_info().currsize == 1 and blob(500) == bytes(500) and calls[-1] == 500  # type: ignore[attr-defined]
    memo.clear_all()
    assert blob.cache_info().currsize == 0  # type: ignore[attr-defined]


def test_the_choices_memo_holds_at_most_its_budget_of_programs(h200, monkeypatch):
    """Choices are kept by the bytes of their programs' arrays (`pick.choice_bytes`): with a
    budget of one choice, timing a second op lets the first one's choice go."""
    from archsim.choose import pick

    memo.clear_all()
    a = Op(OpKind.GEMM, m=384, k=640, n=256, scaling=Scaling.FIXED)
    b = Op(OpKind.GEMM, m=128, k=640, n=256, scaling=Scaling.FIXED)
    first = pick.choose(a, h200.chip)
    assert pick.choice_bytes(first) > pick.CHOICE_OVERHEAD_BYTES  # its arrays count
    monkeypatch.setattr(pick._choose, "max_bytes", pick.choice_bytes(first))
    pick.choose(b, h200.chip)
    assert pick._choose.cache_info().currsize == 1  # type: ignore[attr-defined]
    assert pick.choose(a, h200.chip) is not first  # chosen again, the same way
    memo.clear_all()


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
