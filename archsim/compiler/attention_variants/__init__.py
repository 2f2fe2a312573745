"""The attention variants, one file each, keyed by `Variant` (archsim/compiler/attention_variant.py
says what a variant provides); archsim/compiler/attention.py applies those an op carries, in
the order below.

Adding one (docs/adding_an_attention_variant.md): a member in `Variant`, a file here with its `AttentionVariant`,
its line in VARIANTS, and the op field it reads set by the graph builder.
"""

from __future__ import annotations

from archsim.compiler.attention_variant import AttentionVariant, Variant
from archsim.compiler.attention_variants import shared_kv, softcap, window
from archsim.graph.ops import Op

VARIANTS: dict[Variant, AttentionVariant] = {rule.variant: rule for rule in (window.RULE, softcap.RULE, shared_kv.RULE)}


def active_variants(op: Op) -> tuple[AttentionVariant, ...]:
    """The variants the attention op is of, in registry order."""
    return tuple(rule for rule in VARIANTS.values() if rule.applies(op))
