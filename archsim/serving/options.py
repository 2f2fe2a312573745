"""The options of a serving run, as `archsim serve` and `archsim.serve` take them: one frozen
record, `ServeOptions`, of the scheduler's (`SchedulerOptions`), the KV pool's (`KvPoolOptions`),
the instances' layout (`LayoutOptions`), speculative decoding's (`SpeculativeOptions`),
disaggregation's (`DisaggregationOptions`) and the objectives' (`SloOptions`). Built once where
the user gives them (the command's flags; the API's keywords, `ServeOptions.from_keywords`) and
checked in one place, `ServeOptions.check`: one ConfigError naming each bad option by its
keyword. Seconds and bytes. The setup built from them: archsim/serving/build.py.

Imports nothing heavy, so the command line names the bounds at start-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from numbers import Integral, Real
from typing import Any

from archsim import limits
from archsim.engine_defaults import BLOCK_SIZE, GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS
from archsim.errors import ConfigError, Problem, quote

POLICIES = ("vllm", "sarathi", "trtllm", "orca", "static")  # archsim/serving/scheduler.py
PREEMPTIONS = ("recompute", "swap")
HOST_PROFILES = ("vllm", "vllm_async", "sglang", "trtllm", "none")  # archsim/serving/host.py
MIN_MEMORY_FRACTION = 1e-3  # of the device memory: less is a typo, not a setting
MAX_SPEC_TOKENS = 64  # tokens proposed per verify (engines propose a handful)
MAX_HOST_BYTES = 1 << 50  # host memory per chip for swap or offload (a PiB: a unit mistake beyond)
DEFAULT_ATTAINMENT = 0.9  # share of requests that must meet the SLOs (DistServe's 90%)


@dataclass(frozen=True)
class SchedulerOptions:
    """The scheduler and its limits (archsim/serving/scheduler.py). Tokens."""

    policy: str = "vllm"
    max_batched_tokens: int | None = None  # None: the policy's default
    max_num_seqs: int = MAX_NUM_SEQS
    block_size: int = BLOCK_SIZE
    preemption: str = "recompute"
    prefix_caching: bool = True
    max_model_len: int | None = None  # None: the longest request
    max_tokens: int | None = None  # of a request stating none; None: what max_model_len leaves


@dataclass(frozen=True)
class KvPoolOptions:
    """The KV pool and the host memory behind it, per chip (archsim/serving/kvpool.py). Bytes."""

    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    kv_blocks: int | None = None  # None: sized from the memory left
    swap_space_bytes: float | None = None  # None: vLLM's 4 GiB
    kv_offload_bytes: float = 0.0


@dataclass(frozen=True)
class LayoutOptions:
    """Each instance's layout over the system's chips (None: tensor parallel over all), and the
    co-located replicas."""

    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    instances: int = 1

    @property
    def given(self) -> bool:
        return self.tp is not None or self.pp is not None or self.ep is not None


@dataclass(frozen=True)
class SpeculativeOptions:
    """A draft model (a workload: a shipped name, a file or a loaded one) or MTP heads of
    `mtp_layers` layers proposing `tokens` tokens a verify, each accepted at rate `acceptance`."""

    draft: Any = None
    mtp_layers: int | None = None
    tokens: int = 3
    acceptance: float | None = None


@dataclass(frozen=True)
class DisaggregationOptions:
    """Prefill and decode instances, each on its chip (None: the run's hardware; a shipped name,
    a file or a loaded one)."""

    prefill_hardware: Any = None
    decode_hardware: Any = None
    prefill_instances: int = 1
    decode_instances: int = 1


@dataclass(frozen=True)
class SloOptions:
    """The latency objectives (seconds; None: not required) and the share of requests that must
    meet them."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    attainment: float = DEFAULT_ATTAINMENT


# The keywords of `archsim.serve`: (the sub-record, its field); "" for ServeOptions's own.
KEYWORDS: dict[str, tuple[str, str]] = {
    **{k: ("scheduler", k) for k in (f.name for f in fields(SchedulerOptions))},
    **{k: ("kv_pool", k) for k in (f.name for f in fields(KvPoolOptions))},
    **{k: ("layout", k) for k in (f.name for f in fields(LayoutOptions))},
    "host": ("", "host"),
    "step_resolution": ("", "step_resolution"),
    "draft": ("speculative", "draft"),
    "mtp_layers": ("speculative", "mtp_layers"),
    "spec_tokens": ("speculative", "tokens"),
    "spec_acceptance": ("speculative", "acceptance"),
    **{k: ("disaggregation", k) for k in (f.name for f in fields(DisaggregationOptions))},
    "slo_ttft_s": ("slo", "ttft_s"),
    "slo_tpot_s": ("slo", "tpot_s"),
    "attainment": ("slo", "attainment"),
}
_GROUPS = {
    "scheduler": SchedulerOptions,
    "kv_pool": KvPoolOptions,
    "layout": LayoutOptions,
    "speculative": SpeculativeOptions,
    "disaggregation": DisaggregationOptions,
    "slo": SloOptions,
}


