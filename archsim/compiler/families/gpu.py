"""The GPU family: a tuned kernel library's mapping, today's default. GEMM tiles from a library's
power-of-two menu (archsim/compiler/gemm.py: `library_tiles`), decode attention as a flash
kernel with the GQA group as its query rows (archsim/compiler/attention.py). The SCALE-Sim
family maps this way until it has a file of its own."""

from __future__ import annotations

from archsim.compiler.chip_family import FamilyRule
from archsim.hardware import ChipFamily


class Gpu(FamilyRule):
    family = ChipFamily.GPU

    def tries_half_the_cores(self) -> bool:
        return True


RULE = Gpu()
