"""The offline self-check agrees with the grader, and its data does not print the answer."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from autograder import equivalence as eq
from autograder import fingerprint, record
from autograder.formula import to_text
from autograder.kinds.common import diagnosed_as
from autograder.questions import Formula, Number, Question, Slip
from autograder.verdict import Status
from course.symbols import B, D
from tests.scalar_questions import CHOICES, FORMULAS, NUMBERS, PRINTS, QUESTIONS, assert_agree, both
from tests.strategies import HostileStr, PosingAsStr

FACTORS = [Fraction(2), Fraction(1, 2), Fraction(8), Fraction(1, 4), Fraction(1000), Fraction(-1)]


def scaled(q: Question, k: Fraction) -> object:
    if isinstance(q, Formula):
        return sp.Rational(k.numerator, k.denominator) * q.reference
    return float(q.reference) * float(k)


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q.qid)
def test_reference_is_correct_on_both(q):
    graded, checked = both(q, q.reference)
    assert graded.ok and checked.ok


@pytest.mark.parametrize(("q", "i"), [(q, i) for q in QUESTIONS for i in range(len(q.slips))],
                         ids=lambda x: x.qid if isinstance(x, Question) else str(x))
def test_slips_agree(q, i):
    slip = q.slips[i]
    graded, checked = both(q, slip.answer)
    assert diagnosed_as(graded.diagnosis, slip.diagnosis) and checked.diagnosis == graded.diagnosis
    assert graded.message == checked.message
    if slip.hint:
        assert graded.message.endswith("Hint: " + slip.hint)


@pytest.mark.parametrize(("q", "a"), [(q, a) for q in QUESTIONS for a in q.accept],
                         ids=lambda x: x.qid if isinstance(x, Question) else "accept")
def test_accepted_alternatives_agree(q, a):
    graded, checked = both(q, a.answer)
    assert graded.status == checked.status == Status.PARTIAL
    assert graded.score == checked.score == a.credit and graded.message == checked.message == a.message


@pytest.mark.parametrize("k", FACTORS, ids=str)
@pytest.mark.parametrize("q", FORMULAS + NUMBERS, ids=lambda q: q.qid)
def test_nice_multiples_agree(q, k):
    graded, _ = both(q, scaled(q, k))
    assert graded.diagnosis.startswith(("ratio:", "unit:")) or graded.status is Status.PARTIAL, graded
    assert_agree(q, scaled(q, k), diagnosis=True)


@pytest.mark.parametrize("q", CHOICES, ids=lambda q: q.qid)
@pytest.mark.parametrize("answer", ["compute", " Memory ", "comms", "other", None, 3, ["memory"]])
def test_choices_agree(q, answer):
    assert_agree(q, answer, diagnosis=True)


@pytest.mark.parametrize(("answer", "code"), [(None, "empty"), (Ellipsis, "empty"), (["memory"], "wrong_type"),
                                              (PosingAsStr(), "wrong_type")], ids=["None", "...", "list", "posing"])
def test_unrecorded_choices_keep_their_reason(answer, code):
    """A recorded None is the marker {"invalid": "empty", ...}: "No answer yet", not "a dict"."""
    graded, checked = both(CHOICES[0], answer)
    assert (graded.status, graded.diagnosis) == (checked.status, checked.diagnosis) == (Status.INVALID, code)
    assert "dict" not in graded.message


def test_choice_text_is_read_by_value():
    graded, checked = both(CHOICES[0], HostileStr(" Memory "))  # its strip() and lower() raise
    assert graded.ok and checked.ok


@pytest.mark.parametrize("q", NUMBERS, ids=lambda q: q.qid)
def test_a_tick_is_a_grade_at_the_edges(q):
    """Just outside the accepted range the self-check never ticks; just inside, it ticks or says it
    cannot tell ("edge"), and the grader accepts."""
    lo, hi = q.tolerance.bounds(q.reference)
    for value in (lo * (1 - 1e-9), hi * (1 + 1e-9)):
        graded, checked = both(q, value)
        assert not graded.ok and not checked.ok
    for value in (lo, hi, lo * (1 + 1e-9), hi * (1 - 1e-9)):
        graded, checked = both(q, value)
        assert graded.ok and (checked.ok or checked.diagnosis == "edge")
    assert all(v.ok for v in both(q, q.reference))


@pytest.mark.parametrize("q", NUMBERS, ids=lambda q: q.qid)
def test_the_undecided_band_is_narrow(q):
    """The self-check cannot tell only in the outer 1/64 of the accepted range at each end."""
    lo, hi = q.tolerance.bounds(q.reference)
    width = math.log(hi / lo)
    for t in np.linspace(0.05, 0.95, 37):
        assert both(q, lo * math.exp(width * t))[1].ok


@pytest.mark.parametrize("q", FORMULAS + NUMBERS, ids=lambda q: q.qid)
def test_no_tick_is_refused_near_the_tolerance(q):
    """Many values around the edges of the accepted range: whenever the self-check ticks, the grader
    gives the points, and the two agree on the diagnosis of every value the self-check can decide."""
    rng = np.random.default_rng(0)
    for r in rng.uniform(-0.012, 0.012, 60):
        answer = sp.Float(1 + r, 20) * q.reference if isinstance(q, Formula) else float(q.reference) * (1 + r)
        graded, checked = both(q, answer)
        assert graded.ok or not checked.ok, (answer, graded, checked)
        if checked.diagnosis != "edge":
            assert (graded.status, graded.diagnosis) == (checked.status, checked.diagnosis), answer


@pytest.mark.parametrize("answer", ["1e308 TB/s", 1e308, 5e-324, -1e308, "nan", None, True, "2B"])
@pytest.mark.parametrize("q", NUMBERS, ids=lambda q: q.qid)
def test_hostile_numbers_agree(q, answer):
    """1e308 divided by a small factor overflows; the self-check must not crash on it."""
    assert_agree(q, answer, diagnosis=False)


# --- leaks ----------------------------------------------------------------------------------------

def public_text(q: Question) -> str:
    """The fingerprint as JSON, hashes blanked out (their hex digits would match any short number)."""
    return re.sub(r'"[0-9a-f]{12}"', '"#"', json.dumps(PRINTS[q.qid]))


def contains_number(text: str, number: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(number) + r"(?![\w])", text) is not None


def test_public_text_blanks_only_hashes():
    assert contains_number('{"a": 0.00101}', "0.00101") and not contains_number('{"a": 10.001014}', "0.00101")
    assert '"#"' in public_text(NUMBERS[0]) and "ch99-t4-time" not in public_text(NUMBERS[0])


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
def test_formula_print_does_not_contain_the_reference(q):
    text = public_text(q)
    for printed in {sp.sstr(q.reference), str(q.reference), to_text(q.reference), sp.srepr(q.reference)}:
        assert printed not in text
    fp = PRINTS[q.qid]
    at = eq.evaluator(q.reference, q.names)
    for point in fp["at"]:
        value = at({k: Fraction(v) for k, v in point.items()})
        for digits in (3, 4, 6, 9):
            assert not contains_number(text, f"{float(value):.{digits}g}")


@pytest.mark.parametrize("q", NUMBERS, ids=lambda q: q.qid)
def test_number_print_does_not_contain_the_reference(q):
    text = public_text(q)
    ref = float(q.reference)
    candidates = {repr(ref), str(ref), f"{ref:e}", f"{ref:g}"}
    for digits in (3, 4):
        candidates |= {f"{ref:.{digits}g}", f"{ref:.{digits - 1}e}", f"{ref:.{digits}e}"}
    candidates |= {c.split("e")[0] for c in candidates if "e" in c}  # the mantissa alone
    for number in candidates:
        assert not contains_number(text, number), number
    for slip in q.slips:
        assert not contains_number(text, repr(float(slip.answer)))


@pytest.mark.parametrize("q", CHOICES, ids=lambda q: q.qid)
def test_choice_print_hashes_the_answer(q):
    fp = PRINTS[q.qid]
    assert fp["answer"] not in q.options and q.reference not in json.dumps(fp["answer"])
    assert all(hint_key not in q.options for hint_key in fp["hints"])


def test_fingerprints_are_salted_per_question():
    """The same reference under two ids gives unrelated hashes: one cannot be looked up from another."""
    a, b = NUMBERS[0], Number(qid="ch99-t8-time", points=1, prompt="p", reference=1.01e-3, unit="s",
                              slips=(Slip(1.01, "unit:1000"),))
    assert fingerprint.make(a)["targets"]["ref"][0][2] != fingerprint.make(b)["targets"]["ref"][0][2]


# --- the answer record ----------------------------------------------------------------------------

ENCODED = [
    ("formula", 2 * B * D, "2*B*D"),
    ("formula", sp.E * B, "exp(1)*B"),  # not "E*B": a declared E would read it back as a symbol
    ("formula", np.float64(2.5), "2.5"),  # numpy 2 prints np.float64(2.5)
    ("formula", 10**5000, {"invalid": "too_large", "detail": "a number above 1e40"}),
    ("formula", None, {"invalid": "empty", "detail": ""}),
    ("number", 3, 3.0),
    ("number", np.float64(2.5), 2.5),
    ("number", float("nan"), "nan"),
    ("number", 10**5000, {"invalid": "too_large", "detail": "a whole number of about 5,001 digits"}),  # no float
    ("choice", "memory", "memory"),
    ("choice", 3, 3.0),  # an option may be a number
    ("choice", ["memory"], {"invalid": "wrong_type", "detail": "a list of one value"}),  # in words, with its fix
]


@pytest.mark.parametrize(("kind", "answer", "encoded"), ENCODED, ids=[f"{e[0]}-{i}" for i, e in enumerate(ENCODED)])
def test_encode_scalar(kind, answer, encoded):
    got = record.encode_scalar(kind, answer)
    assert got == encoded and type(got) is type(encoded)
    json.dumps(got)


def test_read_takes_the_last_well_formed_record():
    def out(rec: object) -> dict:
        return {"output_type": "display_data", "data": {record.MIME: rec}}

    first, last = record.make("ch99-t1-x", "number", 1.0), record.make("ch99-t1-x", "number", 2.0)
    outputs = [out(first), out(json.dumps(last)), out(record.make("ch99-t2-y", "number", 3.0)),
               out({**first, "format": 99}), out("{not json"), out("x" * (record.MAX_RECORD_BYTES + 1)),
               {"data": "not a dict"}, "not a dict"]
    assert record.read(outputs, "ch99-t1-x") == last
    assert record.read(outputs[2:], "ch99-t1-x") is None
