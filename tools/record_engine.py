"""Record the event loop's outputs on a fixed set of phases, for tests/test_engine_recorded.py.

    python3 tools/record_engine.py [--out tests/data/engine_phases.npz]

Each case is one phase the compiler makes for an op on a shipped chip (a stream-K GEMM over
many cores, a GEMV's stream-K and split-K kernels with their reduction, causal prefill
attention, split-KV decode attention and its combine, a vector kernel), or a phase written
here to reach a path the compiler's phases do not (loads of several trips, loads of no bytes);
each played with and without a trace. The file keeps each phase's arrays and memory record (so
the test needs no compiler) and every output of `archsim.engine.simulate.play_phase_on`.

Run it only when the event loop's results change on purpose, and say why in the commit: the
test then compares the new loop with these numbers, bit for bit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attention_ops import gqa_attention  # noqa: E402
from test_engine_recorded import PHASE_ARRAYS, outputs  # noqa: E402  (what the test rebuilds and compares)

from archsim.compiler.compile import compile_candidates  # noqa: E402
from archsim.config.loader import load_system  # noqa: E402
from archsim.engine.simulate import phase_memory, play_phase_on  # noqa: E402
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp  # noqa: E402
from archsim.program import Phase  # noqa: E402

OUT = ROOT / "tests" / "data" / "engine_phases.npz"
# a split-KV decode over 32k keys, whose program is a decode kernel and a combine
DECODE = gqa_attention(1, 32768, split_kv=True)
# (case, chip, op, candidate, phase): the candidate and phase as compile_candidates orders them
CASES = (
    ("stream-k gemm", "h200", Op(OpKind.GEMM, m=2048, k=4096, n=4096, scaling=Scaling.FIXED), 0, 0),
    ("stream-k gemm a100", "a100_pcie", Op(OpKind.GEMM, m=64, k=4096, n=6144, scaling=Scaling.FIXED), 0, 0),
    ("gemv stream-k", "h200", Op(OpKind.GEMM, m=1, k=4096, n=4096, scaling=Scaling.FIXED), 0, 0),
    ("gemv split-k", "h200", Op(OpKind.GEMM, m=1, k=4096, n=4096, scaling=Scaling.FIXED), 6, 0),
    ("gemv split-k reduce", "h200", Op(OpKind.GEMM, m=1, k=4096, n=4096, scaling=Scaling.FIXED), 6, 1),
    (
        "causal prefill attention",
        "h200",
        gqa_attention(2048, 2048, causal=True),
        0,
        0,
    ),
    (
        "split-kv decode attention",
        "h200",
        DECODE,
        0,
        0,
    ),
    (
        "split-kv combine",
        "h200",
        DECODE,
        0,
        1,
    ),
    ("vector rmsnorm", "h200", Op(OpKind.VECTOR, m=1000, n=4096, vop=VectorOp.RMSNORM, scaling=Scaling.FIXED), 0, 0),
)


def _with(phase: Phase, **arrays) -> Phase:
    fields = {name: getattr(phase, name) for name in PHASE_ARRAYS}
    return Phase(**(fields | arrays), stages=phase.stages, label=phase.label, inflight_bytes=phase.inflight_bytes)


def phases() -> list[tuple[str, Phase, tuple]]:
    """Every case's name, phase and memory record."""
    chips = {name: load_system(name)[0].chip for name in {c[1] for c in CASES}}
    out = []
    for name, chip_name, op, candidate, at in CASES:
        chip = chips[chip_name]
        phase = compile_candidates(op, chip)[candidate].phases[at]
        out.append((name, phase, tuple(phase_memory(phase, chip))))
    # a stream-K GEMM's loads as runs of three (each pays three access latencies)
    gemm, memory = out[1][1], out[1][2]
    out.append(("loads of three trips", _with(gemm, load_trips=np.full(gemm.entries, 3.0)), memory))
    # sequence 0 loads nothing and computes long; sequence 1's loads give the events that let
    # sequence 0's DMA take its next load (one a pass)
    none = Phase(
        core_start=np.array([0, 4, 8], dtype=np.int64),
        core_weight=np.array([1, 3], dtype=np.int64),
        hbm_bytes=np.array([0.0, 0.0, 0.0, 0.0, 4096.0, 4096.0, 4096.0, 4096.0]),
        l2_bytes=np.zeros(8),
        compute_cycles=np.array([20000, 20000, 20000, 20000, 5, 5, 5, 5], dtype=np.int64),
        store_bytes=np.zeros(8),
        store_l2_bytes=np.zeros(8),
        load_trips=np.ones(8),
        stages=2,
    )
    out.append(("loads of no bytes", none, memory))
    return out


def record(out: Path) -> None:
    from archsim.hardware.memory import MemoryParams

    data: dict[str, np.ndarray] = {}
    cases = phases()
    for name, phase, memory in cases:
        for field in PHASE_ARRAYS:
            data[f"{name}/{field}"] = getattr(phase, field)
        data[f"{name}/stages"] = np.array(phase.stages, dtype=np.int64)
        data[f"{name}/memory"] = np.array(memory, dtype=np.float64)
        for trace in (False, True):
            r = play_phase_on(phase, MemoryParams(*memory), trace)
            for field, value in outputs(r).items():
                data[f"{name}/{'trace' if trace else 'plain'}/{field}"] = value
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **data)
    print(f"{out}: {len(cases)} phases, {out.stat().st_size / 1024:.0f} KiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    record(ap.parse_args().out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
