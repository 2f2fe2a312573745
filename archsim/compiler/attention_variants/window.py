"""Sliding-window attention (Mistral, Gemma 2's local layers, gpt-oss): each query sees at most
the `Op.window` most recent keys, itself included. A causal query block starting at position p
streams no K/V block older than key p - window + 1; without a causal mask every query sees the
same last `window` keys, so the kernel runs over those alone. Pairs scored: `attended_pairs`
with the window (archsim/graph/ops.py, which counts the op's FLOPs the same way)."""

from __future__ import annotations

from dataclasses import replace

from archsim.compiler.attention_variant import AttentionVariant
from archsim.graph.ops import Op, attended_pairs


class SlidingWindow(AttentionVariant):
    order = 10

    def applies(self, op: Op) -> bool:
        return op.window > 0

    def kernel_op(self, op: Op) -> Op:
        if not op.causal and op.kv_len > op.window:  # every query sees the same last keys
            return replace(op, kv_len=op.window)
        return op

    def first_key(self, op: Op, first_q: int) -> int:
        return first_q - op.window + 1

    def pairs(self, op: Op, pairs: float) -> float:
        return attended_pairs(op.q_len, op.kv_len, op.causal, op.window)


RULE = SlidingWindow()
