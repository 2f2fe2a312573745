"""The attention variants, one file each (archsim/compiler/attention_variant.py says what a
variant provides): each file of this folder holds its `RULE`, named by the file;
archsim/compiler/attention.py applies those an op carries, lowest `order` first.

Adding one (docs/adding_an_attention_variant.md): a file here with its `AttentionVariant`, and
the op field it reads set by the graph builder.
"""

from __future__ import annotations

import importlib
import pkgutil

from archsim.compiler.attention_variant import AttentionVariant
from archsim.graph.ops import Op


def _found() -> dict[str, AttentionVariant]:
    """Every variant of this folder by its file's name, lowest `order` first."""
    rules = []
    for module in pkgutil.iter_modules(__path__):
        rule = importlib.import_module(f"{__name__}.{module.name}").RULE
        rule.name = module.name
        rules.append(rule)
    return {rule.name: rule for rule in sorted(rules, key=lambda r: (r.order, r.name))}


VARIANTS: dict[str, AttentionVariant] = _found()


def active_variants(op: Op) -> tuple[AttentionVariant, ...]:
    """The variants the attention op is of, in registry order."""
    return tuple(rule for rule in VARIANTS.values() if rule.applies(op))
