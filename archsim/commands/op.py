"""`archsim op`: simulate one op (GEMM, attention, vector op, copy) on a chip."""

from __future__ import annotations

from archsim.commands import UsageError, check_outputs, positive_int, shown
from archsim.commands.intervals import add_interval_flag, check_interval, interval_text
from archsim.commands.output import add_output_flags, console, emit, notes, progress, renamed
from archsim.commands.run import DEFAULT_HW, add_set_flag
from archsim.dtypes import DTYPE_NAMES
from archsim.graph.ops import VectorOp

VECTOR_OPS = [v.value for v in VectorOp]


def add_parser(sub) -> None:
    op = sub.add_parser("op", help="simulate one op")
    add_op_arguments(op)
    op.add_argument("--json", metavar="PATH", help="write the timing and the hardware config as JSON")
    add_interval_flag(op)
    op.add_argument("--trace-out", metavar="PATH", help="write a Chrome trace-event JSON of the op (open in Perfetto)")
    add_set_flag(op)
    renamed(op, "--trace", "--trace-out PATH")
    add_output_flags(op, formats=("table", "json"), quiet_help=None)


def add_op_arguments(op) -> None:
    """The op's kind, chip, sizes and how it runs (shared with `archsim explain op`)."""
    op.add_argument("kind", choices=["gemm", "attention", *VECTOR_OPS, "copy", *COLLECTIVES])
    op.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    op.add_argument("--M", type=positive_int("--M"), help="rows: of a GEMM's output (with --K, --N) or a vector op")
    op.add_argument("--K", type=positive_int("--K"), help="a GEMM's reduction size")
    op.add_argument("--N", type=positive_int("--N"), help="columns: of a GEMM's output or a vector op")
    op.add_argument("--dtype", choices=list(DTYPE_NAMES), default="bf16", help="(default bf16)")
    op.add_argument(
        "--weight-dtype",
        choices=list(DTYPE_NAMES),
        help="a GEMM's weights (B operand), e.g. int4 for W4A16 (default: --dtype); attention: the KV cache's",
    )
    op.add_argument("--batch", type=positive_int("--batch"), default=1, help="attention: sequences (default 1)")
    op.add_argument("--heads", type=positive_int("--heads"), default=32, help="attention: query heads (default 32)")
    op.add_argument("--kv-heads", type=positive_int("--kv-heads"), default=8, help="attention: KV heads (default 8)")
    op.add_argument("--head-dim", type=positive_int("--head-dim"), default=128, help="attention (default 128)")
    op.add_argument("--q-len", type=positive_int("--q-len"), default=1, help="attention: new tokens (default 1)")
    op.add_argument("--kv-len", type=positive_int("--kv-len"), help="attention: KV length read (needed)")
    op.add_argument("--causal", action="store_true", help="attention: causal mask")
    op.add_argument(
        "--no-split-kv",
        action="store_true",
        help="decode attention: no split of the KV length across cores (default: split as the library does, as run)",
    )
    op.add_argument("--bytes", type=positive_int("--bytes"), help="bytes of a copy or a collective (NCCL's count)")
    op.add_argument(
        "--ranks",
        type=positive_int("--ranks"),
        help="chips taking part in a collective (default: all of the system's; 2 for send)",
    )
    op.add_argument("--standalone", action="store_true", help="add the cost of a lone kernel launch")
    op.add_argument(
        "--strided",
        action="store_true",
        help="vector op or copy on strided views (slices): one element per lane per request",
    )
    op.add_argument(
        "--hot",
        action="store_true",
        help="vector op or copy whose input the previous kernel just wrote (an L2 hit if it fits)",
    )


def _op_options(op, args) -> dict:
    """The simulated op as it enters the resolved config: its kind and shape, and how it ran."""
    from dataclasses import asdict

    fields = {k: v for k, v in asdict(op).items() if k not in ("name", "repeat", "scaling", "parallel")}
    return {**fields, "standalone": bool(args.standalone)}


def _config(resolved) -> dict:
    return {"config_hash": resolved.hash, "config": resolved.as_dict()}


