"""A serving setup from the options of `archsim serve` and `archsim.serve`, checked, and its part
of the resolved configuration (what the config hash of a serving run covers)."""

from __future__ import annotations

from archsim.graph.parallel import Parallelism


def _layout(system, tp: int | None, pp: int | None, ep: int | None) -> Parallelism | None:
    """The layout asked for (None: tensor parallel over all the system's chips)."""
    from archsim.serving.simulate import ServeSetupError

    if tp is None and pp is None and ep is None:
        return None
    par = Parallelism(tp or 1, pp or 1, ep or 1)
    if par.chips > system.chips:
        raise ServeSetupError(
            f"{par.label()} needs {par.chips} chips; {system.chip.name} x{system.chips} has {system.chips}"
            + ("" if system.chips > 1 else "; use a multi-chip system such as h200x8")
        )
    return par


def _speculation(workload, draft, mtp_layers: int | None, tokens: int, acceptance: float | None):
    from archsim.serving.simulate import ServeSetupError
    from archsim.serving.speculative import Speculation, mtp_module

    if draft is None and mtp_layers is None:
        return None
    if draft is not None and mtp_layers is not None:
        raise ServeSetupError("give a draft model or MTP heads for speculative decoding, not both")
    if tokens < 1:
        raise ServeSetupError(f"speculative tokens: must be 1 or more (got {tokens})")
    if acceptance is None or not 0.0 <= acceptance <= 1.0:
        raise ServeSetupError(f"speculative decoding needs an acceptance rate from 0 to 1 (got {acceptance})")
    if draft is not None:
        if draft.workload.model.vocab != workload.workload.model.vocab:
            raise ServeSetupError(
                f"the draft {draft.workload.model.name} has a vocabulary of {draft.workload.model.vocab:,}, "
                f"the target {workload.workload.model.vocab:,}: a draft proposes the target's tokens"
            )
        return Speculation(draft.workload, tokens, acceptance)
    if mtp_layers < 1:
        raise ServeSetupError(f"MTP layers: must be 1 or more (got {mtp_layers})")
    return Speculation(mtp_module(workload.workload, mtp_layers), tokens, acceptance, mtp=True)


def build_setup(
    hardware,
    workload,
    *,
    policy: str,
    max_batched_tokens: int | None,
    max_num_seqs: int,
    block_size: int,
    gpu_memory_utilization: float,
    kv_blocks: int | None,
    instances: int,
    step_resolution: int,
    disaggregation,
    layout: tuple[int | None, int | None, int | None],
    host: str,
    preemption: str,
    swap_space_bytes: float | None,
    kv_offload_bytes: float,
    prefix_caching: bool,
    max_model_len: int | None,
    max_tokens: int | None,
    draft,
    mtp_layers: int | None,
    spec_tokens: int,
    spec_acceptance: float | None,
):
    """(ServeSetup, the serving options as resolved); ServeSetupError for a setup that cannot be."""
    from archsim.serving.host import host_profile
    from archsim.serving.scheduler import DEFAULT_MAX_BATCHED_TOKENS, Policy, Preemption, SchedulerConfig
    from archsim.serving.simulate import SWAP_SPACE_BYTES, Disaggregation, ServeSetup, ServeSetupError

    try:
        pol, mode, profile = Policy(policy), Preemption(preemption), host_profile(host)
    except ValueError as err:
        raise ServeSetupError(str(err)) from None
    if step_resolution < 0:
        raise ServeSetupError(f"step resolution: must be 0 or more (got {step_resolution})")
    if mode is Preemption.SWAP and pol is not Policy.VLLM and pol is not Policy.SARATHI:
        raise ServeSetupError(f"the {pol.value} policy never preempts: swap preemption is for vllm and sarathi")
    for name, v in (("max model length", max_model_len), ("max tokens", max_tokens)):
        if v is not None and v < 1:
            raise ServeSetupError(f"{name}: must be 1 or more (got {v})")
    sched = SchedulerConfig(
        pol,
        max_batched_tokens or DEFAULT_MAX_BATCHED_TOKENS[pol],
        max_num_seqs,
        block_size,
        mode,
        prefix_caching=prefix_caching,
    )
    par = _layout(hardware.system, *layout)
    spec = _speculation(workload, draft, mtp_layers, spec_tokens, spec_acceptance)
    if spec is not None and pol.reserves and pol is not Policy.TRTLLM:
        raise ServeSetupError(f"speculative decoding needs a paged policy (vllm, sarathi, trtllm), not {pol.value}")
    disagg, extra = None, {}
    if disaggregation is not None:
        p_hw, d_hw, p_n, d_n = disaggregation
        if pol is Policy.STATIC:
            raise ServeSetupError("static batching cannot be disaggregated; use the vllm, sarathi or orca policy")
        if instances != 1:
            raise ServeSetupError("instances are for co-located serving; give prefill and decode instances instead")
        if par is not None:
            raise ServeSetupError(
                "--tp/--pp/--ep lay out co-located instances; a disaggregated one is TP over its chips"
            )
        disagg = Disaggregation(
            p_hw.system if p_hw else hardware.system, d_hw.system if d_hw else hardware.system, p_n, d_n
        )
        extra = {"prefill_hardware": p_hw.config if p_hw else None, "decode_hardware": d_hw.config if d_hw else None}
    setup = ServeSetup(
        workload.workload,
        hardware.system,
        sched,
        gpu_memory_utilization,
        kv_blocks,
        instances,
        step_resolution,
        disagg,
        par,
        profile,
        max_model_len,
        max_tokens,
        SWAP_SPACE_BYTES if swap_space_bytes is None else swap_space_bytes,
        kv_offload_bytes,
        spec,
    )
    serving = {
        "policy": pol.value,
        "max_batched_tokens": sched.max_batched_tokens,
        "max_num_seqs": sched.max_num_seqs,
        "block_size": sched.block_size,
        "gpu_memory_utilization": gpu_memory_utilization,
        "kv_blocks": kv_blocks,
        "instances": instances,
        "step_resolution": step_resolution,
        "layout": None if par is None else {"tp": par.tp, "pp": par.pp, "ep": par.ep},
        "host_profile": profile.name,
        "preemption": mode.value,
        "swap_space_bytes": setup.swap_space_bytes if mode is Preemption.SWAP else None,
        "kv_offload_bytes": kv_offload_bytes,
        "prefix_caching": prefix_caching,
        "max_model_len": max_model_len,
        "max_tokens": max_tokens,
        "speculation": None
        if spec is None
        else {
            "draft": draft.config if draft is not None else None,
            "mtp_layers": mtp_layers,
            "tokens": spec.tokens,
            "acceptance": spec.acceptance,
        },
        "disaggregation": None
        if disagg is None
        else {
            "prefill_instances": disagg.prefill_instances,
            "decode_instances": disagg.decode_instances,
            "prefill_chip": disagg.prefill_system.chip.name,
            "decode_chip": disagg.decode_system.chip.name,
        },
    }
    if not (0 < gpu_memory_utilization <= 1):
        raise ServeSetupError(f"gpu memory utilization: must be in (0, 1] (got {gpu_memory_utilization})")
    return setup, {**serving, **extra}
