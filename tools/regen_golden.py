"""Regenerate the golden results that tests/test_golden.py compares against.

Run this only when a change to the model is meant to change its results, and say so in the
commit: `python3 tools/regen_golden.py`. Each golden file is the headline numbers and per-op
times of a short run of a reference chip and model (see GOLDEN in tests/test_golden.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_golden import GOLDEN, golden_record  # noqa: E402


def main() -> None:
    for name, args in GOLDEN.items():
        path = ROOT / "tests" / "golden" / f"{name}.json"
        path.write_text(json.dumps(golden_record(*args), indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
