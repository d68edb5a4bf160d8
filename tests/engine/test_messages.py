"""Every diagnosis the engine emits has its own sentence, with every placeholder filled."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import partial

import pytest

from autograder import equivalence as eq
from autograder.checks import judge
from autograder.kinds import choice, formula, number
from autograder.kinds.number import factor_code
from autograder.messages import phrase
from autograder.numbers import Tolerance
from autograder.questions import Choice, Slip
from autograder.verdict import Status, Verdict
from tests.badinput.common import INSTRUCTION, INVALID_CODES

GENERIC = "Not the expected answer."
NAMES = ["B", "D", "F", "N"]


def formula_verdict(answer: object, reference: str = "2*B*D", counts: tuple[str, ...] = ()) -> Verdict:
    return formula.check("ch99-t1-formula", reference, NAMES, counts, answer)


def number_verdict(answer: object, reference: float = 1e-3, unit: str = "s") -> Verdict:
    return number.check("ch99-t1-number", reference, unit, Tolerance(), answer)


def number_context(unit: str, tolerance: Tolerance) -> dict:
    return number.context(unit, tolerance.describe())


CHOICE = Choice(qid="ch99-t1-bound", points=1, prompt="p", reference="memory", options=("compute", "memory"),
                slips=(Slip("compute", "wrong_option"),))

# One way to make the engine emit each code it knows, through the checkers students meet: most are answers
# to the formula 2*B*D or to the number 1 ms; the rest need a reference or a question of their own.
FORMULA_ANSWERS = [
    ("empty", None),
    ("syntax", "B +"),
    ("implicit_multiplication", "2(B+D)"),
    ("caret_power", "B^2"),
    ("unicode_operator", "B×D"),
    ("relation", "B = D"),
    ("unknown_name", "2*B*Q"),
    ("unknown_function", "sin(B)"),
    ("function_without_call", "sqrt*B"),
    ("arity", "Max()"),
    ("forbidden", "B.__class__"),
    ("too_long", "B+" * 1001 + "B"),
    ("too_large", "9**9**9"),
    ("too_long", "(B+" * 12 + "B" + ")**-2" * 12),
    ("not_finite", "1/0"),
    ("complex", "sqrt(-B)"),
    ("wrong_type", [1, 2]),
    ("not_real", "sqrt(-B-D)"),
    ("ratio:2", "4*B*D"),
    ("ratio:1/2", "B*D"),
    ("ratio:-1", "-2*B*D"),
    ("ratio:other", "7.3*B*D"),
    ("extra_symbol:F", "2*B*D*F"),
    ("extra_symbol:F,N", "2*B*D*F*N"),
    ("missing_symbol:D", "2*B"),
    ("not_equivalent", "B+D"),
]
NUMBER_ANSWERS = [
    ("not_finite", "1e999"),
    ("not_a_number", "fast"),
    ("unknown_unit", "3 parsecs"),
    ("unit_dimension", "3 TB/s"),
    ("scientific_notation", "2 / 1.5 x 10^3"),
    ("unit:1000", 1.0),
    ("ratio:1000", "1 s"),
    ("close", 1.05e-3),
    ("magnitude:+3", 1.2),
    ("magnitude:-2", 1.2e-5),
    ("not_equal", 1.7e-3),
]
EMITTED = [(code, partial(formula_verdict, answer)) for code, answer in FORMULA_ANSWERS] + [
    (code, partial(number_verdict, answer)) for code, answer in NUMBER_ANSWERS] + [
    ("unknown_option", lambda: judge(CHOICE, "neither")),
    ("wrong_option", lambda: judge(CHOICE, "compute")),
    ("lower_terms", lambda: formula_verdict("2*N-1", "2*N", ("N",))),
    ("partly", lambda: formula_verdict("B*D", "max(B*D, D**2)")),
    ("unit:1/1000000000", lambda: number_verdict(16.0, 16e9, "B")),
]


def assert_worded(sentence: str) -> None:
    first = sentence.split("\n")[0]  # later lines echo the student's text under a caret
    assert first and first != GENERIC
    assert "{" not in first and "}" not in first, first
    assert not re.search(r"(^|[\s'(])\?", first), first  # a field with no value prints as a bare ?
    assert "()" not in first and "''" not in first and " ," not in first, first  # an empty field


@pytest.mark.parametrize(("code", "make"), EMITTED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(EMITTED)])
def test_emitted_code_has_a_sentence(code, make):
    v = make()
    assert v.diagnosis == code, v
    assert v.status in (Status.INVALID, Status.INCORRECT)
    assert_worded(v.message)


UNREADABLE = [(c, m) for c, m in EMITTED if c in INVALID_CODES]


@pytest.mark.parametrize(("code", "make"), UNREADABLE, ids=[f"{c}-{i}" for i, (c, _) in enumerate(UNREADABLE)])
def test_unreadable_answers_are_told_what_to_type(code, make):
    """An INVALID verdict costs no attempt; its sentence says what to type instead, not only what is wrong."""
    v = make()
    assert v.status is Status.INVALID and v.score == 0.0, v
    assert INSTRUCTION.search(v.message.split("\n")[0]), v.message


@pytest.mark.parametrize("k", eq.NICE_FACTORS, ids=str)
def test_every_nice_ratio_is_worded(k):
    assert_worded(phrase(f"ratio:{k}"))


UNIT_CODES = sorted({(unit, factor_code(k, unit, None)) for k in eq.NICE_FACTORS
                     for unit in ("s", "ms", "B", "GB", "B/s", "FLOP", "FLOP/s", "FLOP/B", "")})


@pytest.mark.parametrize(("unit", "code"), UNIT_CODES)
def test_every_unit_slip_is_worded(unit, code):
    sentence = phrase(code, **number_context(unit, Tolerance()))
    assert_worded(sentence)
    if code.startswith("unit:"):
        assert (unit or "a plain number") in sentence


@pytest.mark.parametrize("decades", [d for d in range(-30, 31) if d])
def test_every_magnitude_is_worded(decades):
    assert_worded(phrase(f"magnitude:{decades:+d}", **number_context("s", Tolerance())))


@pytest.mark.parametrize(("code", "ctx"), [
    ("too_expensive", {}),
    ("edge", number_context("s", Tolerance())),
    ("no_record", {"detail": "the cell was deleted"}),
    ("close", number_context("s", Tolerance(low=1, high=2))),
    ("wrong_option", choice.context(("a", "b"))),
    ("unknown_option", choice.context(("a", "b"))),
])
def test_other_codes_are_worded(code, ctx):
    assert_worded(phrase(code, **ctx))


@pytest.mark.parametrize(("k", "words"), [("2", "twice"), ("1/2", "half"), ("-1", "sign"), ("-2", "twice"),
                                          ("8", "8 times"), ("1/4", "1/4 of"), ("1000", "1000 times"),
                                          ("1000000", "1e6 times")])
def test_ratio_sentences_name_the_factor(k, words):
    sentence = phrase(f"ratio:{k}")
    assert words in sentence
    if Fraction(k) < 0:
        assert sentence.startswith("The sign is wrong.")


def test_symbol_sentences_name_the_symbols():
    assert "F and N" in phrase("extra_symbol:F,N")
    assert "D" in phrase("missing_symbol:D") and "D" not in phrase("missing_symbol:F")


@pytest.mark.parametrize(("code", "unit", "guess"), [("unit:1000", "s", "milliseconds"),
                                                     ("unit:1000000", "s", "microseconds"),
                                                     ("unit:1/1000000000", "B", "GB"),
                                                     ("unit:1/1000000000000", "FLOP/s", "TFLOP/s")])
def test_unit_sentences_guess_the_unit(code, unit, guess):
    assert guess in phrase(code, **number_context(unit, Tolerance()))


def test_no_sentence_has_an_unfilled_placeholder_without_context():
    """Codes that need context say so by a stand-in, never by a raw template."""
    for code in ("lower_terms", "not_equivalent", "not_equal", "ratio:2", "extra_symbol:F"):
        assert not re.search(r"\{\w*\}", phrase(code))
