"""The whole verdict path on arbitrary answers, text and values alike: recording, the grader's
check of each kind, and the offline self-check each return a sound verdict, quickly, and never
raise. For choices, an answer is unreadable exactly when it names no option."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import fingerprint, record
from autograder.checks import judge
from autograder.formula import Invalid
from autograder.kinds import choice
from autograder.verdict import Status
from tests.badinput.common import assert_invalid, assert_judged, assert_sound, timed
from tests.scalar_questions import CHOICES, PRINTS, QUESTIONS
from tests.strategies import answer_text, hostile_objects, near_limit_text

ANSWERS = st.one_of(answer_text(), hostile_objects(), near_limit_text())



@settings(max_examples=200, deadline=None)
@given(st.sampled_from(QUESTIONS), ANSWERS)
def test_every_answer_gets_a_verdict_quickly(q, answer):
    """The grader judges what the record holds, and also whatever a function returned (the raw
    value); the self-check judges the record in the student's kernel. None of them may raise."""
    encoded = timed(record.encode_scalar, q.kind, answer)
    for given_answer in (answer, encoded):
        assert_sound(timed(judge, q, given_answer))
        assert_sound(timed(fingerprint.selfcheck, PRINTS[q.qid], q.qid, given_answer))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CHOICES), st.one_of(answer_text(), hostile_objects(), st.sampled_from(["comms", "COMMS "])))
def test_choice_is_invalid_exactly_when_it_names_no_option(q, answer):
    for given_answer in (answer, record.encode_scalar(q.kind, answer)):
        got = timed(choice.parse, q.options, given_answer)
        v = timed(judge, q, given_answer)
        if isinstance(got, Invalid):
            assert_invalid(v, got, **choice.context(q.options))
        else:
            assert got in q.options
            assert_judged(v)
            assert (v.status is Status.CORRECT) == (got == q.reference)
