"""`archsim list`: shipped chips and models with their headline numbers, 80 columns wide."""

from __future__ import annotations

from archsim.errors import ConfigError


def add_parser(sub) -> None:
    sub.add_parser("list", help="shipped chips and models with their headline numbers")


def _num(x: float) -> str:
    """3 significant digits with a metric prefix past a thousand: 989, 4.8, 1.89k, 131M."""
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale * 0.9995:
            return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}"


def chips_table():
    from rich.table import Table

    from archsim.config.loader import load_system, shipped_dir
    from archsim.hardware import DType

    t = Table(title="chips (--hw)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("chip", max_width=20, overflow="fold")
    for col in ("cores", "bf16\nTFLOP/s", "HBM\nTB/s", "HBM\nGB"):
        t.add_column(col, justify="right", no_wrap=True)
    for path in sorted(shipped_dir("hw_configs").glob("*.yaml")):
        try:
            s, _ = load_system(str(path))
        except ConfigError as err:
            t.add_row(path.stem, f"[red]{err.problems[0].message}[/red]")
            continue
        c = s.chip
        t.add_row(path.stem, c.name + (f" x{s.chips}" if s.chips > 1 else ""), str(c.cores),
                  _num(c.peak_flops(DType.BF16) / 1e12), _num(c.hbm.peak_bandwidth_bytes_per_s / 1e12),
                  _num(c.hbm.capacity_bytes / 1e9))
    return t


def workloads_table():
    from rich.table import Table

    from archsim.config.loader import load_workload, shipped_dir

    t = Table(title="workloads (--workload)", title_justify="left")
    t.add_column("name", no_wrap=True)
    t.add_column("model", overflow="fold")
    for col in ("params", "layers", "heads\n/kv", "experts\n/top-k"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("batch x\nprompt+gen", no_wrap=True)
    for path in sorted(shipped_dir("workloads").glob("*.yaml")):
        try:
            w, _ = load_workload(str(path))
        except ConfigError as err:
            t.add_row(path.stem, f"[red]{err.problems[0].message}[/red]")
            continue
        m, sc = w.model, w.scenario
        t.add_row(path.stem, m.name, f"{m.params() / 1e9:.1f}B", str(m.layers), f"{m.heads}/{m.kv_heads}",
                  f"{m.experts}/{m.top_k}" if m.is_moe else "-", f"{sc.batch}x{sc.prompt_tokens}+{sc.output_tokens}")
    return t


def run(args) -> int:
    from rich.console import Console

    console = Console()
    console.print(chips_table())
    console.print(workloads_table())
    return 0
