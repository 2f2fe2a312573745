"""Main-memory models: a chip file's `hbm: {model: NAME, ...}` picks the file NAME.py of this
folder (`hbm`, today's model, when `model` is absent). A model's file holds one frozen record, its
`MODEL`: its parameters, each declared once (archsim/hardware/params.py), and its rules, the
methods below that turn them into what the event loop needs (hardware/memory.py `memory_params`
reads them once per phase into the kernels' `MemoryParams`). docs/memory_models.md adds one.

Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Protocol

DEFAULT = "hbm"  # the model of an `hbm` section that names none


class MainMemory(Protocol):
    """What the simulator asks of a chip's main memory, whichever model it is."""

    @property
    def capacity_bytes(self) -> int: ...  # what weights and KV cache may fill

    @property
    def latency_s(self) -> float: ...  # unloaded access latency seen by a core

    @property
    def queue_latency_s(self) -> float: ...  # latency queueing adds at half the peak bandwidth

    @property
    def interleave_bytes(self) -> int: ...  # address interleave across channels

    @property
    def channels(self) -> int: ...  # channels that serve requests in parallel

    @property
    def channel_bandwidth_bytes_per_s(self) -> float: ...  # one channel's peak

    @property
    def peak_bandwidth_bytes_per_s(self) -> float: ...  # all channels' peak

    @property
    def phys(self) -> int: ...  # memory PHYs on the die (its area: archsim/hardware/area.py)

    def efficiency(self, write_fraction: float) -> float:
        """Fraction of the peak a stream reaches with `write_fraction` of its bytes written."""
        ...


def names() -> tuple[str, ...]:
    """The models of this folder, by file name."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


@cache
def record(name: str) -> type:
    """The record class of model `name` (its file's `MODEL`)."""
    return importlib.import_module(f"{__name__}.{name}").MODEL
