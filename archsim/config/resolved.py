"""The resolved configuration of a result: everything it depends on, built once, hashed once.

A result (a run, a comparison row, a serving run, a sweep point, one op) depends on the hardware
file and the workload as resolved (canonical units, defaults filled in) and on the options of the
command that produced it (KV sampling stride, parallel layout, scheduler, request stream...).
`ResolvedConfig` holds all three; its `hash` names the result in `--json` output and keys sweep
points, so two runs print the same hash exactly when they compute the same thing. A file that
extends another (config/extends.py) is resolved as merged: a file that extends `h200` and
overrides nothing has h200's configuration and hash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


def config_hash(resolved: dict) -> str:
    """Stable short hash of a resolved configuration (sorted-key JSON, SHA-256)."""
    text = json.dumps(resolved, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class ResolvedConfig:
    """Hardware and workload configurations as resolved, and the options that change the result."""

    hardware: dict[str, Any]
    workload: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hardware": self.hardware}
        if self.workload is not None:
            out["workload"] = self.workload
        out["options"] = self.options
        return out

    @cached_property
    def hash(self) -> str:
        return config_hash(self.as_dict())

    def with_options(self, **options: Any) -> ResolvedConfig:
        """The same configuration with more (or replaced) options."""
        return ResolvedConfig(self.hardware, self.workload, {**self.options, **options})


def run_options(kv_stride: int, tp: int = 1, pp: int = 1, ep: int = 1) -> dict[str, Any]:
    """The options of a generation run (`archsim run`, `compare`, a sweep point): the decode KV
    sampling stride and the parallel layout."""
    return {"kv_stride": kv_stride, "parallelism": {"tp": tp, "pp": pp, "ep": ep}}
