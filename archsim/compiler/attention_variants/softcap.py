"""Soft-capped scores (Gemma 2): every score s becomes c tanh(s / c) before the softmax, a tanh
on the special-function unit and two lane instructions (the divide by the cap as a multiply,
and the multiply back after the tanh) per score."""

from __future__ import annotations

from archsim.compiler.attention_variant import AttentionVariant
from archsim.graph.ops import Op

SOFTCAP_LANE_OPS = 2  # per score: divide by the cap (a multiply) and multiply back after the tanh
SOFTCAP_SPECIAL_OPS = 1  # per score: the tanh


class Softcap(AttentionVariant):
    order = 20

    def applies(self, op: Op) -> bool:
        return op.softcap

    def score_ops(self, op: Op) -> tuple[int, int]:
        return SOFTCAP_LANE_OPS, SOFTCAP_SPECIAL_OPS


RULE = Softcap()
