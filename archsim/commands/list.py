"""`archsim list`: shipped chips and models with their headline numbers."""

from __future__ import annotations

from archsim.errors import ConfigError


def add_parser(sub) -> None:
    sub.add_parser("list", help="shipped chips and models with their headline numbers")


def run(args) -> int:
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
