"""What an attention variant provides: how it changes the work of a flash attention kernel
(archsim/compiler/attention.py) from softmax(Q K^T) V over every key the mask allows. Each
variant is one file in archsim/compiler/attention_variants/ with one `AttentionVariant` (its
`RULE`), found there and named by the file; the kernel applies every variant whose field the op
carries (`applies`), in the order of their `order`, each hook a change to the plain kernel's
number (the defaults change nothing).

What a variant may change: the op as the kernel runs it (`kernel_op`), the oldest key a causal
query block reads (`first_key`: the K/V blocks it streams), the (query, key) pairs scored
(`pairs`: the softmax work counted for energy), the lane and special-function instructions per
score beyond the softmax's (`score_ops`), and the format the values are multiplied in
(`value_format`). Counts of instructions and elements; positions are token indices.
"""

from __future__ import annotations

from archsim.dtypes import DType
from archsim.graph.ops import Op


class AttentionVariant:
    """One attention variant. A subclass gives `applies` and sets `order`; each other hook it
    overrides is how it changes the kernel."""

    name = ""  # its file's name (set as the registry finds it)
    order = 0  # where the kernel applies it among the variants an op carries: lowest first

    def applies(self, op: Op) -> bool:
        """Whether the attention op is of this variant (a field the graph builder set)."""
        raise NotImplementedError

    def kernel_op(self, op: Op) -> Op:
        """The op as the kernel runs it (default: as given)."""
        return op

    def first_key(self, op: Op, first_q: int) -> int:
        """The oldest key a causal query block whose first query is at position `first_q` may
        read (the kernel takes the latest of every variant's and 0)."""
        return 0

    def pairs(self, op: Op, pairs: float) -> float:
        """(query, key) pairs scored per (sequence, head), given those of the plain causal or
        full mask (`pairs`)."""
        return pairs

    def score_ops(self, op: Op) -> tuple[int, int]:
        """(lane instructions, special-function operations) per score on top of the softmax's."""
        return 0, 0

    def value_format(self, op: Op, fmt: DType) -> DType:
        """The format V reaches the matrix units in, given the cache's (`fmt`)."""
        return fmt
