#!/usr/bin/env python3
"""Count how many generated chips of each family break each physics invariant, without stopping
at the first: the test (tests/test_family_properties.py) stops a family at its first failing
example and skips the properties its NOT_YET lists, so it says whether a family holds, not how
often it does not. This draws the same chips (tests/family_chips.py, derandomised) and checks
every property on each.

Usage:

    python3 tools/family_counts.py [--draws N] [--family gpu --family tpu ...]

Prints one line per family: the draws, and the count of each property-op that failed
(e.g. `more-gemm 2`: twice some resource made the large GEMM slower on 2 chips). About 10 s of
CPU per 100 draws of a family with an empty op cache.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from family_chips import BASES, RESOURCES, SRAM_ONLY, family_chips
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_family_properties import PROPERTIES, check_family

from archsim.hardware import ChipFamily


def counts(family: ChipFamily, sram_only: bool, draws: int) -> collections.Counter:
    """How many of `draws` chips of the family break each property-op (and "draws": how many)."""
    found: collections.Counter = collections.Counter()

    @settings(
        max_examples=draws, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(family_chips(family, sram_only), st.sampled_from(sorted(RESOURCES)), st.sampled_from(["gemm", "gemv"]))
    def draw(drawn, resource, which):
        found["draws"] += 1
        for prop in PROPERTIES:
            try:
                check_family(drawn, resource, which, (prop,))
            except AssertionError:
                found[f"{prop}-{which}"] += 1

    draw()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=300, help="chips drawn per family (default 300)")
    parser.add_argument("--family", action="append", choices=[f.value for f in ChipFamily], help="only these")
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error("--draws: at least 1")
    cases = [(f, False) for f in BASES] + [(f, True) for f in SRAM_ONLY]
    total = 0
    for family, sram_only in cases:
        if args.family and family.value not in args.family:
            continue
        found = counts(family, sram_only, args.draws)
        draws = found.pop("draws", 0)
        total += sum(found.values())
        broken = ", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "none"
        print(f"{family.value}{' (SRAM-only)' if sram_only else ''}: {draws} draws; broken: {broken}", flush=True)
    print(f"in all: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
