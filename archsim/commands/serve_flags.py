"""The flags of `archsim serve` and their types: each bad value is one line naming the flag."""

from __future__ import annotations

import argparse

from archsim import limits
from archsim.commands import bounded_float, bounded_int, positive_int
from archsim.commands.output import add_output_flags, renamed
from archsim.commands.run import DEFAULT_HW, DEFAULT_WORKLOAD, add_set_flag
from archsim.engine_defaults import BLOCK_SIZE, GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS
from archsim.serving.options import (
    DEFAULT_ATTAINMENT,
    HOST_PROFILES,
    KEYWORDS,
    MAX_HOST_BYTES,
    MAX_SPEC_TOKENS,
    MIN_MEMORY_FRACTION,
    POLICIES,
    PREEMPTIONS,
)

DEFAULT_REQUESTS = 100
DEFAULT_RATE_PER_S = 1.0
# The flag of each serving option (by its `archsim.serve` keyword), to name it in an error.
FLAGS = {key: "--" + key.replace("_", "-") for key in KEYWORDS} | {
    "prefix_caching": "--no-prefix-caching",
    "swap_space_bytes": "--swap-space",
    "kv_offload_bytes": "--kv-offload",
    "prefill_hardware": "--prefill-hw",
    "decode_hardware": "--decode-hw",
    "slo_ttft_s": "--slo-ttft",
    "slo_tpot_s": "--slo-tpot",
}


def _fraction(flag: str, low: float = 0.0, zero: bool = False):
    """A share in (low, 1], or [0, 1] with `zero`."""
    number = bounded_float(flag, low, float("inf"), low_open=low == 0.0 and not zero)

    def parse(text: str) -> float:
        value = number(text)
        if value > 1:
            raise argparse.ArgumentTypeError(f"must be in {'[0' if zero else '(0'}, 1] (got {text})")
        return value

    parse.__name__ = flag
    return parse


def _quantity(flag: str, dim_name: str):
    """'200ms' or '0.2s' for seconds, '4GiB' for bytes; a bare number is refused (200 of what?)."""

    def parse(text: str) -> float:
        from archsim.units import Dim, parse_quantity

        try:
            float(text)
        except ValueError:
            pass
        else:
            what, example = ("a duration", "200ms or 0.2s") if dim_name == "SECONDS" else ("a size", "4GiB or 16GB")
            raise argparse.ArgumentTypeError(f"{what} needs its unit, e.g. {example} (got {text!r})")
        try:
            value = parse_quantity(text.replace(" ", ""), Dim[dim_name])
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than zero (got {text!r})")
        high = limits.MAX_SLO_S if dim_name == "SECONDS" else MAX_HOST_BYTES
        if value > high:
            bound = f"{limits.MAX_SLO_S:,.0f} s, a day" if dim_name == "SECONDS" else "1 PiB"
            raise argparse.ArgumentTypeError(f"must be at most {bound} (got {text!r})")
        return value

    parse.__name__ = flag
    return parse


