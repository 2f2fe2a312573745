"""Attention ops of the Llama-3 8B shape (32 query heads over 8 KV heads of 128), built once
for the test files that play them."""

from archsim.graph.ops import Op, OpKind, Scaling


def gqa_attention(q_len: int, kv_len: int, *, batch: int = 1, heads: int = 32, causal: bool = False, **fields) -> Op:
    """A fixed-scaling attention op of `heads` query heads over 8 KV heads of head_dim 128;
    `fields` sets any other field of the op (split_kv, dtype)."""
    return Op(
        OpKind.ATTENTION,
        batch=batch,
        heads=heads,
        kv_heads=8,
        head_dim=128,
        q_len=q_len,
        kv_len=kv_len,
        causal=causal,
        scaling=Scaling.FIXED,
        **fields,
    )
