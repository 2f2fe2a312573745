"""What a GEMM mapping provides: how it forms work items from a tiling's output tiles, what the
autotuner's quick estimate makes of it, the waves its items run in, and the kernels it compiles
to. Each mapping is one file in archsim/compiler/mappings/ with one `GemmMappingRule`, keyed by
its `GemmMapping`; archsim/compiler/gemm.py calls the rule of a tiling's mapping.

The estimate (`Estimate`) is the autotuner's, over every tile shape of a GEMM at once (arrays):
compute per wave at the arrays' rate, the per-core Little's-law bandwidth and the L2 bandwidth,
the slowest of the three, and a core's fill and drain (`core_fill_drain_s`), which no compute
overlaps; the loads' and the L2's time end with the last step's compute (`last_step_s`).
Seconds throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from archsim.compiler.families import family_rule
from archsim.compiler.gemm_phases import GemmMapping, Phase, Tiling, gemm_phase, plain_waves
from archsim.compiler.output_stream import drained_cols
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.memory import l2_bandwidth
from archsim.units import ceil_div


def core_fill_drain_s(
    load_bytes: np.ndarray,
    load_rate: np.ndarray,
    latency_s: float,
    store_bytes: np.ndarray,
    store_inflight_bytes: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(fill, drain) seconds of a core's run that no compute of it overlaps. The fill: its first
    step's loads (`load_bytes`), one access latency L and then the bytes at its load rate, before
    its first compute. The drain: its last output tile (`store_bytes`), written after its last
    compute at the rate one core's posted writes drain (Little's law: `store_inflight_bytes`
    over L, as the engine's `store_rate_cap` to HBM):

        fill = L + load_bytes / load_rate        drain = store_bytes x L / store_inflight_bytes

    E.g. a 128 x 256 x 64 bf16 step (49,152 B) at 100 GB/s after 500 ns: 991.52 ns; its
    65,536 B output with 32 KiB in flight: 1,000 ns."""
    fill_s = latency_s + load_bytes / load_rate
    return fill_s, store_bytes * (latency_s / store_inflight_bytes)


def last_step_s(cycles_per_step: np.ndarray, clock_hz: float) -> np.ndarray:
    """Seconds of a core's last K step, computed after its operands are in, which no load
    overlaps: a kernel bound by its loads or by the L2 ends that long after their last byte
    (as `feed_s` in compiler/gemm.py ends main memory's feed). E.g. 2,048 cycles at 2 GHz:
    1.024 us."""
    return cycles_per_step / clock_hz


# FLOPs per compulsory byte under which a GEMM is held by main memory (decode's and short
# prefills' GEMMs: about M), which the estimate leaves out: its tilings tie on the L2 or per-core
# term, their order is the ties' order (compiler/gemm.py plays more of them)
LOW_INTENSITY = 256.0


def held_by_its_arrays_or_l2(op: Op) -> bool:
    """Whether the estimate's terms can hold the GEMM (`LOW_INTENSITY` FLOPs per compulsory byte
    or more), so that its last step ends it (`last_step_s`). Below, main memory holds it and
    ends it with its last byte, which a step of a few rows follows by less than the estimate
    tells tilings apart (at M = 64 a step is 64 x tk x tn MACs); there the last step is left out
    and the ties go, as the library's do, to less compute. E.g. 4096 x 1024 x 4096 bf16: 683
    FLOPs per byte, held; 64 x 4096 x 4096: 62, not."""
    return op.flops() >= LOW_INTENSITY * op.min_bytes()


