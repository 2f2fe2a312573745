"""The GEMM mappings, one file each, keyed by `GemmMapping`: what each forms its work items
from and how (archsim/compiler/gemm_mapping.py says what a mapping provides). Each file of this
folder holds its `RULE`; the autotuner (archsim/compiler/gemm.py) offers every one, lowest
`order` first: among tilings of equal estimate, an earlier mapping's come first.

Adding one (docs/adding_a_gemm_mapping.md): a member in `GemmMapping` and a file here with its
`GemmMappingRule`.
"""

from __future__ import annotations

import importlib
import pkgutil

from archsim.compiler.gemm_mapping import GemmMappingRule
from archsim.compiler.gemm_phases import GemmMapping


def _found() -> dict[GemmMapping, GemmMappingRule]:
    """Every mapping of this folder by its `GemmMapping`, lowest `order` first."""
    rules = [importlib.import_module(f"{__name__}.{m.name}").RULE for m in pkgutil.iter_modules(__path__)]
    return {rule.mapping: rule for rule in sorted(rules, key=lambda r: (r.order, r.mapping.value))}


MAPPINGS: dict[GemmMapping, GemmMappingRule] = _found()


def mapping_rule(mapping: GemmMapping) -> GemmMappingRule:
    """The rule of `mapping`; a mapping with no file registered is an error, not a default."""
    rule = MAPPINGS.get(mapping)
    if rule is None:
        raise KeyError(f"GEMM mapping {mapping.value!r} has no rule registered in archsim/compiler/mappings")
    return rule