@dataclass(frozen=True)
class ServeOptions:
    """Every option of a serving run. `speculative` and `disaggregation` are None when off."""

    scheduler: SchedulerOptions = field(default_factory=SchedulerOptions)
    kv_pool: KvPoolOptions = field(default_factory=KvPoolOptions)
    layout: LayoutOptions = field(default_factory=LayoutOptions)
    host: str = "vllm"  # the host profile (archsim/serving/host.py)
    step_resolution: int = 2  # simulated step shapes per doubling of the step's tokens (0: all)
    speculative: SpeculativeOptions | None = None
    disaggregation: DisaggregationOptions | None = None
    slo: SloOptions = field(default_factory=SloOptions)

    @classmethod
    def from_keywords(cls, **keywords: Any) -> ServeOptions:
        """The options from `archsim.serve`'s keywords (`policy="sarathi"`, `spec_tokens=4`, ...);
        speculative when a draft or MTP layers are given, disaggregated when any prefill or
        decode keyword is. TypeError for a keyword it does not take."""
        given: dict[str, dict[str, Any]] = {name: {} for name in ("", *_GROUPS)}
        for key, value in keywords.items():
            if key not in KEYWORDS:
                raise TypeError(f"serve() got an unexpected keyword argument {key!r}")
            group, name = KEYWORDS[key]
            if value is not None or group in ("", "scheduler", "kv_pool", "layout", "slo"):
                given[group][name] = value
        spec, disagg = given["speculative"], given["disaggregation"]
        on = "draft" in spec or "mtp_layers" in spec
        return cls(
            **given[""],
            **{g: _GROUPS[g](**given[g]) for g in ("scheduler", "kv_pool", "layout", "slo")},
            speculative=SpeculativeOptions(**spec) if on else None,
            disaggregation=DisaggregationOptions(**disagg) if disagg else None,
        )

    def check(self, where: str = "archsim.serve") -> None:
        """ConfigError listing every option outside its bounds or at odds with another, each
        `where: keyword: why`."""
        found = self.problems()
        if found:
            raise ConfigError([Problem(where, None, key, why) for key, why in found])

    def problems(self) -> list[tuple[str, str]]:
        """(keyword, why) of each bad option, in keyword order."""
        out = [*_scheduler_problems(self.scheduler), *_kv_pool_problems(self.kv_pool)]
        out += _layout_problems(self.layout)
        out += _choice("host", self.host, HOST_PROFILES)
        out += _whole("step_resolution", self.step_resolution, 0, limits.MAX_STEP_RESOLUTION)
        if self.speculative is not None:
            out += _speculative_problems(self.speculative, self.scheduler.policy)
        if self.disaggregation is not None:
            out += _disaggregation_problems(self.disaggregation, self.scheduler.policy, self.layout)
        out += _slo_problems(self.slo)
        return out


def _scheduler_problems(s: SchedulerOptions) -> list[tuple[str, str]]:
    out = _choice("policy", s.policy, POLICIES) + _choice("preemption", s.preemption, PREEMPTIONS)
    out += _whole("max_batched_tokens", s.max_batched_tokens, 1, limits.MAX_TOKENS, optional=True)
    out += _whole("max_num_seqs", s.max_num_seqs, 1, limits.MAX_BATCH)
    out += _whole("block_size", s.block_size, 1, limits.MAX_TOKENS)
    if not isinstance(s.prefix_caching, bool):
        out.append(("prefix_caching", f"must be True or False (got {quote(s.prefix_caching)})"))
    out += _whole("max_model_len", s.max_model_len, 1, limits.MAX_TOKENS, optional=True)
    out += _whole("max_tokens", s.max_tokens, 1, limits.MAX_TOKENS, optional=True)
    if s.preemption == "swap" and s.policy in ("trtllm", "orca", "static"):
        out.append(("preemption", f"the {s.policy} policy never preempts: swap preemption is for vllm and sarathi"))
    return out