def check_sizes(args) -> None:
    """Refuse an op without the sizes that say what it is (there is no meaningful default)."""
    from archsim.graph.single_op import SIZES

    needed = SIZES.get(args.kind, ("bytes",) if args.kind in COLLECTIVES else ("M", "N"))
    missing = [f"--{n.replace('_', '-')}" for n in needed if getattr(args, n) is None]
    if missing:
        given = ", ".join(f"--{n.replace('_', '-')}" for n in needed)
        raise UsageError(f"op {args.kind} needs its sizes: {given} (missing {', '.join(missing)})")


COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "send")


def run_collective(args, system, hw_cfg) -> int:
    """A collective on the system's interconnect: time, algorithm and protocol, NCCL's bus bandwidth."""

    from archsim.config.resolved import ResolvedConfig
    from archsim.hardware.collectives import Collective, CollectiveError, collective_time, lone_wait_s, system_fabric
    from archsim.report.export import write_json
    from archsim.units import format_bytes, format_rate, format_seconds

    ranks = args.ranks or (2 if args.kind == "send" else system.chips)
    if ranks < 2:
        raise UsageError(
            f"{args.kind}: needs at least 2 chips; {system.chip.name} has {system.chips} "
            f"(use a multi-chip system such as h200x8)"
        )
    try:
        fabric = system_fabric(system, ranks)
        t = collective_time(fabric, Collective(args.kind), ranks, args.bytes)
    except CollectiveError as err:
        raise UsageError(f"{args.kind}: {err}") from None
    wait_s = lone_wait_s(fabric, ranks) if args.standalone else 0.0  # launched alone: the last rank's arrival
    line = (
        f"{args.kind} of {format_bytes(args.bytes)} over {ranks} chips of {shown(system.chip.name)}: "
        f"{format_seconds(t.time_s + wait_s)} ({t.algorithm.value}, {t.protocol or '-'} protocol; latency "
        f"{format_seconds(t.latency_s)}, transfer {format_seconds(t.transfer_s)}"
        f"{f', wait for the last rank {format_seconds(wait_s)}' if args.standalone else ''}); "
        f"algbw {format_rate(t.algorithm_bandwidth_bytes_per_s, 'B/s')}, "
        f"busbw {format_rate(t.bus_bandwidth_bytes_per_s, 'B/s')}"
    )
    data = {
        "op": args.kind,
        "bytes": args.bytes,
        "ranks": ranks,
        "time_s": t.time_s + wait_s,
        "latency_s": t.latency_s,
        "transfer_s": t.transfer_s,
        **({"arrival_wait_s": wait_s} if args.standalone else {}),
        "algorithm": t.algorithm.value,
        "protocol": t.protocol,
        "algbw_bytes_per_s": t.algorithm_bandwidth_bytes_per_s,
        "busbw_bytes_per_s": t.bus_bandwidth_bytes_per_s,
        **_config(ResolvedConfig(hw_cfg, None, {"op": {"kind": args.kind, "bytes": args.bytes, "ranks": ranks}})),
    }

    def lone(s) -> float:  # the collective's time on a system: again at each range's end
        return collective_time(system_fabric(s, ranks), Collective(args.kind), ranks, args.bytes).time_s + (
            lone_wait_s(system_fabric(s, ranks), ranks) if args.standalone else 0.0
        )

    line += _with_interval(args, args.kind, t.time_s + wait_s, data, format_seconds, lone)
    emit(args, console(args), [line], data=data)
    if args.json:
        write_json(args.json, data)
    return 0


def case_kind(op) -> str:
    """The kind of validation case an op is (the kind its transfer errors are stored under)."""
    if op.kind.value == "attention":
        return "attention_decode" if op.q_len == 1 else "attention_prefill"
    return op.kind.value


def _with_interval(args, kind: str, time_s: float, data: dict, unit, predict) -> str:
    """With --interval, the op's interval into `data` and as a clause for its line; else nothing.
    `predict` gives the op's time on a System: again at each end of each stated range that counts."""
    if args.interval is None:
        return ""
    from archsim.commands.intervals import swung_interval

    def times(hardware) -> dict[str, float]:
        return {"time_s": predict(hardware.system)}

    data["interval"] = record = swung_interval(args, _hardware(args), kind, {"time_s": time_s}, times)
    return interval_text(record, kind, args.interval, unit)


def _hardware(args):
    """--hw with each --set hardware value, as an archsim.Hardware (whose values a range moves)."""
    from archsim.api import load_system
    from archsim.commands.run import set_values

    return set_values(load_system(args.hw), args.set or [], "hardware")


