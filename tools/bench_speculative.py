#!/usr/bin/env python3
"""Where speculative decoding helps and where it hurts: time per output token of Llama-3-8B on
the H200, with and without MTP heads (one layer, k proposed tokens, acceptance a), over the
decode batch, from the serving step model and the vllm host profile (what `archsim serve`
composes for every step).

Usage:

    python3 tools/bench_speculative.py [--tokens K] [--acceptance A] [--kv N] [--hw NAME] [--workload NAME]

A verify step checks k + 1 tokens per sequence after the draft's k proposals and emits
E(a, k) = (1 - a^(k+1)) / (1 - a) of them on average; a plain step emits one. At a small batch
the step streams the weights and the verify costs about one step, so speculation divides the
time per token by nearly E; at a large batch the step is compute-bound, the verify costs about
k + 1 steps, and speculation is slower.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsim.config.loader import load_system, load_workload
from archsim.runner.steps import step_model
from archsim.serving.host import PROFILES
from archsim.serving.speculative import expected_tokens, mtp_module, proposal_s

BATCHES = (1, 4, 16, 64, 128, 256, 512)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=3)
    p.add_argument("--acceptance", type=float, default=0.8)
    p.add_argument("--kv", type=int, default=2048, help="KV length of every sequence (default 2048)")
    p.add_argument("--hw", default="h200")
    p.add_argument("--workload", default="llama3_8b")
    args = p.parse_args()
    system, _ = load_system(args.hw)
    w, _ = load_workload(args.workload)
    target, draft = step_model(w, system), step_model(mtp_module(w), system)
    k, kv = args.tokens, args.kv
    e = expected_tokens(args.acceptance, k)
    print(f"{w.model.name} on {system.chip.name}, KV {kv}: MTP k = {k}, acceptance {args.acceptance:g}")
    print(f"E(a, k) = {e:.2f} tokens a verify; time per output token, plain / speculative (speedup)")
    hosts = [PROFILES["none"], PROFILES["vllm"]]
    print(f"{'batch':>6}" + "".join(f"{'host ' + h.name:>32}" for h in hosts))
    for b in BATCHES:
        plain_gpu = target.decode_step_s(b, b * kv, kv)
        gpu = target.step_s(b, b * (kv + k + 1), kv + k + 1, (), k + 1) + proposal_s(draft, b, b * kv, kv, (), k)
        cells = []
        for host in hosts:
            plain = host.wall_s(plain_gpu, b, b)
            spec = host.wall_s(gpu, b, round(b * e)) / e
            cells.append(f"{plain * 1e3:9.3f} / {spec * 1e3:7.3f} ms ({plain / spec:4.2f}x)")
        print(f"{b:>6}" + "".join(f"{c:>32}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
