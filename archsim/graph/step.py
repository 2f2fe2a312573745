"""One forward step of a batch: how many sequences, how many new tokens each, after how many
cached ones."""

from __future__ import annotations

from dataclasses import dataclass

from archsim.graph.model import Phase


@dataclass(frozen=True)
class Step:
    """One forward step: `batch` sequences, `new_tokens` each, after `past` cached tokens
    (`with_ffn` False: the layers' attention blocks only, for the parts of a step that depend
    on the sequences' lengths)."""

    phase: Phase
    batch: int
    new_tokens: int
    past: int
    with_embedding_and_head: bool = True
    with_ffn: bool = True

    @property
    def tokens(self) -> int:
        return self.batch * self.new_tokens

    @property
    def kv_len(self) -> int:
        return self.past + self.new_tokens