@dataclass(frozen=True, eq=False)
class Estimate:
    """What the autotuner knows of each tile shape of `op` on `chip` (arrays over the shapes):
    output tiles over all groups, K steps per tile, cycles of one step on the arrays, bytes a
    core moves per step, the per-core load rate (bytes/s) a pipeline of `stages` buffers keeps
    up, the HBM access latency, and the rows and columns of a full tile within the output."""

    op: Op
    chip: Chip
    tiles: np.ndarray
    ksteps: np.ndarray
    cycles_per_step: np.ndarray
    moved_stage: np.ndarray
    rate: np.ndarray
    latency_s: float
    stages: np.ndarray
    em: np.ndarray
    en: np.ndarray

    def times(
        self, per_item: np.ndarray, items: np.ndarray, waves: np.ndarray, core_extra_s: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(estimated seconds, compute seconds) of `items` work items of `per_item` K steps each
        in `waves` waves: the slowest of a core's compute (waves x steps x cycles / clock) after
        its fill, its loads (each step's bytes at the core's rate, but no faster than one access
        latency shared by the loads in flight, plus a latency per item; `core_extra_s` more),
        each then with its drain (`core_fill_drain_s`: the fill is the loads' first), and the L2
        (every item's bytes at its bandwidth); after the last bytes the loads or the L2 bring,
        their core computes its last step (`last_step_s`), which nothing overlaps."""
        chip, lat = self.chip, self.latency_s
        compute_s = waves * per_item * self.cycles_per_step / chip.clock_hz
        item_bytes = per_item * self.moved_stage
        step_s, fill_s, drain_s, last_s, l2_bandwidth_bytes_per_s = self._per_shape
        core_s = waves * (per_item * step_s + lat)
        if core_extra_s is not None:
            core_s = core_s + core_extra_s
        l2_s = items * item_bytes / l2_bandwidth_bytes_per_s
        return np.maximum(np.maximum(compute_s + fill_s, core_s + last_s) + drain_s, l2_s + last_s), compute_s

    @cached_property
    def _per_shape(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | float, float]:
        """What `times` reads of each tile shape whatever its items and waves, worked out once
        per estimate (every mapping and split asks): a step's load seconds, the fill, the drain,
        the last step (`last_step_s`, 0 below `LOW_INTENSITY`), and the L2's bandwidth."""
        chip, lat = self.chip, self.latency_s
        step_s = np.maximum(self.moved_stage / self.rate, lat / np.maximum(1, self.stages - 1))
        out_bytes = self.em * drained_cols(self.en, chip, family_rule(chip).chains_folds(chip)) * self.op.c_dtype.bytes
        fill_s, drain_s = core_fill_drain_s(self.moved_stage, self.rate, lat, out_bytes, chip.core.max_inflight_bytes)
        last_s = last_step_s(self.cycles_per_step, chip.clock_hz) if held_by_its_arrays_or_l2(self.op) else 0.0
        return step_s, fill_s, drain_s, last_s, l2_bandwidth(chip)

    def sliced_times(self, split: int) -> tuple[np.ndarray, np.ndarray]:
        """`times` of one item per tile and K slice: tiles x split items of ceil(K steps /
        split) steps, dealt one per core in ceil(items / cores) waves."""
        items = self.tiles * split
        return self.times(ceil_div(self.ksteps, split), items, ceil_div(items, self.chip.cores))


class GemmMappingRule:
    """One GEMM mapping. A subclass sets `mapping` and `order` and gives `splits`, `estimate` and
    `phases`; `waves` and `label` default to a plain kernel's (items dealt one per core, wave
    after wave)."""

    mapping: GemmMapping
    order = 0  # the autotuner's tie order: among tilings of equal estimate, a lower order's first

    def splits(self, e: Estimate) -> tuple[int, ...]:
        """The K slices per tile the autotuner tries this mapping with (one candidate each; none:
        the mapping is not offered for this GEMM)."""
        raise NotImplementedError

    def estimate(self, e: Estimate, split: int) -> tuple[np.ndarray, np.ndarray]:
        """(estimated seconds, compute seconds) of every tile shape under this mapping with
        `split` K slices per tile; inf where the mapping does not apply."""
        raise NotImplementedError

    def phases(self, op: Op, chip: Chip, t: Tiling) -> list[Phase]:
        """The kernels the GEMM runs as under tiling `t` (of this mapping), in order."""
        raise NotImplementedError

    def waves(self, count: int, cores: int) -> tuple[np.ndarray, int]:
        """The wave each of `count` work items (in launch order) runs in, and how many of them
        (the first) run data-parallel, one per core a wave."""
        return plain_waves(count, cores), count

    def label(self, t: Tiling) -> str:
        """The name of the kernel under `t`, as traces and the op table show it."""
        return f"gemm {t.shape_label} split{t.split} {t.order_label}"

    def plain_phase(self, op: Op, chip: Chip, t: Tiling, limit_items: int | None = None) -> Phase:
        """The first `limit_items` work items of `t` (all by default) as one kernel in plain
        waves (`gemm_phase`), under this mapping's label."""
        rule = family_rule(chip)
        install = rule.weight_install_bytes_per_cycle(chip)
        return gemm_phase(op, chip, t, self.label(t), limit_items, install, rule.chains_folds(chip))
