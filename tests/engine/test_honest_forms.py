"""Honest forms and their messages: each a form a student writes honestly that the course once misread.

- An integer that is the honest 3-figure rounding of a constant (243 for 19700/81) is read as the same number
  written 243.0: possibly rounded, so the formula is compared to 3 significant figures. A small integer (a factor
  slip) and an integer off by more than a rounding stay wrong.
- A wrong answer in the exact (N-1)/N form of a limit record is diagnosed against that form (a factor, a slip's
  hint), never told that the limit symbol should not appear.
- floor/ceiling around a right formula is told that the question asks for the formula itself.
- Both judges, the grader's (the record through JSON) and the self-check's, say the same.
"""

from __future__ import annotations

import pytest

from autograder.questions import chapter_names, load_chapter
from autograder.verdict import Status
from tests.chapter_checks import both_judges

QUESTIONS = {q.qid: q for name in chapter_names() for q in load_chapter(name).questions}


def _both(qid: str, answer):
    g, s = both_judges(QUESTIONS[qid], answer)
    assert (g.status, g.diagnosis, g.message) == (s.status, s.diagnosis, s.message), (g, s)
    return g


# --- an integer that rounds a constant ------------------------------------------------------------------------

@pytest.mark.parametrize(("qid", "answer"), [
    ("ch08-w1-flop-bound", "1/(243*N)"),
    ("ch08-w1-flop-bound", "1/(243.0*N)"),
    ("ch02-q4-time", "Max(134000000*B/C8, (20500*B + 67100000)/W)"),
], ids=["243", "243.0", "ch02-q4"])
def test_an_integer_rounding_a_constant_is_read_as_the_decimal_would_be(qid, answer):
    assert _both(qid, answer).status is Status.CORRECT


def test_a_rounded_whole_number_coefficient_is_right():
    """ch07-q5-flops: 62540218368*T, rounded to 3 figures and written as a whole number."""
    assert _both("ch07-q5-flops", "62500000000*T").status is Status.CORRECT
    assert _both("ch07-q5-flops", "62000000000*T").status is Status.INCORRECT  # 0.9% off: more than a rounding


@pytest.mark.parametrize(("answer", "diagnosis"), [
    ("1/(240*N)", "ratio:other"),  # 1.3% off: more than a 3-figure rounding
    ("1/(250*N)", "ratio:other"),
    ("2*81/(19700*N)", "ratio:2"),
    ("1/(122*N)", "ratio:2"),
    ("2/(243*N)", "ratio:2"),
])
def test_an_integer_off_by_more_than_a_rounding_stays_wrong(answer, diagnosis):
    v = _both("ch08-w1-flop-bound", answer)
    assert v.status is Status.INCORRECT and v.diagnosis == diagnosis, v


def test_a_small_integer_factor_slip_stays_a_factor():
    q = QUESTIONS["ch03-cx3-t-allreduce"]
    assert _both(q.qid, "4*V/W").diagnosis == "ratio:2"
    assert _both("ch01-e2-dot-flops", "4*N - 2").diagnosis == "ratio:2"


def test_a_missing_small_term_stays_wrong_with_a_big_integer():
    """An integer of 3 figures makes the formula approximate: the small points still catch a missing term."""
    assert _both("ch01-e2-dot-flops", "256*N/128").status is Status.INCORRECT


# --- a wrong exact form of a limit record ------------------------------------------------------------------

@pytest.mark.parametrize(("qid", "answer", "diagnosis", "hint"), [
    ("ch03-cx3-t-allreduce", "4*V*(N-1)/(N*W)", "ratio:2", None),
    ("ch03-cx3-t-allreduce", "V*(N-1)/(N*W)", "ratio:1/2", "ReduceScatter followed by an AllGather"),
    ("ch03-cx3-t-allreduce", "V*(N-1)/(2*N*W)", "ratio:1/4", None),
    ("ch03-cx3-t-allgather", "2*V*(N-1)/(N*W)", "ratio:2", "W counts both directions"),
    ("ch05-e2-dp-t-comms", "4*D*F*(X-1)/(X*W)", "ratio:1/2", "an AllReduce costs twice"),
])
def test_a_wrong_exact_form_is_diagnosed_against_the_exact_form(qid, answer, diagnosis, hint):
    v = _both(qid, answer)
    assert v.status is Status.INCORRECT and not v.diagnosis.startswith("extra_symbol"), v
    assert "should not" not in v.message, v.message
    if diagnosis:
        assert v.diagnosis == diagnosis, v
    if hint:
        assert hint in v.message, v.message