def _kv_pool_problems(k: KvPoolOptions) -> list[tuple[str, str]]:
    share = k.gpu_memory_utilization
    out = _number("gpu_memory_utilization", share, 0.0, 1.0, low_open=True)
    if not out and share < MIN_MEMORY_FRACTION:
        out = [("gpu_memory_utilization", f"must be at least {MIN_MEMORY_FRACTION:g} of the memory (got {share})")]
    out += _whole("kv_blocks", k.kv_blocks, 1, limits.MAX_COUNT, optional=True)
    out += _number("swap_space_bytes", k.swap_space_bytes, 0.0, MAX_HOST_BYTES, optional=True, low_open=True)
    out += _number("kv_offload_bytes", k.kv_offload_bytes, 0.0, MAX_HOST_BYTES)
    return out


def _layout_problems(lay: LayoutOptions) -> list[tuple[str, str]]:
    out = _whole("tp", lay.tp, 1, limits.MAX_INSTANCES, optional=True)
    out += _whole("pp", lay.pp, 1, limits.MAX_LAYERS, optional=True)
    out += _whole("ep", lay.ep, 1, limits.MAX_EXPERTS, optional=True)
    return out + _whole("instances", lay.instances, 1, limits.MAX_INSTANCES)


def _speculative_problems(spec: SpeculativeOptions, policy: str) -> list[tuple[str, str]]:
    out = []
    if spec.draft is not None and spec.mtp_layers is not None:
        out.append(("mtp_layers", "give a draft model or MTP heads for speculative decoding, not both"))
    out += _whole("mtp_layers", spec.mtp_layers, 1, limits.MAX_LAYERS, optional=True)
    out += _whole("spec_tokens", spec.tokens, 1, MAX_SPEC_TOKENS)
    if spec.acceptance is None or _number("spec_acceptance", spec.acceptance, 0.0, 1.0):
        got = "none" if spec.acceptance is None else quote(spec.acceptance)
        out.append(("spec_acceptance", f"speculative decoding needs an acceptance rate from 0 to 1 (got {got})"))
    if policy in ("orca", "static"):
        out.append(("policy", f"speculative decoding needs a paged policy (vllm, sarathi, trtllm), not {policy}"))
    return out


def _disaggregation_problems(d: DisaggregationOptions, policy: str, lay: LayoutOptions) -> list[tuple[str, str]]:
    out = []
    if policy == "static":
        out.append(("policy", "static batching cannot be disaggregated; use the vllm, sarathi or orca policy"))
    if lay.instances != 1:
        out.append(("instances", "instances are for co-located serving; give prefill and decode instances instead"))
    if lay.given:
        key = next(k for k in ("tp", "pp", "ep") if getattr(lay, k) is not None)
        out.append((key, "tp, pp and ep lay out co-located instances; a disaggregated one is TP over its chips"))
    out += _whole("prefill_instances", d.prefill_instances, 1, limits.MAX_INSTANCES)
    return out + _whole("decode_instances", d.decode_instances, 1, limits.MAX_INSTANCES)


def _slo_problems(slo: SloOptions) -> list[tuple[str, str]]:
    out = _number("slo_ttft_s", slo.ttft_s, 0.0, limits.MAX_SLO_S, optional=True, low_open=True)
    out += _number("slo_tpot_s", slo.tpot_s, 0.0, limits.MAX_SLO_S, optional=True, low_open=True)
    return out + _number("attainment", slo.attainment, 0.0, 1.0, low_open=True)


def _choice(key: str, value: object, known: tuple[str, ...]) -> list[tuple[str, str]]:
    if isinstance(value, str) and value in known:
        return []
    return [(key, f"must be one of {', '.join(known)} (got {quote(value)})")]


def _whole(key: str, value: object, low: int, high: int, optional: bool = False) -> list[tuple[str, str]]:
    if value is None and optional:
        return []
    if isinstance(value, bool) or not isinstance(value, Integral):
        return [(key, f"must be a whole number (got {quote(value)})")]
    if not low <= int(value) <= high:
        return [(key, f"must be {low:,} to {high:,} (got {value})")]
    return []


def _number(
    key: str, value: object, low: float, high: float, optional: bool = False, low_open: bool = False
) -> list[tuple[str, str]]:
    """A finite number in [low, high], or (low, high] with `low_open`."""
    if value is None and optional:
        return []
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        return [(key, f"must be a number (got {quote(value)})")]
    v = float(value)
    if v > high or v < low or (low_open and v == low):
        return [(key, f"must be in {'(' if low_open else '['}{low:g}, {high:g}] (got {quote(value)})")]
    return []
