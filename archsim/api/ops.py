"""One op on a chip, as `archsim op` simulates it: `op("gemm", "h200", M=1, K=8192, N=28672)`
(the description read by archsim/graph/single_op.py, as the command line reads it). Times in
seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archsim.api.inputs import Hardware, as_hardware
from archsim.engine.timing import OpTiming
from archsim.graph.ops import Op
from archsim.graph.single_op import build_op

if TYPE_CHECKING:
    from archsim.api.explanation import Explanation


@dataclass(frozen=True, eq=False)
class OpReport:
    """One op's timing on a chip (`archsim op`'s result): `.timing` holds every figure."""

    op: Op
    kind: str
    timing: OpTiming
    hardware: Hardware
    standalone: bool = False

    @property
    def time_s(self) -> float:
        return self.timing.time_s

    @property
    def bound(self) -> str:
        return self.timing.bound.value

    def explain(self) -> Explanation:
        """Its time by cause, what binds it and each resource's elasticity (archsim/api/explanation.py)."""
        from archsim.api.explanation import explain_op
        from archsim.choose import Condition

        return explain_op(self.op, self.hardware, Condition.STANDALONE if self.standalone else Condition.GRAPH)

    def to_dict(self) -> dict[str, Any]:
        """What `archsim op --json` writes of the timing (without the configuration)."""
        from archsim.report.export import timing_dict

        return {"op": self.kind, **timing_dict(self.timing)}

    def __repr__(self) -> str:
        from archsim.units import format_seconds

        t = self.timing
        return (
            f"OpReport({self.kind} on {self.hardware.name}: {format_seconds(t.time_s)}, {t.bound.value}-bound "
            f"({t.binding_unit} {100 * t.unit_utilisation[t.binding_unit]:.0f}%))"
        )

    def _repr_html_(self) -> str:
        from archsim.api.display import html_table
        from archsim.units import format_rate, format_seconds

        t = self.timing
        rows = [
            ("time", format_seconds(t.time_s)),
            ("bound", f"{t.bound.value} ({t.binding_unit} {100 * t.unit_utilisation[t.binding_unit]:.0f}%)"),
            ("achieved", f"{format_rate(t.achieved_flops, 'FLOP/s')}, {format_rate(t.achieved_bytes_per_s, 'B/s')}"),
        ]
        return html_table(f"{self.kind} on {self.hardware.name}", rows)


def op(kind: str, hardware: Hardware | str = "h200", *, standalone: bool = False, **sizes: Any) -> OpReport:
    """Simulate one op as `archsim op` does: `op("gemm", "h200", M=1, K=8192, N=28672)`,
    `op("attention", hw, batch=8, kv_len=4096)`, `op("rmsnorm", hw, M=8, N=4096)`. The keywords
    are `build_op`'s; `standalone`: with the cost of a kernel launched on its own (default: back
    to back, as in a CUDA graph). ValueError for a bad description, RefusedError for an op
    the chip cannot take."""
    from archsim.choose import Condition, simulate_op
    from archsim.runner.size import check_op

    hw = as_hardware(hardware)
    built = build_op(kind, **sizes)
    check_op(built, hw.system.chip, kind)
    timing = simulate_op(built, hw.system.chip, Condition.STANDALONE if standalone else Condition.GRAPH)
    return OpReport(built, kind, timing, hw, standalone)
