"""Where a chip file's numbers come from, read from its header comment: its sources and how far
to trust it.

Confidence, from the file's own words and tags:
  calibrated     fitted to measurements of the chip (its header says it is calibrated against a set)
  derived        a calibrated chip changed by datasheet values only (its header says so)
  hypothetical   a design that does not exist (its header says so)
  reference      a configuration for checking a formula (SCALE-Sim parity)
  datasheet      sourced values, with the share of valued lines tagged [EST]
A multi-chip system takes its chip file's confidence and sources: the shipped single-chip file
whose chip it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Provenance:
    confidence: str  # calibrated, derived, hypothetical, reference or datasheet
    estimated_share: float  # valued lines tagged [EST] (or "estimate"), of all valued lines
    sources: str  # the header's "Sources:" sentence, or ""


def header_comment(text: str) -> str:
    """The comment lines before the first key, joined as one paragraph."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return " ".join(lines)


def estimated_share(text: str) -> float:
    """Share of the lines giving a value (after the header) that tag it [EST] or an estimate."""
    valued = [ln for ln in text.splitlines() if re.match(r"^\s*[a-z_]+:\s*\S", ln) and not ln.lstrip().startswith("#")]
    estimated = [ln for ln in valued if "[EST" in ln or "estimate" in ln]
    return len(estimated) / len(valued) if valued else 0.0


def provenance(path: str | Path) -> Provenance:
    text = Path(path).read_text()
    head = header_comment(text)
    lower = head.lower()
    sources = head[head.index("Sources:") + len("Sources:") :].strip() if "Sources:" in head else ""
    share = estimated_share(text)
    if "calibrated against" in lower:
        kind = "calibrated"
    elif "derived from" in lower or "never fitted: both the chip and the fabric are derived" in lower:
        kind = "derived"
    elif "hypothetical" in lower:
        kind = "hypothetical"
    elif "scale-sim" in lower:
        kind = "reference"
    else:
        kind = "datasheet"
    return Provenance(kind, share, sources)


def label(p: Provenance) -> str:
    """A table's word for it: `datasheet 40% est.` for the sourced presets."""
    return f"datasheet {100 * p.estimated_share:.0f}% est." if p.confidence == "datasheet" else p.confidence
