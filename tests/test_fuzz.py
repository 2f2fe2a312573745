"""Fuzz: mutated copies of the shipped configs load, or are refused with `path:LINE:` problems;
`archsim run` on them exits 0 or 2 and never shows a traceback.

The mutations (keys dropped, added, renamed; values retyped, corrupted, scaled; lines moved;
bytes flipped) live in `tools/fuzz_configs.py`, which runs thousands of examples on demand.
Here a fixed (derandomized) set keeps CI reproducible and fast.
"""

import importlib.util
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fuzz_configs", ROOT / "tools" / "fuzz_configs.py")
fuzz = sys.modules.setdefault("fuzz_configs", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(fuzz)


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@fuzz_settings(300)
@given(fuzz.cases())
def test_mutated_configs_load_or_are_refused_with_located_problems(case):
    with tempfile.TemporaryDirectory() as folder:
        assert fuzz.check_load(case, folder) in ("ok", "error")


@fuzz_settings(10)
@given(fuzz.cases())
def test_cli_on_mutated_configs_exits_0_or_2(case):
    with tempfile.TemporaryDirectory() as folder:
        assert fuzz.check_cli(case, folder) in (0, 2)


@fuzz_settings(8)
@given(fuzz.cases(gentle=True))
def test_cli_on_rescaled_configs_exits_0_or_2(case):
    """Values scaled and choices swapped: mostly valid chips and models that simulate end to end."""
    with tempfile.TemporaryDirectory() as folder:
        assert fuzz.check_cli(case, folder) in (0, 2)


def test_the_strategies_reach_both_outcomes():
    """A fuzz run that only ever produced errors (or only successes) would test little."""
    outcomes = set()

    @fuzz_settings(80)
    @given(fuzz.cases())
    def collect(case):
        with tempfile.TemporaryDirectory() as folder:
            outcomes.add(fuzz.check_load(case, folder))

    collect()
    assert outcomes == {"ok", "error"}