def _length(flag: str):
    def parse(text: str):
        from archsim.serving.arrivals import parse_length

        try:
            return parse_length(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = flag
    return parse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve", help="simulate serving a request stream: continuous batching, latency percentiles, goodput"
    )
    g = p.add_argument_group("model, chips and layout")
    g.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    g.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload YAML or shipped name (default llama3_8b)")
    g.add_argument("--model", metavar="CONFIG.json", help="a Hugging Face config.json as the model")
    g.add_argument("--fusion", choices=["eager", "fused"], help="kernel fusion profile (default from workload)")
    add_set_flag(g)
    g.add_argument(
        "--tp",
        type=positive_int("--tp", limits.MAX_INSTANCES),
        help="tensor parallel chips per instance (default: all)",
    )
    g.add_argument(
        "--pp", type=positive_int("--pp", limits.MAX_LAYERS), help="pipeline stages per instance (default 1)"
    )
    g.add_argument(
        "--ep",
        type=positive_int("--ep", limits.MAX_EXPERTS),
        help="expert parallel ranks per instance, MoE (default 1)",
    )
    g.add_argument(
        "--instances",
        metavar="N",
        type=positive_int("--instances", limits.MAX_INSTANCES),
        default=1,
        help="data-parallel replicas, requests dealt round-robin (default 1)",
    )
    g.add_argument(
        "--host",
        choices=HOST_PROFILES,
        default="vllm",
        help="host and framework time per step: the engine's profile (default vllm; none: the bare GPU step)",
    )
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the on-disk op-result cache")
    _requests_flags(p.add_argument_group("requests"))
    _session_flags(p.add_argument_group("multi-turn sessions (turns arrive after the last one answered)"))
    _scheduler_flags(p.add_argument_group("scheduler and KV cache"))
    g = p.add_argument_group("speculative decoding (a draft or MTP heads turns it on)")
    g.add_argument("--draft", metavar="WORKLOAD", help="draft model: a workload YAML or shipped name")
    g.add_argument(
        "--mtp-layers", metavar="N", type=positive_int("--mtp-layers", limits.MAX_LAYERS), help="MTP heads of N layers"
    )
    g.add_argument(
        "--spec-tokens",
        metavar="K",
        type=positive_int("--spec-tokens", MAX_SPEC_TOKENS),
        default=3,
        help="tokens proposed (3)",
    )
    g.add_argument(
        "--spec-acceptance",
        metavar="A",
        type=_fraction("--spec-acceptance", zero=True),
        help="per-token acceptance rate, 0 to 1 (a trace's acceptance column overrides it per request)",
    )
    g = p.add_argument_group("service-level objectives")
    g.add_argument(
        "--slo-ttft", metavar="T", type=_quantity("--slo-ttft", "SECONDS"), help="time-to-first-token objective (200ms)"
    )
    g.add_argument(
        "--slo-tpot",
        metavar="T",
        type=_quantity("--slo-tpot", "SECONDS"),
        help="time-per-output-token objective (50ms)",
    )
    g.add_argument(
        "--attainment",
        metavar="F",
        type=_fraction("--attainment"),
        default=DEFAULT_ATTAINMENT,
        help=f"fraction of requests that must meet the SLOs for --find-capacity (default {DEFAULT_ATTAINMENT:g})",
    )
    g.add_argument(
        "--find-capacity",
        action="store_true",
        help="search the highest arrival rate meeting the SLOs, and where each breaks",
    )
    g = p.add_argument_group("disaggregated prefill and decode (any of these turns it on)")
    g.add_argument("--prefill-hw", metavar="HW", help="chip of the prefill instances (default --hw)")
    g.add_argument("--decode-hw", metavar="HW", help="chip of the decode instances (default --hw)")
    g.add_argument(
        "--prefill-instances",
        metavar="N",
        type=positive_int("--prefill-instances", limits.MAX_INSTANCES),
        help="prefill instances (1)",
    )
    g.add_argument(
        "--decode-instances",
        metavar="N",
        type=positive_int("--decode-instances", limits.MAX_INSTANCES),
        help="decode instances (1)",
    )
    g = p.add_argument_group("output")
    g.add_argument("--json", metavar="PATH", help="write metrics, per-instance figures and the config as JSON")
    g.add_argument("--plots", metavar="DIR", help="write latency CDFs, KV use and batch size over time (PNG)")
    g.add_argument("--trace-out", metavar="PATH", help="write a request timeline for Perfetto (Chrome trace JSON)")
    add_output_flags(g, quiet_help="no progress; print only the summary table")
    renamed(p, "--trace", "--requests-from FILE (a request trace to replay) or --trace-out PATH (a timeline)")
    renamed(p, "--timeline", "--trace-out PATH")


def _requests_flags(g) -> None:
    g.add_argument(
        "--requests-from",
        metavar="FILE",
        help="Azure trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens), CSV or JSONL of arrival_s,prompt_tokens,"
        "output_tokens (and optional max_tokens, prefix_id, prefix_tokens, acceptance), JSONL of sessions' turns "
        "(session, turn, new_tokens, output_tokens, start_s, think_s, tool_s), or a shipped trace",
    )
    g.add_argument(
        "--requests",
        metavar="N",
        type=positive_int("--requests", limits.MAX_REQUESTS),
        help=f"requests to generate (default {DEFAULT_REQUESTS}), or the first N of --requests-from",
    )
    g.add_argument(
        "--rate",
        metavar="R",
        type=bounded_float("--rate", *limits.RATE_RANGE_PER_S),
        help=f"mean arrivals per second (default {DEFAULT_RATE_PER_S:g}); with --requests-from, rescales it",
    )
    g.add_argument("--offline", action="store_true", help="every request at t=0: throughput at saturation")
    g.add_argument("--arrival", choices=["poisson", "gamma"], default="poisson", help="arrival process (poisson)")
    g.add_argument(
        "--cv",
        type=bounded_float("--cv", *limits.CV_RANGE),
        default=1.0,
        help="gamma gaps' coefficient of variation (1)",
    )
    g.add_argument(
        "--seed",
        metavar="N",
        type=bounded_int("--seed", 0, limits.MAX_SEED),
        default=0,
        help="seed of the generated stream (default 0)",
    )
    g.add_argument(
        "--prompt",
        metavar="SPEC",
        type=_length("--prompt"),
        help="prompt tokens: N, uniform:LO:HI, exponential:MEAN or lognormal:MEAN:CV (default: the scenario's)",
    )
    g.add_argument("--generate", metavar="SPEC", type=_length("--generate"), help="output tokens, as --prompt")
    g.add_argument(
        "--time-scale",
        metavar="S",
        type=bounded_float("--time-scale", *limits.TIME_SCALE_RANGE),
        help="multiply the arrival times of --requests-from by this (0.5 replays twice as fast)",
    )
    g.add_argument(
        "--shared-prefix",
        metavar="N",
        type=positive_int("--shared-prefix", limits.MAX_TOKENS),
        help="generated prompts open with an N-token template (one of --prefix-groups), for prefix caching",
    )
    g.add_argument(
        "--prefix-groups",
        metavar="G",
        type=positive_int("--prefix-groups", limits.MAX_REQUESTS),
        default=1,
        help="templates (default 1)",
    )
    g.add_argument(
        "--max-tokens",
        metavar="N",
        type=positive_int("--max-tokens", limits.MAX_TOKENS),
        help="max_tokens of a request stating none (default: what --max-model-len leaves after its prompt)",
    )