def load_hardware(args):
    """(System, its config) of --hw with each --set hardware value, validated as a file is; an op
    has no workload, so a workload value is a usage error."""
    from archsim.config.loader import load_system

    settings = args.set or []
    for root, path, _value in settings:
        if root != "hardware":
            raise UsageError(f"--set: {root}.{path}: archsim op runs no workload; set hardware.PATH=VALUE")
    if not settings:
        return load_system(args.hw)
    from archsim.api import load_system as load_hardware_file
    from archsim.commands.run import set_values

    hardware = set_values(load_hardware_file(args.hw), settings, "hardware")
    return hardware.system, hardware.config


def op_from_args(args):
    """The Op the flags describe (not a collective), built as the API builds one
    (archsim/graph/single_op.py); UsageError for a flag that does not apply."""
    from archsim.graph.single_op import build_op

    try:
        return build_op(
            args.kind,
            M=args.M,
            K=args.K,
            N=args.N,
            dtype=args.dtype,
            weight_dtype=args.weight_dtype,
            batch=args.batch,
            heads=args.heads,
            kv_heads=args.kv_heads,
            head_dim=args.head_dim,
            q_len=args.q_len,
            kv_len=args.kv_len,
            causal=args.causal,
            split_kv=not args.no_split_kv,
            bytes=args.bytes,
            strided=args.strided,
            hot=args.hot,
            flag=lambda name: f"--{name.replace('_', '-')}",
        )
    except ValueError as err:
        raise UsageError(str(err)) from None


def run(args) -> int:
    from archsim.choose import Condition, simulate_op
    from archsim.config.resolved import ResolvedConfig
    from archsim.report.export import timing_dict, write_json
    from archsim.runner.size import check_op
    from archsim.units import format_bytes, format_rate, format_seconds

    check_sizes(args)
    check_interval(args)
    check_outputs(args, ("json", "trace_out"), inputs=(args.hw,))
    system, hw_cfg = load_hardware(args)
    if args.kind in COLLECTIVES:
        if args.trace_out:
            raise UsageError(f"--trace: a {args.kind} has no core timeline to draw")
        return run_collective(args, system, hw_cfg)
    op = op_from_args(args)
    with progress(args, f"simulating the {args.kind} on {shown(system.chip.name)}"):
        check_op(op, system.chip, args.kind)
        t = simulate_op(op, system.chip, Condition.STANDALONE if args.standalone else Condition.GRAPH)
    line = (
        f"{args.kind} on {shown(system.chip.name)}: {format_seconds(t.time_s)} = {t.cycles:,} cycles "
        f"(compute {t.compute_cycles:,}, stall {t.stall_cycles:,}, overhead {t.overhead_cycles:,}); "
        f"{t.bound.value}-bound; {format_rate(t.achieved_flops, 'FLOP/s')}, "
        f"HBM {format_bytes(t.hbm_bytes)} at {format_rate(t.achieved_bytes_per_s, 'B/s')}, "
        f"L2 {format_bytes(t.l2_bytes)}; {t.active_cores} cores active"
    )
    power = system.chip.power
    if power is not None and t.clock_hz < system.chip.clock_hz:
        line += (
            f"; the {power.limit_w:.0f} W power limit holds it at {t.clock_hz / 1e9:.2f} GHz "
            f"(of {system.chip.clock_hz / 1e9:.2f})"
        )
    data = {"op": args.kind, **timing_dict(t), **_config(ResolvedConfig(hw_cfg, None, {"op": _op_options(op, args)}))}
    condition = Condition.STANDALONE if args.standalone else Condition.GRAPH
    line += _with_interval(
        args, case_kind(op), t.time_s, data, format_seconds, lambda s: simulate_op(op, s.chip, condition).time_s
    )
    emit(args, console(args), [line], data=data)
    if args.json:
        write_json(args.json, data)
    if args.trace_out:
        from archsim.report.trace import TraceBuilder, write_trace

        builder = TraceBuilder(system.chip)
        builder.add_op(op.named(args.kind), t, f"{args.kind} on {system.chip.name}", args.standalone)
        write_trace(args.trace_out, builder.document())
        notes(args).print(f"trace {shown(args.trace_out)}")
    return 0
