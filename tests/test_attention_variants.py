"""The registry of attention variants (archsim/compiler/attention_variants/): one file per
variant, found there and named by its file, and applied where the op carries its field; the
flash attention compiler reaches every variant through it."""

from archsim.compiler.attention import (
    _decode_layout,
    block_cycles,
    compile_attention,
    first_key,
    item_shape,
    score_ops,
)
from archsim.compiler.attention_variant import AttentionVariant
from archsim.compiler.attention_variants import VARIANTS, active_variants
from archsim.graph.ops import Op, OpKind, Scaling


def _attention(**kw) -> Op:
    shape = {"batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 128, "q_len": 1, "kv_len": 1000}
    return Op(OpKind.ATTENTION, scaling=Scaling.FIXED, **{**shape, **kw})


def test_each_variant_applies_where_the_op_carries_its_field():
    assert list(VARIANTS) == ["window", "softcap", "shared_kv"]  # each file of the folder, by its order
    assert active_variants(_attention()) == ()
    both = active_variants(_attention(window=512, softcap=True))
    assert [v.name for v in both] == ["window", "softcap"]
    assert [v.name for v in active_variants(_attention(kv_shared=True))] == ["shared_kv"]


def test_what_the_shipped_variants_change():
    """Soft cap: 4 softmax + 2 lane instructions and exp + tanh per score. Window of 100: a
    causal block starting at query 250 reads keys from 250 - 100 + 1 = 151 on; one starting at
    50 from key 0. Without a causal mask, 200 queries over 600 keys see the last 100 each:
    the kernel runs over 100 keys."""
    capped = _attention(softcap=True)
    assert score_ops(capped, active_variants(capped)) == (6, 2)
    assert score_ops(_attention(), ()) == (4, 1)
    windowed = _attention(q_len=300, kv_len=300, causal=True, window=100)
    assert first_key(windowed, 250, active_variants(windowed)) == 151
    assert first_key(windowed, 50, active_variants(windowed)) == 0
    assert first_key(_attention(q_len=300, kv_len=300, causal=True), 250, ()) == 0
    full = _attention(q_len=200, kv_len=600, window=100)
    (window,) = active_variants(full)
    assert window.kernel_op(full).kv_len == 100


class _WideSoftmax(AttentionVariant):
    """A made-up variant: 10 more lane instructions per score, on ops 80 wide (no other test's)."""

    name = "wide_softmax"

    def applies(self, op: Op) -> bool:
        return op.head_dim == 80

    def score_ops(self, op: Op) -> tuple[int, int]:
        return 10, 0


def test_a_variant_registered_in_a_test_is_applied(h200, monkeypatch):
    """A decode of 2 heads over 1,000 keys scores 2 x 1,000 = 2,000 pairs: 2,000 x (4 + 10) =
    28,000 lane instructions with the made-up variant registered, 2,000 x 4 = 8,000 without;
    and each KV block's softmax takes longer."""
    op = _attention(head_dim=80)
    plain = compile_attention(op, h200.chip).activity.lane_ops
    plain_block = block_cycles(op, h200.chip, 2, 64)
    monkeypatch.setitem(VARIANTS, _WideSoftmax.name, _WideSoftmax())
    try:
        item_shape.cache_clear()
        _decode_layout.cache_clear()
        assert (plain, compile_attention(op, h200.chip).activity.lane_ops) == (8000, 28000)
        assert block_cycles(op, h200.chip, 2, 64) > plain_block
    finally:
        item_shape.cache_clear()
        _decode_layout.cache_clear()
