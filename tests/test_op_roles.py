"""Op roles: every op says what its shapes grow with in a step (`Scaling`), set where it is made;
the parts of a mixed step are sorted by it, never by the op's name."""

from dataclasses import replace

import pytest

from archsim.config.loader import load_workload
from archsim.graph.builder import Step, build_step
from archsim.graph.mixed import STEP_SCALINGS, part, pipeline_ops, step_ops
from archsim.graph.model import Fusion, Phase
from archsim.graph.ops import Op, OpKind, ParallelRole, Scaling
from archsim.graph.parallel import Parallelism, tp_collective


def test_an_op_without_a_role_is_refused_when_it_is_made():
    with pytest.raises(TypeError, match="scaling"):
        Op(OpKind.GEMM, m=64, k=4096, n=4096)


def test_the_role_is_not_part_of_what_an_op_is():
    """Two ops of one shape are one op (one cached timing) whatever part of a step times them."""
    a = Op(OpKind.GEMM, m=64, k=4096, n=4096, scaling=Scaling.TOKENS)
    b = Op(OpKind.GEMM, m=64, k=4096, n=4096, scaling=Scaling.FIXED)
    assert a == b and hash(a) == hash(b)


def test_a_steps_parts_follow_the_roles_not_the_names(llama8b):
    """Llama-3-8B's decode step: the KV-length part is its attention kernel alone, the
    per-sequence part the final norm and the LM head; renaming every op changes no part."""
    ops = build_step(llama8b, Step(Phase.DECODE, 4, 1, 99))
    renamed = [op.named("renamed", op.repeat) for op in ops]
    for scaling in STEP_SCALINGS:
        assert [op.name for op in part(renamed, scaling)] == ["renamed"] * len(part(ops, scaling))
        assert part(renamed, scaling) == part(ops, scaling)
    assert [op.kind for op in part(ops, Scaling.KV_LENGTH)] == [OpKind.ATTENTION]
    assert [op.name for op in part(ops, Scaling.SEQUENCES)] == ["final_norm", "lm_head"]
    # every op lands in exactly one part: 2 of the head, 1 attention, the rest on the tokens
    assert len(part(ops, Scaling.TOKENS)) == len(ops) - 3


def test_an_op_that_belongs_to_no_part_of_a_step_is_an_error(llama8b):
    """An op a step's builder made FIXED would be timed in no part: refused, not dropped."""
    ops = build_step(llama8b, Step(Phase.DECODE, 1, 1, 9))
    stray = Op(OpKind.COPY, bytes=4096, scaling=Scaling.FIXED).named("stray")
    with pytest.raises(ValueError, match="stray"):
        part([*ops, stray], Scaling.TOKENS)


@pytest.mark.parametrize("name", ["deepseek_v3", "gemma2_9b", "gpt_oss_120b", "llama3_8b"])
def test_every_op_of_a_shipped_model_has_a_step_role(name):
    """MLA with MTP layers, sliding windows with soft caps, MoE, dense; eager and fused; on one
    chip and under TP and PP (collectives and the pipeline's send): every op is in one part,
    the pipeline's send (a SEND) in none but its own."""
    w = load_workload(name)[0]
    for fusion in Fusion:
        wf = replace(w, fusion=fusion)
        for par in (None, Parallelism(tp=2, pp=2)):
            for step in (Step(Phase.PREFILL, 2, 64, 16), Step(Phase.DECODE, 3, 1, 99)):
                ops = step_ops(wf, step, par)
                assert all(op.scaling in STEP_SCALINGS for op in ops), (name, fusion, par, step)
                parts = sum(len(part(ops, s)) for s in STEP_SCALINGS)
                assert parts + len(pipeline_ops(ops)) == len(ops)
                assert [op.name for op in pipeline_ops(ops)] == (["pp_send"] if par else [])


def test_a_collective_follows_an_op_by_its_parallel_role_not_its_name(llama8b):
    """Under TP 2 an op whose output is a partial sum is followed by an all-reduce of the
    hidden states, 8 tokens x 4,096 x 2 bytes = 65,536, whatever it is called; the LM head's
    vocabulary slice by an all-gather of the logits, 8 x 128,256 x 2 = 2,052,096 bytes; an op of
    no role by nothing."""
    gemm = Op(OpKind.GEMM, m=8, k=4096, n=4096, scaling=Scaling.TOKENS)
    summed = replace(gemm, parallel=ParallelRole.PARTIAL_SUM).named("anything", 32)
    reduce = tp_collective(summed, llama8b, 8, 2)
    assert reduce is not None and (reduce.kind, reduce.bytes, reduce.repeat) == (OpKind.ALL_REDUCE, 65536, 32)
    assert reduce.name == "anything_allreduce" and reduce.scaling is Scaling.TOKENS
    head = replace(gemm, n=128256, parallel=ParallelRole.VOCAB_SLICE, scaling=Scaling.SEQUENCES).named("head")
    gather = tp_collective(head, llama8b, 8, 2)
    assert gather is not None and (gather.kind, gather.bytes) == (OpKind.ALL_GATHER, 2052096)
    assert gather.scaling is Scaling.SEQUENCES  # timed with the head
    assert tp_collective(gemm.named("o_proj"), llama8b, 8, 2) is None
