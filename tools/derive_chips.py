"""Write the chip files that follow from a calibrated one by datasheet changes only.

A derived chip (another SKU of the same die) changes nothing but what its datasheet states:
memory stacks, rate and capacity, L2 capacity, power limit, and so what of the die it leaves off
(`area.harvested`). Everything else, the calibrated
parameters included, is its base chip's. (A multi-chip system file extends its chip's file, so
it follows by itself.) Run after a recalibration so that every file follows:

    python3 tools/derive_chips.py            # rewrites the files below from their bases

tests/test_configs.py checks that each derived file differs from its base in these keys only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HW = ROOT / "hw_configs"

# derived file: (base file, header comment, {"section.key" or "key": replacement line})
DERIVED: dict[str, tuple[str, str, dict[str, str]]] = {
    "h100": (
        "h200",
        """# NVIDIA H100 SXM5 80GB: the H200's GH100 die and SMs with five HBM3 stacks. Derived from h200.yaml
# by datasheet changes only (tools/derive_chips.py): HBM3 stacks, rate and capacity, L2 capacity,
# power limit (and the parts of the die it leaves off); every other value, the calibrated ones
# included, is the H200 model's. Never fitted.
# Sources: NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022) [WP]; NVIDIA H100 datasheet
# (2023) [DS]; capacity as an 80 GB H100 reports it [DQ]; tags of the other lines are h200.yaml's.
""",
        {
            "name": "name: NVIDIA H100 SXM 80GB",
            "description": "description: 132 SMs x 4 tensor cores, 50 MiB L2, five HBM3 stacks at 3.35 TB/s, 700 W",
            "l2.capacity": "  capacity: 50 MiB                # L2 enabled on the H100 SXM5 [WP]",
            "hbm.stacks": "  stacks: 5                       # five active HBM3 stacks [DS]",
            "hbm.data_rate": "  data_rate: 5.234 Gbps           # per pin: 5 x 1024 bit x 5.234 Gb/s / 8 = 3.35 TB/s [DS]",
            "hbm.capacity": "  capacity: 81559 MiB             # as an 80 GB H100 reports it [DQ]",
            "power.limit": "  limit: 700 W                    # maximum board power (H100 SXM5) [DS]",
            "area.harvested": "  harvested: {cores: 12, l2: 10 MiB, hbm_stacks: 1}   # of the GH100 die's 144 SMs, 60 MB of L2 and six HBM3 PHYs, the H100 SXM5 enables 132, 50 MB and five [WP]",
        },
    ),
    "a100": (
        "a100_pcie",
        """# NVIDIA A100 SXM4 80GB: the A100 PCIe's GA100 die with the SXM4 module's memory rate and power.
# Derived from a100_pcie.yaml by datasheet changes only (tools/derive_chips.py): HBM2e rate, the
# power limit and the module's measured idle floor; every other value, the calibrated ones
# included, is the A100 PCIe model's. Never fitted. Sources: NVIDIA A100 80GB datasheet (2021)
# [DS]; tags of the other lines are a100_pcie.yaml's.
""",
        {
            "name": "name: NVIDIA A100 SXM4 80GB",
            "description": "description: 108 SMs x 4 tensor cores, 40 MiB L2, five HBM2e stacks at 2.04 TB/s, 400 W",
            "hbm.data_rate": "  data_rate: 3.186 Gbps           # per pin: 5 x 1024 bit x 3.186 Gb/s / 8 = 2.039 TB/s [DS]",
            "power.limit": "  limit: 400 W                    # maximum board power (SXM4) [DS]",
            "power.static": "  static: 57.9 W                  # with idle_w: 59.7 W idle at 210 MHz, an A100-SXM4 module's own board floor (archsim/data/power_calibration.json a100_idle_210mhz) [DQ]",
        },
    ),
}


def body(text: str) -> str:
    """The file from its `name:` line on (without the header comment)."""
    return text[text.index("\nname:") + 1 :]


def replace_key(text: str, dotted: str, line: str) -> str:
    """`text` with the line of `dotted` (a top-level key, or section.key) replaced by `line`."""
    lines = text.split("\n")
    parts = dotted.split(".")
    start = 0
    if len(parts) == 2:
        start = next(i for i, ln in enumerate(lines) if re.match(rf"^{parts[0]}:", ln))
    pattern = re.compile(rf"^{'  ' if len(parts) == 2 else ''}{parts[-1]}:")
    for i in range(start, len(lines)):
        if pattern.match(lines[i]):
            lines[i] = line
            return "\n".join(lines)
        if i > start and len(parts) == 2 and re.match(r"^\S", lines[i]):
            break
    raise KeyError(f"{dotted} not found")


def derived_text(name: str) -> str:
    base, header, changes = DERIVED[name]
    text = body((HW / f"{base}.yaml").read_text())
    for dotted, line in changes.items():
        text = replace_key(text, dotted, line)
    return header + text


def main() -> None:
    for name in DERIVED:
        (HW / f"{name}.yaml").write_text(derived_text(name))
        print(f"wrote hw_configs/{name}.yaml")


if __name__ == "__main__":
    main()
