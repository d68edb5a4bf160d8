"""A right program computed in bfloat16 where float32 is expected scores 0 (its numbers miss the check's tolerance),
and both judges ask whether something is computed in lower precision: a student who wrote a bf16 training step was
told only that dW_in "differs at index (0, 0)", since its rounding, grown through the step's matmuls, put some entries
more than 1% of the largest away, and went looking for a logic mistake it did not make. No slip of the records is
asked so (tests/chapters/test_every_chapter.py)."""

import functools

import jax
import jax.numpy as jnp
import pytest

from autograder.questions import chapter_names, load_chapter
from tests.chapter_checks import both_judges

QUESTIONS = {q.qid: q for name in chapter_names() for q in load_chapter(name).questions}
# The steps whose rounding grows most (forward and backward, several matmuls, a softmax), and one matmul.
IN_BF16 = ["ch05-cx4-fsdp-tp-step", "ch05-cx3-tp-backward", "ch06-cx6-fsdp-layers-step",
           "ch09-cx7-attention-constraint", "ch03-cx2-case3-allreduce"]


def in_bfloat16(model):
    """The model with its float inputs cast to bfloat16 and its results back to float32: every product and sum in
    bfloat16."""
    @functools.wraps(model)
    def program(*args):
        args = [a.astype(jnp.bfloat16) if jnp.issubdtype(a.dtype, jnp.floating) else a for a in args]
        return jax.tree.map(lambda o: o.astype(jnp.float32), model(*args))
    return program


@pytest.mark.parametrize("qid", IN_BF16)
def test_a_right_program_in_bfloat16_is_asked_about_precision(qid):
    q = QUESTIONS[qid]
    for v in both_judges(q, in_bfloat16(q.model)):
        assert v.score == 0 and v.diagnosis.startswith("wrong_values"), (qid, v)
        assert "lower precision" in v.message, (qid, v.message)
