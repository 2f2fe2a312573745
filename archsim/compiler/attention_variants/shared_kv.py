"""Values that are part of the keys (MLA's decode, DeepSeek-V2 section 2.1): the cached latent
is both, V its first `v_dim` columns, so each cached token is read once (`Op.kv_row_elements`
counts K alone) and V reaches the matrix units in the format K was converted to, the maths'."""

from __future__ import annotations

from archsim.compiler.attention_variant import AttentionVariant
from archsim.dtypes import DType
from archsim.graph.ops import Op


class SharedKV(AttentionVariant):
    order = 30

    def applies(self, op: Op) -> bool:
        return op.kv_shared

    def value_format(self, op: Op, fmt: DType) -> DType:
        return op.dtype  # converted with K


RULE = SharedKV()
