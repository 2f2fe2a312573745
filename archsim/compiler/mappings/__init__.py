"""The GEMM mappings, one file each, keyed by `GemmMapping`: what each forms its work items
from and how (archsim/compiler/gemm_mapping.py says what a mapping provides). The autotuner
(archsim/compiler/gemm.py) offers every registered mapping in the order below: among tilings
of equal estimate, an earlier mapping's come first.

Adding one (docs/adding_a_gemm_mapping.md): a member in `GemmMapping`, a file here with its
`GemmMappingRule`, and its line in MAPPINGS.
"""

from __future__ import annotations

from archsim.compiler.gemm_mapping import GemmMappingRule
from archsim.compiler.gemm_phases import GemmMapping
from archsim.compiler.mappings import data_parallel, split_k, stream_k

MAPPINGS: dict[GemmMapping, GemmMappingRule] = {
    rule.mapping: rule for rule in (stream_k.RULE, data_parallel.RULE, split_k.RULE)
}


def mapping_rule(mapping: GemmMapping) -> GemmMappingRule:
    """The rule of `mapping`; a mapping with no file registered is an error, not a default."""
    rule = MAPPINGS.get(mapping)
    if rule is None:
        raise KeyError(f"GEMM mapping {mapping.value!r} has no rule registered in archsim/compiler/mappings")
    return rule
