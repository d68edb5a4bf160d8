"""A chain of three matrices costs more or less by the order it is multiplied in, and which order is cheaper
depends on the sizes: at a program question's small shapes (8 tokens a device) the order Python takes for
``a @ b @ c`` can do 2x to 4x the model's FLOPs, which the compute check refuses as waste (half marks). A prompt that
asked for such a chain without parentheses left an honest student who typed it as printed at half marks (Chapter 6's
CX4, then Chapter 5's CX2 backward, 4.1x). Every program question whose model multiplies a chain in the other order
than Python's now prints the model's parentheses, and a program typed without them is told the order is the cause."""


import jax
import nbformat
import pytest

from autograder.questions import load_chapter
from solutions._kit import smap
from tests.chapter_checks import both_judges
from tests.paths import ROOT


def _as_the_question_lays_out(chapter: str, qid: str, block):
    """``block`` in a shard_map on the question's mesh, with its operands' and result's specs."""
    spec = load_chapter(chapter)[qid].spec
    return smap(block, spec.mesh, [op.spec for op in spec.operands], spec.out_spec)


def _gathered(block, axis):
    return jax.lax.all_gather(block, axis, axis=1, tiled=True)


def fsdp_backward_left_to_right(x, g, w_out):
    """Chapter 5's CX2 backward as In^T . dOut . W_out^T: (In^T . dOut) is a [D, D] product of 8 tokens."""
    def block(x_block, g_block, w_out_block):
        return jax.lax.psum_scatter(x_block.T @ g_block @ _gathered(w_out_block, "X").T, "X", scatter_dimension=0,
                                    tiled=True)
    return _as_the_question_lays_out("ch05_training", "ch05-cx2-fsdp-backward", block)(x, g, w_out)


def multipod_grad_left_to_right(x, g, w_out):
    """Chapter 6's CX4 as In^T . dOut . W_out^T, its collectives as the model's."""
    def block(x_block, g_block, w_out_block):
        product = _gathered(x_block, "Y").T @ _gathered(g_block, "Y") @ _gathered(w_out_block, "X").T
        return jax.lax.psum(jax.lax.psum_scatter(product, "X", scatter_dimension=0, tiled=True), "Z")
    return _as_the_question_lays_out("ch06_applied_training", "ch06-cx4-multipod-grad", block)(x, g, w_out)


# (chapter, question, the program typed without parentheses, the model's order as the notebook prints it)
CHAINS = [
    ("ch05_training", "ch05-cx2-fsdp-backward", fsdp_backward_left_to_right,
     "dW_\\text{in} = \\text{In}^T \\cdot\n   (d\\text{Out} \\cdot W_\\text{out}^T)"),
    ("ch06_applied_training", "ch06-cx4-multipod-grad", multipod_grad_left_to_right,
     "\\text{In}^T \\cdot (d\\text{Out} \\cdot W_\\text{out}^T)"),
]


def _markdown(chapter: str) -> str:
    """The markdown of a chapter's notebook as students get it."""
    path = ROOT / "release" / chapter / f"{chapter}.ipynb"
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


@pytest.mark.parametrize(("chapter", "qid", "program", "printed"), CHAINS, ids=[q for _, q, _, _ in CHAINS])
def test_a_chain_typed_without_the_printed_parentheses_is_told_its_order(chapter, qid, program, printed):
    q = load_chapter(chapter)[qid]
    assert printed in _markdown(chapter), "the notebook no longer prints the model's parentheses"
    assert "(dOut . W_out^T)" in q.prompt
    for v in both_judges(q, program):
        assert (v.score, v.diagnosis) == (0.5, "compute") and "costlier order" in v.message, v.message
