"""The offline self-check (fingerprints) and the grader reach the same verdict on generated
answers: random formulas, random multiples of a number, and any text or value at all."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autograder import record
from autograder.formula import Invalid
from autograder.numbers import parse_number
from autograder.questions import Number
from autograder.verdict import Status
from tests.badinput.common import assert_sound, timed
from tests.engine.test_fingerprint import FORMULAS, NUMBERS, PRINTS, QUESTIONS, assert_agree, both
from tests.strategies import answer_text, formula_text, hostile_objects, positive_expressions


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_formulas_agree(q, data):
    answer = data.draw(st.one_of(positive_expressions(q.names, max_leaves=4), formula_text()))
    graded, checked = both(q, answer)
    symbols_or_ratio = graded.diagnosis.startswith(("extra_symbol", "missing_symbol")) or (
        graded.diagnosis.startswith("ratio:") and graded.diagnosis != "ratio:other")
    assert_agree(q, answer, diagnosis=graded.status is Status.INVALID or symbols_or_ratio)


def bands(q: Number) -> list[tuple[float, float]]:
    """Where the self-check's buckets and the grader's tolerance may differ: one grid step outside
    the edges of each accepted interval (the buckets do not start at the bounds, or they would
    give the bounds away)."""
    g = PRINTS[q.qid]["grid"]
    intervals = [q.tolerance.bounds(q.reference)] + [q.tolerance.relative().bounds(a.answer) for a in q.accept]
    intervals += [q.tolerance.relative().bounds(s.answer) for s in q.slips if s.hint]
    return [(lo * (1 - 2 * g), lo) for lo, _ in intervals] + [(hi, hi * (1 + 2 * g)) for _, hi in intervals]


@pytest.mark.parametrize("q", NUMBERS, ids=lambda q: q.qid)
@settings(max_examples=60, deadline=None)
@given(factor=st.one_of(st.floats(0.5, 2.0), st.floats(1e-6, 1e6), st.floats(-10, 10)))
def test_random_numbers_agree_on_status(q, factor):
    value = q.reference * factor
    assume(not any(lo <= value <= hi for lo, hi in bands(q)))
    assert_agree(q, value, diagnosis=False)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(QUESTIONS), st.one_of(answer_text(), hostile_objects()))
def test_any_answer_gets_the_same_status_from_both(q, answer):
    """Whatever was recorded, the self-check neither raises nor takes long, and says what the
    grader says: the same status and score, and for an unreadable answer the same sentence."""
    encoded = timed(record.encode_scalar, q.kind, answer)
    if isinstance(q, Number):
        got = parse_number(encoded, q.unit)
        # next to an accepted interval a bucket may fall either way (see bands)
        assume(isinstance(got, Invalid) or not any(lo <= got.value <= hi for lo, hi in bands(q)))
    graded, checked = timed(both, q, answer)
    assert_sound(graded)
    assert_sound(checked)
    assert_agree(q, answer, diagnosis=graded.status is Status.INVALID)