def _gap(flag: str):
    def parse(text: str):
        from archsim.serving.session_gen import parse_gap

        try:
            return parse_gap(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = flag
    return parse


SESSION_FLAGS = ("turns", "turn_prompt", "think_time", "tool_calls", "tool_time")


def _session_flags(g) -> None:
    g.add_argument(
        "--sessions",
        metavar="N",
        type=positive_int("--sessions", limits.MAX_REQUESTS),
        help="generate N sessions starting at --rate per second; each turn's prompt is the context so far "
        "plus new tokens (--prompt for the first turn), reused through the prefix cache",
    )
    g.add_argument("--turns", metavar="SPEC", type=_length("--turns"), help="turns per session, as --prompt (4)")
    g.add_argument(
        "--turn-prompt", metavar="SPEC", type=_length("--turn-prompt"), help="new tokens of a later turn (--prompt)"
    )
    g.add_argument(
        "--think-time",
        metavar="SPEC",
        type=_gap("--think-time"),
        help="between a turn's last token and the next turn: 5s, exponential:MEAN or uniform:LO:HI (5s)",
    )
    g.add_argument(
        "--tool-calls",
        metavar="F",
        type=_fraction("--tool-calls", zero=True),
        help="share of later turns that carry a tool's result, sent after --tool-time instead of a think time (0)",
    )
    g.add_argument("--tool-time", metavar="SPEC", type=_gap("--tool-time"), help="a tool call's duration (2s)")


def _scheduler_flags(g) -> None:
    g.add_argument(
        "--policy",
        choices=POLICIES,
        default="vllm",
        help="vllm: chunked prefill, preemption (default); sarathi: decodes first, small chunks; trtllm: "
        "max_tokens reserved, never preempts; orca: whole prompts, max_tokens reserved; static: fixed batches",
    )
    g.add_argument(
        "--max-batched-tokens",
        metavar="N",
        type=positive_int("--max-batched-tokens", limits.MAX_TOKENS),
        help="tokens per step (default 8192; 512 for sarathi)",
    )
    g.add_argument(
        "--max-num-seqs",
        metavar="N",
        type=positive_int("--max-num-seqs", limits.MAX_BATCH),
        default=MAX_NUM_SEQS,
        help="requests at once (256)",
    )
    g.add_argument(
        "--max-model-len",
        metavar="N",
        type=positive_int("--max-model-len", limits.MAX_TOKENS),
        help="context window served; longer requests are refused (default: the longest request)",
    )
    g.add_argument(
        "--block-size",
        metavar="N",
        type=positive_int("--block-size", limits.MAX_TOKENS),
        default=BLOCK_SIZE,
        help="tokens per KV block (16)",
    )
    g.add_argument(
        "--gpu-memory-utilization",
        metavar="F",
        type=_fraction("--gpu-memory-utilization", MIN_MEMORY_FRACTION),
        default=GPU_MEMORY_UTILIZATION,
        help="share of device memory the engine takes for weights, activations and KV (default 0.9)",
    )
    g.add_argument(
        "--kv-blocks", metavar="N", type=positive_int("--kv-blocks"), help="KV pool in blocks (overrides the sizing)"
    )
    g.add_argument(
        "--preemption",
        choices=PREEMPTIONS,
        default="recompute",
        help="vllm/sarathi: free and recompute a preempted request, or swap its KV to host memory",
    )
    g.add_argument(
        "--swap-space",
        metavar="SIZE",
        type=_quantity("--swap-space", "BYTES"),
        help="host memory per chip for swapped KV (default 4GiB)",
    )
    g.add_argument(
        "--kv-offload",
        metavar="SIZE",
        type=_quantity("--kv-offload", "BYTES"),
        help="host memory per chip keeping the prefix cache's evicted blocks, fetched back over the host link",
    )
    g.add_argument("--no-prefix-caching", action="store_true", help="turn the prefix cache off")
    g.add_argument(
        "--step-resolution",
        type=bounded_int("--step-resolution", 0, limits.MAX_STEP_RESOLUTION),
        default=2,
        metavar="N",
        help="simulated step shapes per doubling of the step's tokens, interpolated between "
        "(default 2; 0 simulates every shape: exact, slow)",
    )