def test_the_large_n_slip_keeps_its_diagnosis():
    v = _both("ch03-cx3-t-allreduce", "V/W")
    assert v.diagnosis == "ratio:1/2" and "ReduceScatter" in v.message


def test_the_exact_form_is_still_right():
    assert _both("ch03-cx3-t-allreduce", "2*V*(N-1)/(N*W)").status is Status.CORRECT


# --- floor/ceiling around the right formula -----------------------------------------------------------------

@pytest.mark.parametrize(("qid", "answer"), [
    ("ch05-e6-tp-max-y", "floor(F*M_Y*W/C)"),
    ("ch07-e9-tp-limit-formula", "floor(F*W_ici/(B*W_hbm))"),
    ("ch02-q3-batch-formula", "ceiling(C/W_pcie)"),
])
def test_a_rounding_wrapper_around_the_right_formula_is_told_to_drop_it(qid, answer):
    v = _both(qid, answer)
    assert v.status is Status.INCORRECT and v.diagnosis == "whole_number", v
    assert "not rounded to a whole number" in v.message, v.message


def test_a_rounding_wrapper_around_a_wrong_formula_is_not_told_so():
    v = _both("ch02-q3-batch-formula", "ceiling(2*C/W_pcie)")
    assert v.status is Status.INCORRECT and v.diagnosis != "whole_number", v


def test_a_floor_inside_a_formula_is_not_told_to_drop_it():
    """V*floor(N**2/2)/(N**2*W), the exact AllToAll (with N**2/4, right) with a slip: the floor is part of the
    formula, not around it."""
    v = _both("ch03-cx3-t-alltoall", "V*floor(N**2/2)/(N**2*W)")
    assert v.status is Status.INCORRECT and v.diagnosis != "whole_number", v


def test_a_limit_symbol_beyond_the_exact_form_is_no_extra_symbol():
    """ch03-cx3-t-allgather's declared slip V/(N*W): the exact form, right too, depends on N, so "the answer should
    not depend on N" would be false; the ratio to either form changes with N, and the slip's hint follows."""
    v = _both("ch03-cx3-t-allgather", "V/(N*W)")
    assert v.diagnosis == "ratio_symbols:N" and "almost the whole array" in v.message, v
    assert "should not" not in v.message, v.message


@pytest.mark.parametrize(("number", "reads_as_rounded"), [
    (243, True), (134000000, True), (20500, True), (62500000000, True), (62540000000, True),
    (2, False), (12, False), (1000000, False), (128, False), (4096, False), (1999, False), (62277025792, False),
    (2000001, False),
])
def test_which_whole_numbers_read_as_a_rounding(number, reads_as_rounded):
    from autograder.formula import rounded

    assert rounded(number) is reads_as_rounded
    assert rounded(float(number)) is True or not reads_as_rounded  # the decimal of a rounding reads as one too


@pytest.mark.parametrize(("answer", "diagnosis"), [
    ("V*floor(N**2/4)/(N**2*W)", "correct"),  # exact on a ring of any length: the prompt says the exact form is right
    ("V*(N-1)/(4*N*W)", "limit_only"),  # a ring's (N-1)/N carried over from the AllGather: right for large N only
    ("V*(N**2-1)/(4*N**2*W)", "limit_only"),  # exact on an odd ring only
])
def test_the_alltoall_is_told_as_the_other_ring_collectives_are(answer, diagnosis):
    """Its large-N form was asked with no exact form declared: the AllGather's exact form was ticked beside it, and
    the same correction here was told "should not depend on N"."""
    v = _both("ch03-cx3-t-alltoall", answer)
    assert v.diagnosis == diagnosis and "should not" not in v.message, v
