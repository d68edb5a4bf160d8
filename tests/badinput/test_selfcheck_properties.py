"""The offline self-check (fingerprints) and the grader reach the same verdict on generated
answers: random formulas, random multiples of a number, and any text or value at all."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autograder import record
from autograder.verdict import Status
from tests.badinput.common import assert_sound, timed
from tests.scalar_questions import FORMULAS, NUMBERS, QUESTIONS, assert_agree, both
from tests.strategies import answer_text, formula_text, hostile_objects, positive_expressions


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_formulas_agree(q, data):
    answer = data.draw(st.one_of(positive_expressions(q.names, max_leaves=4), formula_text()))
    assert_agree(q, answer, diagnosis=True)


@pytest.mark.parametrize("q", NUMBERS, ids=lambda q: q.qid)
@settings(max_examples=60, deadline=None)
@given(factor=st.one_of(st.floats(0.5, 2.0), st.floats(1e-6, 1e6), st.floats(-10, 10)))
@example(factor=0.245)  # 1/4 of a value on the end of a 2% range: a factor only the grader could see
def test_random_numbers_agree_on_status(q, factor):
    assert_agree(q, q.reference * factor, diagnosis=True)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(QUESTIONS), st.one_of(answer_text(), hostile_objects()))
def test_any_answer_gets_the_same_status_from_both(q, answer):
    """Whatever was recorded, the self-check neither raises nor takes long, and says what the
    grader says: the same status and score, and for an unreadable answer the same sentence."""
    timed(record.encode_scalar, q.kind, answer)
    graded, checked = timed(both, q, answer)
    assert_sound(graded)
    assert_sound(checked)
    assert_agree(q, answer, diagnosis=graded.status is Status.INVALID)
