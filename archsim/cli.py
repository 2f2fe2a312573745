"""`archsim` command line: parse, call the API, render. Exit 0 ok, 1 failed run, 2 bad input,
130 interrupted. Heavy imports happen inside the commands so `archsim --help` is instant."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from archsim.errors import ConfigError, DoesNotFitError

DEFAULT_HW = "h200"
DEFAULT_WORKLOAD = "llama3_8b"


class UsageError(Exception):
    """A bad command-line value: reported as `--flag: message`, exit 2."""


def _positive_int(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: must be a whole number (got {text!r})") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{flag}: must be greater than zero (got {value})")
        return value
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own messages, in our format, exit 2
        self.print_usage(sys.stderr)
        print(f"archsim: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="archsim", description="Cycle-approximate accelerator simulator for LLM inference.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="simulate a generation: prefill, then decode")
    run.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    run.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload YAML or shipped name (default llama3_8b)")
    run.add_argument("--batch", type=_positive_int("--batch"), help="sequences decoded together")
    run.add_argument("--prompt", type=_positive_int("--prompt"), help="prompt tokens per sequence")
    run.add_argument("--generate", type=_positive_int("--generate"), help="tokens generated per sequence")
    run.add_argument("--fusion", choices=["eager", "fused"], help="kernel fusion profile (default from workload)")
    run.add_argument("--kv-stride", type=_positive_int("--kv-stride"), default=64,
                     help="decode KV lengths between exactly simulated attention samples (default 64)")
    run.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    run.add_argument("--quiet", action="store_true", help="print only the summary")

    op = sub.add_parser("op", help="simulate one op")
    op.add_argument("kind", choices=["gemm", "attention", "rmsnorm", "add", "silu_mul", "softmax", "copy"])
    op.add_argument("--hw", default=DEFAULT_HW)
    op.add_argument("--M", type=_positive_int("--M"), default=1)
    op.add_argument("--K", type=_positive_int("--K"), default=1)
    op.add_argument("--N", type=_positive_int("--N"), default=1)
    op.add_argument("--dtype", choices=["bf16", "fp16", "fp8", "int8"], default="bf16")
    op.add_argument("--batch", type=_positive_int("--batch"), default=1)
    op.add_argument("--heads", type=_positive_int("--heads"), default=32)
    op.add_argument("--kv-heads", type=_positive_int("--kv-heads"), default=8)
    op.add_argument("--head-dim", type=_positive_int("--head-dim"), default=128)
    op.add_argument("--q-len", type=_positive_int("--q-len"), default=1)
    op.add_argument("--kv-len", type=_positive_int("--kv-len"), default=1024)
    op.add_argument("--causal", action="store_true")
    op.add_argument("--bytes", type=_positive_int("--bytes"), default=1 << 20)
    op.add_argument("--standalone", action="store_true", help="add the cost of a lone kernel launch")
    op.add_argument("--json", metavar="PATH")

    val = sub.add_parser("validate", help="compare predictions with measured timings")
    val.add_argument("cases", help="case file (JSON), e.g. archsim/data/h200_calibration.json")
    val.add_argument("--hw", default=DEFAULT_HW)
    val.add_argument("--json", metavar="PATH")

    sub.add_parser("list", help="shipped chips and models with their headline numbers")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "op":
            return cmd_op(args)
        if args.command == "validate":
            from archsim.validate import cmd_validate
            return cmd_validate(args)
        if args.command == "list":
            return cmd_list()
    except ConfigError as err:
        for problem in err.problems:
            print(problem, file=sys.stderr)
        return 2
    except DoesNotFitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except UsageError as err:
        print(f"archsim: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 1


def load_run_inputs(hw: str, workload: str, batch=None, prompt=None, generate=None, fusion=None):
    """Hardware and workload with CLI overrides applied; the resolved config and its hash."""
    from archsim.config.loader import config_hash, load_system, load_workload
    from archsim.graph.model import Fusion

    system, hw_cfg = load_system(hw)
    w, wl_cfg = load_workload(workload)
    sc = w.scenario
    sc = replace(sc, batch=batch or sc.batch, prompt_tokens=prompt or sc.prompt_tokens,
                 output_tokens=generate or sc.output_tokens)
    w = replace(w, scenario=sc, fusion=Fusion(fusion) if fusion else w.fusion)
    wl_cfg = {**wl_cfg, "scenario": {"batch": sc.batch, "prompt_tokens": sc.prompt_tokens,
                                     "output_tokens": sc.output_tokens}, "fusion": w.fusion.value}
    config = {"hardware": hw_cfg, "workload": wl_cfg}
    return system, w, config, config_hash(config)


def cmd_run(args) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from archsim.report.export import run_dict, write_json
    from archsim.report.tables import print_run, summary_table
    from archsim.runner.generation import run_generation

    system, w, config, digest = load_run_inputs(args.hw, args.workload, args.batch, args.prompt,
                                                args.generate, args.fusion)
    console = Console()
    with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("decode attention", total=None)
        result = run_generation(w, system, kv_stride=args.kv_stride,
                                progress=lambda done, total: bar.update(task, completed=done, total=total))
    if args.quiet:
        console.print(summary_table(result, system.chip.name, w.model.name))
    else:
        print_run(result, system.chip.name, w.model.name, system.chip.clock_hz, console)
    console.print(f"config hash {digest}")
    if args.json:
        write_json(args.json, run_dict(result, config, digest))
    return 130 if result.interrupted else 0


def cmd_op(args) -> int:
    from rich.console import Console

    from archsim.config.loader import config_hash, load_system
    from archsim.engine.simulate import simulate_op
    from archsim.graph.ops import Op, OpKind, VectorOp
    from archsim.hardware import DType
    from archsim.report.export import timing_dict, write_json
    from archsim.units import format_bytes, format_rate, format_seconds

    system, hw_cfg = load_system(args.hw)
    dt = DType(args.dtype)
    if args.kind == "gemm":
        op = Op(OpKind.GEMM, dt, m=args.M, k=args.K, n=args.N)
    elif args.kind == "attention":
        if args.heads % args.kv_heads:
            raise UsageError(f"--kv-heads: must divide --heads ({args.heads}) (got {args.kv_heads})")
        op = Op(OpKind.ATTENTION, dt, batch=args.batch, heads=args.heads, kv_heads=args.kv_heads,
                head_dim=args.head_dim, q_len=args.q_len, kv_len=max(args.kv_len, args.q_len), causal=args.causal)
    elif args.kind == "copy":
        op = Op(OpKind.COPY, dt, bytes=args.bytes)
    else:
        op = Op(OpKind.VECTOR, dt, m=args.M, n=args.N, vop=VectorOp(args.kind))
    t = simulate_op(op, system.chip, args.standalone)
    console = Console()
    console.print(f"{args.kind} on {system.chip.name}: {format_seconds(t.time_s)} = {t.cycles:,} cycles "
                  f"(compute {t.compute_cycles:,}, stall {t.stall_cycles:,}, overhead {t.overhead_cycles:,}); "
                  f"{t.bound.value}-bound; {format_rate(t.achieved_flops, 'FLOP/s')}, "
                  f"HBM {format_bytes(t.hbm_bytes)} at {format_rate(t.achieved_bytes_per_s, 'B/s')}, "
                  f"L2 {format_bytes(t.l2_bytes)}; {t.active_cores} cores active")
    if args.json:
        write_json(args.json, {"op": args.kind, **timing_dict(t), "config_hash": config_hash(hw_cfg),
                               "config": {"hardware": hw_cfg}})
    return 0


def cmd_list() -> int:
    from rich.console import Console
    from rich.table import Table

    from archsim.config.loader import load_system, load_workload, shipped_dir
    from archsim.hardware import DType
    from archsim.units import format_bytes, format_rate

    console = Console()
    chips = Table(title="chips (hw_configs)", title_justify="left")
    for col in ("name", "chip", "cores", "bf16", "fp8", "HBM", "HBM BW", "L2"):
        chips.add_column(col)
    for path in sorted(shipped_dir("hw_configs").glob("*.yaml")):
        try:
            s, _ = load_system(str(path))
        except ConfigError as err:
            chips.add_row(path.stem, f"[red]{err.problems[0].message}[/red]")
            continue
        c = s.chip
        chips.add_row(path.stem, c.name + (f" x{s.chips}" if s.chips > 1 else ""), str(c.cores),
                      format_rate(c.peak_flops(DType.BF16), "FLOP/s"), format_rate(c.peak_flops(DType.FP8), "FLOP/s"),
                      format_bytes(c.hbm.capacity_bytes), format_rate(c.hbm.peak_bandwidth_bytes_per_s, "B/s"),
                      format_bytes(c.l2.capacity_bytes))
    console.print(chips)
    models = Table(title="workloads", title_justify="left")
    for col in ("name", "model", "params", "layers", "hidden", "heads/kv", "experts", "scenario"):
        models.add_column(col)
    for path in sorted(shipped_dir("workloads").glob("*.yaml")):
        w, _ = load_workload(str(path))
        m, sc = w.model, w.scenario
        models.add_row(path.stem, m.name, f"{m.params() / 1e9:.1f} B", str(m.layers), str(m.hidden),
                       f"{m.heads}/{m.kv_heads}", f"{m.experts} top-{m.top_k}" if m.is_moe else "-",
                       f"b{sc.batch} p{sc.prompt_tokens} g{sc.output_tokens}")
    console.print(models)
    return 0
