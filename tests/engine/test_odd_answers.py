"""Odd answers to number and function questions, through both judges (the grader on the record as it travels, the
self-check on the live answer): a sympy expression of numbers alone is read by its value, an infinite number is
told so, text is read one way (a run of blanks is one blank) by both, and a student's object that raises while it
is read (an exception that cannot be printed, a value whose ``shape``, ``__len__`` or ``__iter__`` raises) costs
only its own test case."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import sympy as sp

from autograder import kinds, record
from autograder.checks import judge
from autograder.grading.judge import _canonical
from autograder.numbers import ParsedNumber, Tolerance, parse_number
from autograder.questions import Number, Slip, chapter_names, load_chapter
from autograder.symbols import symbol
from autograder.verdict import Status
from course import as_number
from tests.chapter_checks import both_judges, printed, recorded


def _question(qid: str):
    return next(q for name in chapter_names() if name.startswith(qid[:4]) for q in load_chapter(name).questions
                if q.qid == qid)


def _number(reference: float) -> Number:
    return Number(qid="ch99-t1-odd", points=1, prompt="A number.", reference=reference, unit="",
                  tolerance=Tolerance.figures(), slips=(Slip(2 * reference, "ratio:2"),))


# --- a sympy expression of numbers is a number --------------------------------------------------------

B, M_X, M_Y, N, F = (symbol(n) for n in ("B", "M_X", "M_Y", "N", "F"))
X_OPT = sp.sqrt(B * M_X * N / (F * M_Y)).subs({B: 49152, M_X: 2, M_Y: 1, N: 64, F: 32768})  # 8*sqrt(3)


@pytest.mark.parametrize(("answer", "reference"), [
    (X_OPT, 8 * math.sqrt(3)),
    (8 * sp.sqrt(3), 8 * math.sqrt(3)),
    (sp.log(4096) / sp.log(2), 12.0),
    (sp.Integer(1) * sp.pi * 76.47, 76.47 * math.pi),
    (sp.sqrt(2) * 170, 170 * math.sqrt(2)),
], ids=["subs", "8sqrt3", "log-ratio", "pi", "sqrt2"])
def test_a_sympy_expression_of_numbers_is_read_by_its_value(answer, reference):
    q = _number(reference)
    assert record.encode_scalar("number", answer) == pytest.approx(reference, rel=1e-15)
    graded, checked = both_judges(q, answer)
    assert graded.status is checked.status is Status.CORRECT, (graded, checked)
    got = parse_number(answer, "")
    assert isinstance(got, ParsedNumber) and got.value == pytest.approx(reference, rel=1e-15)
    assert as_number(answer) == pytest.approx(reference, rel=1e-15)


def test_the_subs_value_of_a_chapter_question_is_right():
    graded, checked = both_judges(_question("ch05-e9-x-opt-value"), X_OPT)
    assert graded.ok and checked.ok, (graded, checked)


def test_a_wrong_sympy_number_is_diagnosed_like_a_float():
    q = _number(8 * math.sqrt(3))
    graded, checked = both_judges(q, 16 * sp.sqrt(3))
    assert graded.diagnosis == checked.diagnosis == "ratio:2", (graded, checked)


def test_a_complex_sympy_number_is_no_number_in_both_judges():
    graded, checked = both_judges(_number(3.0), 3 * sp.sqrt(-2))
    assert (graded.status, graded.diagnosis) == (checked.status, checked.diagnosis) == (Status.INVALID, "wrong_type")
    assert graded.message == checked.message and "complex" in graded.message


@pytest.mark.parametrize("answer", ["8*sqrt(3)", "76.47*pi", "log(4096)/log(2)", "sqrt(2)",
                                    sp.floor(sp.exp(sp.exp(100)), evaluate=False)],
                         ids=["sqrt", "pi", "log", "sqrt-alone", "never-ends"])
def test_a_calculation_that_is_not_computed_is_told_to_compute_it(answer):
    """Text with a function or pi in it, and an expression whose value the kernel cannot find within its bound:
    the sentence says to compute the value, not to put in values of symbols it does not have."""
    graded, checked = both_judges(_number(13.86), answer)
    assert graded.diagnosis == checked.diagnosis == "number_expression", (graded, checked)
    assert graded.message == checked.message and "float(" in graded.message and ".subs" not in graded.message


def test_a_formula_for_a_number_still_names_its_symbols():
    graded, checked = both_judges(_number(13.86), 8 * sp.sqrt(B))
    assert graded.diagnosis == checked.diagnosis == "formula_for_number" and "B" in graded.message


# --- an infinite number -------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [np.float64("inf"), float("inf"), -math.inf, float("nan"),
                                    np.float32("nan"), sp.oo, sp.zoo, "inf", "-Infinity", "nan", "inf ms", "1e400"],
                         ids=lambda a: repr(a)[:20])
def test_an_infinite_number_gets_the_sentence_for_one(answer):
    graded, checked = both_judges(_number(1.5), answer)
    assert graded.diagnosis == checked.diagnosis == "not_finite", (graded, checked)
    assert graded.message == checked.message == both_judges(_number(1.5), "1e400")[0].message


# --- one reading of text --------------------------------------------------------------------------------

SPACED = {
    "ch01-e3-critical-batch": ["240.24 FLOPs  per byte", "240.24 FLOPs per\tbyte", "240.24" + " " * 200,
                               "240.24\t\t" + "\t" * 200 + "FLOP/byte", "2\t40.24", "(1970\t/\t8.2)" + " " * 195,
                               " 241  ", "2  *  120.12", "24O.24  ms", "1e400  "],
    "ch01-e3-intensity": ["2*B*D*F/(2*B*D + 2*B*F + 2*D*F)" + " " * 1990, "2*B*D*F / (2*B*D +\t2*B*F + 2*D*F)",
                          "B  D", "2 *\t\tB"],
    "ch01-e2-bound": ["memory  ", "\tmemory\t", "compute   bound", "com  pute"],
}


@pytest.mark.parametrize(("qid", "answer"), [(qid, a) for qid, answers in SPACED.items() for a in answers],
                         ids=lambda x: repr(x)[:30])
def test_the_self_check_and_the_grader_read_blanks_alike(qid, answer):
    q = _question(qid)
    checked = kinds.selfcheck_live(printed(q), q.qid, answer)
    rec = json.loads(json.dumps(recorded(q, answer)))
    for graded in (judge(q, _canonical(q, rec)), judge(q, rec)):
        assert (graded.status, graded.diagnosis, graded.message) == (checked.status, checked.diagnosis,
                                                                     checked.message), (graded, checked)


@pytest.mark.parametrize("answer", ["240.24 FLOPs  per byte", "240.24 FLOPs per\tbyte", "240.24" + " " * 200])
def test_respaced_right_answers_are_right_in_both(answer):
    graded, checked = both_judges(_question("ch01-e3-critical-batch"), answer)
    assert graded.ok and checked.ok, (graded, checked)


# --- a function's odd objects cost only their own case ------------------------------------------------

class Unprintable(Exception):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def __str__(self):
        return f"bad layer {self.lyr}"  # AttributeError: the typo a student makes


class NoShape:
    @property
    def shape(self):
        raise ValueError("no shape")

    def __float__(self):
        return 1.0


class NoLength(list):
    def __len__(self):
        raise ValueError("no length")


class NoIteration(list):
    def __iter__(self):
        raise ValueError("no iteration")


class NoFloat:
    shape = ()

    def item(self):
        raise ValueError("no item")

    def __float__(self):
        raise ValueError("no float")

    def __repr__(self):
        raise ValueError("no repr")


class NoArray:
    shape = (3,)

    def reshape(self, *args):
        raise ValueError("no reshape")

    def __array__(self, *args, **kwargs):
        raise ValueError("no array")


class NoClass:
    @property
    def __class__(self):  # isinstance() asks for it
        raise ValueError("no class")


class NoTupleLength(tuple):
    def __len__(self):
        raise ValueError("no length")

    def __iter__(self):
        raise ValueError("no iteration")


def _raise(e):
    raise e


ODD = {
    "unprintable": lambda kw: _raise(Unprintable(1)),
    "shape": lambda kw: NoShape(),
    "len": lambda kw: NoLength([1.0]),
    "iter": lambda kw: NoIteration([1.0, 2.0]),
    "float": lambda kw: NoFloat(),
    "array": lambda kw: NoArray(),
    "class": lambda kw: NoClass(),
    "tuple": lambda kw: NoTupleLength((1.0, 2.0)),
}


def _odd_first(q, odd):
    """The model answer, except on its first call, where it returns (or raises) the odd object."""
    calls = [0]

    def f(*args, **kwargs):
        calls[0] += 1
        return odd(kwargs) if calls[0] == 1 else q.solution(*args, **kwargs)
    return f


@pytest.mark.parametrize("odd", list(ODD), ids=list(ODD))
@pytest.mark.parametrize("qid", ["ch04-cx5-param-count", "ch02-cx2-systolic"])
def test_an_odd_object_costs_only_its_own_case(qid, odd):
    q = _question(qid)
    share = (len(q.probes) - 1) / len(q.probes)
    checked = kinds.selfcheck_live(printed(q), q.qid, _odd_first(q, ODD[odd]))
    public = judge(q, json.loads(json.dumps(recorded(q, _odd_first(q, ODD[odd])))))
    seed = "seed-1"
    drawn = kinds.encode(printed(q), _odd_first(q, ODD[odd]), kinds.function.drawn_probes(q, seed))
    graded = judge(q, json.loads(json.dumps(drawn)), seed)
    for v in (checked, public, graded):
        assert v.status is Status.PARTIAL and v.score == pytest.approx(share), v
        assert "Traceback" not in v.message
    assert checked.message == public.message
    if odd == "unprintable":
        assert "Unprintable (its message could not be printed: AttributeError" in graded.message, graded.message


def test_what_a_function_raises_is_recorded_in_one_entry_per_case():
    def f(**kw):
        raise Unprintable(kw)
    out = record.encode_outputs(f, [((), {"L": 1}), ((), {"L": 2})], ["number"])
    assert out == [{"error": "Unprintable (its message could not be printed: AttributeError in its __str__)"}] * 2


@pytest.mark.parametrize("odd", list(ODD), ids=list(ODD))
@pytest.mark.parametrize("kind", ["number", "formula", "choice", "array"])
def test_encoding_an_odd_object_never_raises(kind, odd):
    if odd == "unprintable":
        return
    odd = ODD[odd]({})
    encoded = record._encode_item(kind, odd)
    json.dumps(encoded)
    scalar = record.encode_scalar("number" if kind == "array" else kind, odd)
    assert isinstance(scalar, dict) and scalar["invalid"] == "wrong_type", scalar


def test_a_whole_number_beyond_any_float_is_too_large_not_infinite():
    """10**5000 was "infinite or undefined: check for a division by zero", while 10**50 read as a number, and the
    grader's report showed the record's JSON as the student's answer."""
    from autograder.grading.collect import Collected
    from autograder.grading.stages import _answer_text
    from autograder.messages import phrase
    from autograder.record import encode_scalar

    for n in (10**5000, -(10**400)):
        rec = encode_scalar("number", n)
        assert rec["invalid"] == "too_large" and "digits" in rec["detail"], rec
        assert "infinite" not in phrase("too_large", detail=rec["detail"])
        assert _answer_text(Collected(rec, kind="number")).startswith("(not read: a whole number of about ")
