"""How formula and number answers are read, as a fair-reading review found them wanting: each test holds
for the grader and the self-check alike (one judge), over every question of every chapter where the
weakness is a class, not one example.

- Decimals: ``2.0`` or ``0.5`` in a formula is no rounding, and a formula with a rounded decimal in it
  still has to get its small terms right.
- Symbols: which symbols an answer must use comes from the reference's values, after cancellation.
- Ranges: a factor slip is named by the simplest factor, and an answer inside a range is never "edge".
- Units: every spelling the prompts use, and the common ones, are read.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import sympy as sp

from autograder import kinds
from autograder.checks import judge
from autograder.formula import Invalid, Parsed, parse_formula
from autograder.kinds.common import WITHHELD
from autograder.numbers import UNITS, ParsedNumber, parse_number, unit_examples
from autograder.questions import Formula, Number, Question, chapter_names, load_chapter
from autograder.verdict import Verdict
from tests.chapter_checks import printed, recorded

QUESTIONS = {q.qid: q for name in chapter_names() for q in load_chapter(name).questions}
FORMULAS = [q for q in QUESTIONS.values() if isinstance(q, Formula)]


def both(q: Question, answer: Any) -> tuple[Verdict, Verdict]:
    """The grader's verdict (on the record as it travels, through JSON) and the self-check's."""
    rec = recorded(q, answer)
    return judge(q, json.loads(json.dumps(rec))), kinds.selfcheck_live(printed(q), q.qid, answer, rec)


def diagnoses(q: Question, answer: Any) -> tuple[str, str]:
    graded, checked = both(q, answer)
    return ("correct" if graded.ok else graded.diagnosis), ("correct" if checked.ok else checked.diagnosis)


# --- decimals in formulas ---------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["2.0*B", "0.5*B", "1.5*B", "B + 0.0", "2.*B", "2e0*B", "1e9*B", "0.25*B",
                                  "2.50*B", "16.0*B", "B/4.0"])
def test_a_decimal_that_is_a_simple_number_is_exact(text):
    p = parse_formula(text, ("B",))
    assert isinstance(p, Parsed) and not p.approximate, text


@pytest.mark.parametrize("text", ["1.97e14*B", "0.333*B", "6.25e10*B", "B/3.14", "0.67*B", "1.002*B"])
def test_a_rounded_decimal_makes_a_formula_approximate(text):
    p = parse_formula(text, ("B",))
    assert isinstance(p, Parsed) and p.approximate, text


def spellings(answer: Any) -> list[Any]:
    """The same formula with its numbers spelt as decimals, and with a rounding in it: a formula with
    a term too many or too few stays wrong whatever its numbers look like."""
    e = sp.sympify(answer)
    text = str(e)
    return [e * sp.Float(1.0), e + sp.Float(0.0), f"({text}) + 0*1.0", f"1.0*({text})", f"({text})*1.001",
            f"({text}) + 0*1.97e14", e.xreplace({n: sp.Float(n) for n in e.atoms(sp.Integer)})]


LOWER_TERMS = [(q, s) for q in FORMULAS for s in q.slips if s.diagnosis == "lower_terms"]


@pytest.mark.parametrize(("q", "slip"), LOWER_TERMS, ids=[f"{q.qid}-{i}" for i, (q, _) in enumerate(LOWER_TERMS)])
def test_a_missing_term_is_caught_whatever_the_decimals(q, slip):
    for answer in spellings(slip.answer):
        graded, checked = diagnoses(q, answer)
        assert graded == checked == "lower_terms", (answer, graded, checked)


REVIEW_SLIPS = [("ch04-q1-layer-params", "3*D*F + 2.0*D*H*(K + N)"),
                ("ch04-q1-layer-params", "3*D*F + 2*D*H*(K + N) + 0*1.0"),
                ("ch05-q1-params-formula", "2*D*V + L*(3*D*F + 4*D*H*N + 2.0*D)"),
                ("ch05-q1-params-formula", "2*D*V + L*(3*D*F + 4*D*H*N + 2*D)*1.001"),
                ("ch07-q1-params-formula", "1.0*D*V + L*(3*D*F + 2*D*H*(K+N) + 2*D)")]


@pytest.mark.parametrize(("qid", "answer"), REVIEW_SLIPS)
def test_a_term_too_many_is_caught_whatever_the_decimals(qid, answer):
    graded, checked = diagnoses(QUESTIONS[qid], answer)
    assert graded == checked == "lower_terms", (graded, checked)


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
def test_every_reference_with_decimals_is_right(q):
    """The reference with its numbers as decimals, rounded to 3 and 4 figures, or times 1.001: right."""
    r = sp.sympify(q.reference)
    for answer in (sp.N(r, 3), sp.N(r, 4), r.evalf(), 1.001 * r, sp.Float(0.999) * r):
        graded, checked = both(q, answer)
        assert graded.ok and (checked.ok or checked.diagnosis == "edge"), (answer, graded.diagnosis, checked.diagnosis)


# --- which symbols an answer must use ----------------------------------------------------------------

def test_a_symbol_that_cancels_is_not_required():
    """B cancels in 2*B*D*F/(B*D*F + B*D + B*F): neither the hint nor a wrong answer may ask for it."""
    q = QUESTIONS["ch01-q4-intensity"]
    assert "B" not in kinds.hint(q) and "D and F" in kinds.hint(q)
    assert diagnoses(q, "2*D*F/(D*F + D + F)") == ("correct", "correct")
    graded, checked = both(q, "2*D*F/(D*F + 2*D + F)")
    assert graded.diagnosis == checked.diagnosis and "missing_symbol" not in graded.diagnosis
    assert graded.message == checked.message and "depends on B" not in graded.message


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
def test_the_symbols_required_are_those_of_the_simplified_reference(q):
    """For every formula question: the hint names the symbols left after simplification, the answer in
    that simplified form is right, and dropping any of them is ``missing_symbol`` in both judges."""
    simplified = sp.simplify(sp.sympify(q.reference))
    left = [n for n in q.names if n in {s.name for s in simplified.free_symbols}]
    hint = kinds.hint(q)
    for n in q.names:
        assert (f" {n}" in hint.replace(",", " ")) == (n in left), (n, hint, left)
    assert diagnoses(q, simplified) == ("correct", "correct")
    for n in left:
        without = simplified.xreplace({s: 1 for s in simplified.free_symbols if s.name == n})
        graded, checked = diagnoses(q, without)
        assert graded == checked and graded.startswith("missing_symbol:") and n in graded.split(":")[1].split(","), (
            n, graded, checked)


# --- number questions with a range ---------------------------------------------------------------------

RANGES = [q for q in QUESTIONS.values() if isinstance(q, Number) and q.tolerance.is_range]


@pytest.mark.parametrize("q", RANGES, ids=lambda q: q.qid)
def test_a_factor_off_a_range_is_named_by_that_factor(q):
    """Twice, half, 3 and 8 times the reference of a range question are ``ratio:2`` and so on, as they are
    in a question with a relative tolerance; a bare value 1000 times too large is a unit slip where the unit 1000
    times smaller exists (ms for s), a factor where it does not (days, bytes)."""
    r = float(q.reference)
    lo, hi = q.tolerance.bounds(r)
    for k, code in ((2, "ratio:2"), (0.5, "ratio:1/2"), (8, "ratio:8"), (3, "ratio:3"), (0.25, "ratio:1/4")):
        if not lo <= r * k <= hi:  # ch04-q4's range is the book's 240 to 480: twice 240 is right
            # or withheld by both, where the answer is a simple number a guess could reach (kinds/number.py)
            assert diagnoses(q, r * k) in ((code, code), (WITHHELD, WITHHELD)), (k, diagnoses(q, r * k))
    if q.unit:
        dimension, scale = UNITS[q.unit]
        code = "unit:1000" if (dimension, scale / 1000) in {(d, s) for d, s in UNITS.values()} else "ratio:1000"
        assert diagnoses(q, r * 1000) in ((code, code), (WITHHELD, WITHHELD))


def inside(q: Number) -> list[float]:
    r = float(q.reference)
    lo, hi = q.tolerance.bounds(r)
    values = [r, lo, hi] + [lo * (hi / lo) ** t for t in (0.003, 0.01, 0.3, 0.5, 0.7, 0.99, 0.997)]
    values += [float(f"{r:.{n - 1}e}") for n in range(3, 9)]
    return [v for v in values if lo <= v <= hi]


@pytest.mark.parametrize("q", RANGES, ids=lambda q: q.qid)
def test_a_value_inside_a_range_is_never_at_the_edge(q):
    """The reference to any number of figures, the ends of the range and values between them: right in
    both judges, never "at the edge" in the self-check (ch02-q6's range ends 0.5% below its reference)."""
    for v in inside(q):
        assert diagnoses(q, v) == ("correct", "correct"), (v, diagnoses(q, v))


# --- units -------------------------------------------------------------------------------------------

UNIT_SPELLINGS = [  # (answer, the question's unit, its value in that unit)
    ("0.00101 seconds", "s", 1.01e-3), ("1 second", "ms", 1000), ("2 secs", "s", 2), ("3 msec", "s", 3e-3),
    ("1.01 milliseconds", "s", 1.01e-3), ("1 millisecond", "us", 1000), ("5 minutes", "s", 300),
    ("1 minute", "s", 60), ("2 mins", "s", 120), ("1 hour", "s", 3600), ("1 hr", "s", 3600), ("2 hrs", "s", 7200),
    ("16.9 day", "days", 16.9), ("1 day", "s", 86400), ("2 weeks", "days", 14), ("1 week", "days", 7),
    ("4096 byte", "B", 4096), ("1 GBps", "B/s", 1e9), ("3 GB/sec", "B/s", 3e9), ("400 Gb/s", "B/s", 50e9),
    ("25 percent", "", 0.25), ("5e14 flops", "FLOP", 5e14), ("5 tflops", "FLOP/s", 5e12),
    ("49.2 TFLOPS", "FLOP/s", 49.2e12), ("49.2 Tflops", "FLOP", 49.2e12), ("197 TFLOPS", "FLOP", 197e12),
    ("0.5 FLOPs/byte", "", 0.5), ("295 FLOP/B", "", 295), ("295 flops/byte", "", 295), ("295 FLOPs per byte", "", 295),
    ("240 FLOPs/byte", "FLOP/B", 240), ("240", "FLOP/B", 240), ("1.5 ms", "s", 1.5e-3), ("16 GiB", "B", 2.0**34),
]


@pytest.mark.parametrize(("answer", "unit", "value"), UNIT_SPELLINGS)
def test_common_unit_spellings_are_read(answer, unit, value):
    p = parse_number(answer, unit)
    assert isinstance(p, ParsedNumber) and p.value == pytest.approx(value, rel=1e-12), p


REFUSED_UNITS = [("1 parsec", "s", "unknown_unit"), ("3 GB", "s", "unit_dimension"), ("3 GHz", "s", "unit_dimension"),
                 ("0.5 FLOPs/byte", "s", "unit_dimension"), ("2 weeks", "B", "unit_dimension"),
                 ("25 percent", "s", "unit_dimension"), ("3 TFLOPs", "B/s", "unit_dimension"),
                 ("5 FLOPs", "FLOP/s", "unit_dimension")]  # FLOPs is the course's count, FLOP/s its rate


@pytest.mark.parametrize(("answer", "unit", "code"), REFUSED_UNITS)
def test_a_unit_of_another_kind_is_still_refused(answer, unit, code):
    p = parse_number(answer, unit)
    assert isinstance(p, Invalid) and p.code == code, p


INTENSITIES = [q for q in QUESTIONS.values() if isinstance(q, Number) and re.search(
    r"intensity|FLOPs per byte", q.prompt, re.IGNORECASE)]


@pytest.mark.parametrize("q", INTENSITIES, ids=lambda q: q.qid)
@pytest.mark.parametrize("spelling", ["FLOPs/byte", "FLOP/B", "flops/byte", "FLOPs per byte"])
def test_an_intensity_may_carry_its_unit(q, spelling):
    """The prompts say "FLOPs per byte": an intensity written with that unit is read as the plain number."""
    answer = f"{float(q.reference):.6g} {spelling}"
    assert diagnoses(q, answer) == ("correct", "correct")


@pytest.mark.parametrize("q", [q for q in QUESTIONS.values() if isinstance(q, Number) and q.unit],
                         ids=lambda q: q.qid)
def test_an_unknown_unit_names_units_of_the_question_s_own_kind(q):
    """The sentence on an unknown unit starts with the question's own unit, and names only units of its kind."""
    graded, checked = both(q, "3 furlongs")
    assert graded.diagnosis == checked.diagnosis == "unknown_unit" and graded.message == checked.message
    named = unit_examples(q.unit).split(", ")
    assert named[0] == q.unit and f"use {q.unit}," in graded.message or f"use {q.unit}." in graded.message
    assert all(UNITS[u][0] == UNITS[q.unit][0] for u in named), named


UNIT_LIKE = re.compile(r"[kKMGTPE]?i?(?:B|b|bytes?|FLOPs?|FLOPS|flops)(?:/s|/sec|ps)?|[mµμun]?s|sec|min|h|hours?|days?"
                       r"|weeks?|%|FLOPs? per byte|FLOPs?/(?:B|byte)")
NOT_ANSWER_UNITS = {"GHz"}  # a clock rate: an input of some prompts, never what they ask for


def test_every_unit_the_prompts_use_is_read():
    """A unit written after a number in any prompt ("400 Gb/s", "FLOPs per byte") is read where its kind fits."""
    words = set()
    for q in QUESTIONS.values():
        if isinstance(q, Number):
            words |= set(re.findall(r"(?<![\w.])[0-9][0-9.]*(?:e[-+]?[0-9]+)?\s?([A-Za-zµμ%][\w/%µμ]*(?: per byte)?)",
                                    q.prompt))
            words |= set(re.findall(r"FLOPs? per byte", q.prompt))
    units = sorted(w for w in words if UNIT_LIKE.fullmatch(w))
    assert "FLOPs per byte" in units and "Gb/s" in units, units
    unread = [w for w in units if not any(isinstance(parse_number(f"3 {w}", u), ParsedNumber) for u in UNITS)]
    assert not unread, unread


@pytest.mark.parametrize("answer", [0.16667, 0.1666, 0.16666667, 0.166, 1 / 6, "1/6", "166.7 ms", "0.1667 s"])
def test_the_review_s_edges_are_ticked(answer):
    """ch02-q6's range ends 0.5% below its reference, closer than one bucket of the range."""
    assert diagnoses(QUESTIONS["ch02-q6-total"], answer) == ("correct", "correct")
