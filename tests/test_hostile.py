"""Hostile inputs on every input surface (the CI subset of `tools/hostile.py`): each runs in a
forked subprocess with a time and memory limit and must do what its case says: refuse with a
message naming the input, or run to a plausible result; never hang, exhaust memory, end in an
internal error or a traceback, put control characters on the terminal, echo a file that is not
a config, or lose a file. Problems of the simulator's core are marked as expected failures with
their reason (strict: a fix shows up as an unexpected pass, and its mark goes).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def _load(name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


hostile = _load("hostile")
hostile_cases = _load("hostile_cases")
_load("hostile_trust")
_load("hostile_api")
CASES = hostile_cases.all_cases(full=False)
WORKERS = 2


@pytest.fixture(scope="module")
def results():
    pytest.importorskip("pyarrow")
    hostile.warm_up()
    return {r.case.id: r for r in hostile.run_cases(CASES, workers=WORKERS)}


def _param(case):
    marks = [pytest.mark.xfail(reason=case.known, strict=True)] if case.known else []
    return pytest.param(case.id, marks=marks, id=case.id)


@pytest.mark.parametrize("case_id", [_param(c) for c in CASES])
def test_hostile_input(results, case_id):
    r = results[case_id]
    out = r.outcome
    assert r.verdict is hostile.Verdict.OK, (
        f"{r.verdict.value}: {r.why}\nexit {out.rc} (signal {out.killed_by}) in {out.elapsed_s:.1f} s\n"
        f"stderr: {out.err[-800:]}"
    )


def test_the_subset_covers_every_surface_and_both_answers():
    surfaces = {c.surface for c in CASES}
    assert surfaces == {
        *("names", "yaml", "hf", "trace", "spec", "store", "cases", "flags", "outputs", "signals"),
        *("cache", "streams", "api", "env", "physics", "families"),
    }
    assert {c.expect for c in CASES} >= {hostile.Expect.REFUSE, hostile.Expect.RUN, hostile.Expect.STOP}
    assert 300 <= len(CASES) <= 1400
    # each surface of what archsim reads back or is handed past its files has 50 inputs or more
    by_surface = {s: sum(c.surface == s for c in CASES) for s in ("cache", "api", "physics", "families")}
    assert min(by_surface.values()) >= 50, by_surface
    assert sum(c.surface in ("env", "streams") for c in CASES) >= 50
