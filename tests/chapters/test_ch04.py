"""Chapter 4 (Transformer math): every record against the engine, and the book's printed answers."""

import pytest

from autograder.questions import load_chapter
from solutions.ch04_transformers import BOOK, einsum_flops
from tests.chapter_checks import assert_book_answer, assert_reference_passes, assert_slip_fails

pytestmark = pytest.mark.ch04
CHAPTER = load_chapter("ch04_transformers")
SLIPS = [(q, i) for q in CHAPTER.questions for i in range(len(q.slips))]


@pytest.mark.parametrize("q", CHAPTER.questions, ids=lambda q: q.qid)
def test_reference_passes(q):
    assert_reference_passes(CHAPTER, q)


@pytest.mark.parametrize(("q", "i"), SLIPS, ids=[f"{q.qid}-slip{i}" for q, i in SLIPS])
def test_slip_fails(q, i):
    assert_slip_fails(CHAPTER, q, i)


@pytest.mark.parametrize("qid", sorted(BOOK))
def test_book_answer_within_tolerance(qid):
    assert_book_answer(CHAPTER[qid], BOOK[qid])


def test_every_question_has_points_and_a_section():
    assert CHAPTER.total_points >= 50
    assert all(q.section for q in CHAPTER.questions)


def test_cx1_references_equal_xla_cost_analysis():
    """The FLOP rule the CX1 reference applies is what XLA reports for every public test case."""
    import jax
    import jax.numpy as jnp

    for probe in CHAPTER["ch04-cx1-einsum-flops"].probes:
        x = jax.random.normal(jax.random.key(0), probe["x_shape"])
        y = jax.random.normal(jax.random.key(1), probe["y_shape"])
        cost = jax.jit(lambda a, b, s=probe["spec"]: jnp.einsum(s, a, b)).lower(x, y).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        assert cost["flops"] == einsum_flops(**probe), probe
