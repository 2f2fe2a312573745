"""The setup a serving run simulates (`ServeSetup`, archsim/serving/setup.py), built from its
options (archsim/serving/options.py, checked there) and the loaded chips and models
(`ServeInputs`), and its part of the resolved configuration: what the config hash of a serving
run covers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism
from archsim.hardware import System
from archsim.serving.host import host_profile
from archsim.serving.options import LayoutOptions, ServeOptions, SpeculativeOptions
from archsim.serving.scheduler import DEFAULT_MAX_BATCHED_TOKENS, Policy, Preemption, SchedulerConfig
from archsim.serving.setup import SWAP_SPACE_BYTES, Disaggregation, ServeSetup, ServeSetupError
from archsim.serving.speculative import Speculation, mtp_module


class LoadedHardware(Protocol):
    """A validated hardware description (archsim.Hardware): its frozen system and its config."""

    @property
    def system(self) -> System: ...

    @property
    def config(self) -> dict: ...


class LoadedWorkload(Protocol):
    """A validated workload (archsim.Workload): its frozen workload and its config."""

    @property
    def workload(self) -> Workload: ...

    @property
    def config(self) -> dict: ...


@dataclass(frozen=True)
class ServeInputs:
    """The chips and models a setup names, loaded: the run's, and those of the disaggregated
    instances and the draft where the options give them."""

    hardware: LoadedHardware
    workload: LoadedWorkload
    prefill_hardware: LoadedHardware | None = None
    decode_hardware: LoadedHardware | None = None
    draft: LoadedWorkload | None = None


def build_setup(inputs: ServeInputs, options: ServeOptions) -> tuple[ServeSetup, dict[str, Any]]:
    """(ServeSetup, the serving options as resolved). ConfigError for a bad option
    (`ServeOptions.check`); ServeSetupError for a setup the chips or the models cannot serve."""
    options.check()
    o, system = options.scheduler, inputs.hardware.system
    pol, mode = Policy(o.policy), Preemption(o.preemption)
    sched = SchedulerConfig(
        pol, o.max_batched_tokens or DEFAULT_MAX_BATCHED_TOKENS[pol], o.max_num_seqs, o.block_size, mode,
        prefix_caching=o.prefix_caching,
    )  # fmt: skip
    par = _layout(system, options.layout)
    spec = _speculation(options.speculative, inputs)
    disagg = None
    if options.disaggregation is not None:
        p_n, d_n = options.disaggregation.prefill_instances, options.disaggregation.decode_instances
        p_hw, d_hw = inputs.prefill_hardware, inputs.decode_hardware
        disagg = Disaggregation(p_hw.system if p_hw else system, d_hw.system if d_hw else system, p_n, d_n)
    kv = options.kv_pool
    setup = ServeSetup(
        inputs.workload.workload,
        system,
        sched,
        gpu_memory_utilization=kv.gpu_memory_utilization,
        kv_blocks=kv.kv_blocks,
        instances=options.layout.instances,
        resolution=options.step_resolution,
        disaggregation=disagg,
        parallelism=par,
        host=host_profile(options.host),
        max_model_len=o.max_model_len,
        max_tokens=o.max_tokens,
        swap_space_bytes=SWAP_SPACE_BYTES if kv.swap_space_bytes is None else kv.swap_space_bytes,
        kv_offload_bytes=kv.kv_offload_bytes,
        speculation=spec,
    )
    return setup, resolved_serving(setup, options, inputs)


def resolved_serving(setup: ServeSetup, options: ServeOptions, inputs: ServeInputs) -> dict[str, Any]:
    """The serving part of a run's resolved configuration."""
    sched, par, spec, disagg = setup.scheduler, setup.parallelism, setup.speculation, setup.disaggregation
    serving: dict[str, Any] = {
        "policy": sched.policy.value,
        "max_batched_tokens": sched.max_batched_tokens,
        "max_num_seqs": sched.max_num_seqs,
        "block_size": sched.block_size,
        "gpu_memory_utilization": setup.gpu_memory_utilization,
        "kv_blocks": setup.kv_blocks,
        "instances": setup.instances,
        "step_resolution": setup.resolution,
        "layout": None if par is None else {"tp": par.tp, "pp": par.pp, "ep": par.ep},
        "host_profile": setup.host.name,
        "preemption": sched.preemption.value,
        "swap_space_bytes": setup.swap_space_bytes if sched.preemption is Preemption.SWAP else None,
        "kv_offload_bytes": setup.kv_offload_bytes,
        "prefix_caching": sched.prefix_caching,
        "max_model_len": setup.max_model_len,
        "max_tokens": setup.max_tokens,
        "speculation": None,
        "disaggregation": None,
    }
    if spec is not None:
        draft = inputs.draft
        mtp = options.speculative.mtp_layers if options.speculative is not None else None
        serving["speculation"] = {
            "draft": draft.config if draft is not None else None,
            "mtp_layers": mtp,
            "tokens": spec.tokens,
            "acceptance": spec.acceptance,
        }
    if disagg is not None:
        p_hw, d_hw = inputs.prefill_hardware, inputs.decode_hardware
        serving["disaggregation"] = {
            "prefill_instances": disagg.prefill_instances,
            "decode_instances": disagg.decode_instances,
            "prefill_chip": disagg.prefill_system.chip.name,
            "decode_chip": disagg.decode_system.chip.name,
        }
        serving["prefill_hardware"] = p_hw.config if p_hw else None
        serving["decode_hardware"] = d_hw.config if d_hw else None
    return serving


def _layout(system: System, lay: LayoutOptions) -> Parallelism | None:
    """The layout asked for (None: tensor parallel over all the system's chips)."""
    if not lay.given:
        return None
    par = Parallelism(lay.tp or 1, lay.pp or 1, lay.ep or 1)
    if par.chips > system.chips:
        raise ServeSetupError(
            f"{par.label()} needs {par.chips} chips; {system.chip.name} x{system.chips} has {system.chips}"
            + ("" if system.chips > 1 else "; use a multi-chip system such as h200x8")
        )
    return par


def _speculation(spec: SpeculativeOptions | None, inputs: ServeInputs) -> Speculation | None:
    """The draft (a model of the same vocabulary, or MTP heads on the target) and its rate."""
    if spec is None:
        return None
    assert spec.acceptance is not None  # ServeOptions.check
    target, draft = inputs.workload.workload, inputs.draft
    if draft is not None:
        if draft.workload.model.vocab != target.model.vocab:
            raise ServeSetupError(
                f"the draft {draft.workload.model.name} has a vocabulary of {draft.workload.model.vocab:,}, "
                f"the target {target.model.vocab:,}: a draft proposes the target's tokens"
            )
        return Speculation(draft.workload, spec.tokens, spec.acceptance)
    assert spec.mtp_layers is not None  # ServeOptions.check: a draft or MTP layers
    return Speculation(mtp_module(target, spec.mtp_layers), spec.tokens, spec.acceptance, mtp=True)
