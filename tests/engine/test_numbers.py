"""Numeric answers: units, fair reading (arithmetic, percentages, separators), fair rounding (3
significant figures, or an exact count), tolerance edges, the diagnosis of a wrong number, hostile input.

Verdicts go through ``checks.judge`` on a Number record, the grader's public door, so the tables
state what a student meets. Each fairness rule has one table of answers that must pass and near
misses that must not.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import sympy as sp

from autograder.checks import judge
from autograder.formula import Invalid
from autograder.kinds.common import WITHHELD
from autograder.messages import phrase_invalid
from autograder.numbers import (
    FIGURES,
    ParsedNumber,
    Tolerance,
    parse_number,
    round_figures,
    unit_dimension,
    unit_examples,
)
from autograder.questions import Accept, AuthoringError, Number, Slip
from autograder.verdict import Status, Verdict


def number(reference: float, unit: str = "", tolerance: Tolerance | None = None, exact: bool = False,
           accept: tuple[Accept, ...] = (), slips: tuple[Slip, ...] = ()) -> Number:
    """A Number record as a chapter would write it (a slip is required; twice the reference will do)."""
    return Number(qid="ch99-t1-number", points=1, prompt="How many (exact)?" if exact else "A number.",
                  reference=reference, unit=unit, tolerance=tolerance or Tolerance(), exact=exact, accept=accept,
                  slips=slips or (Slip(2 * reference, "ratio:2"),), negative=reference < 0)


def verdict(reference: float, unit: str, answer: object, tolerance: Tolerance | None = None,
            exact: bool = False) -> Verdict:
    return judge(number(reference, unit, tolerance, exact), answer)


UNIT_CASES = [
    ("1.2 ms", "s", 1.2e-3, "ms"),
    ("1.2ms", "s", 1.2e-3, "ms"),
    ("16 GiB", "B", 16 * 2**30, "GiB"),
    ("16 GB", "B", 16e9, "GB"),
    ("3 TB/s", "B/s", 3e12, "TB/s"),
    ("3TB/s", "B/s", 3e12, "TB/s"),
    ("3 TB/s", "GB/s", 3e3, "TB/s"),
    ("2 us", "ms", 2e-3, "us"),
    ("1.5 µs", "s", 1.5e-6, "µs"),
    ("1\u00a0ms", "s", 1e-3, "ms"),  # a no-break space, as some keyboards type it
    ("5 min", "s", 300.0, "min"),
    ("197 TFLOP/s", "FLOP/s", 1.97e14, "TFLOP/s"),
    ("197 TFLOPS", "FLOP/s", 1.97e14, "TFLOPS"),
    ("240 FLOPs/byte", "FLOP/B", 240.0, "FLOPs/byte"),
    ("1e3 s", "ms", 1e6, "s"),
    ("1e3s", "ms", 1e6, "s"),
    ("2e3B", "B", 2e3, "B"),  # the exponent's e is not a unit
    ("5. ms", "s", 5e-3, "ms"),
    (" 1.5 ", "s", 1.5, None),
    ("-3 ms", "s", -3e-3, "ms"),
    (".5", "", 0.5, None),
    ("5.", "", 5.0, None),
    (0.5, "s", 0.5, None),
    (7, "B", 7.0, None),
    # scientific notation written by hand, standing alone: one number
    ("1.5 x 10^-3", "s", 1.5e-3, None),
    ("1.5×10⁻³ s", "s", 1.5e-3, "s"),
    ("1.5×10⁻³s", "s", 1.5e-3, "s"),
    ("1.5 · 10^(−3) ms", "s", 1.5e-6, "ms"),
    ("-2.4 X 10**+2", "", -240.0, None),
    ("1.5 * 10^3", "", 1.5e3, None),  # ^ after a times-ten is its power, never Python's xor
    ("1.5e−3", "s", 1.5e-3, None),  # a typographic minus in an exponent
    # years: 365.25 days each (a Julian year, the mean over leap years)
    ("435 years", "years", 435.0, "years"),
    ("1 year", "days", 365.25, "year"),
    ("2 yr", "days", 730.5, "yr"),
    ("2yrs", "s", 2 * 365.25 * 86400, "yrs"),
    ("730.5 days", "years", 2.0, "days"),
]


@pytest.mark.parametrize(("answer", "unit", "value", "given"), UNIT_CASES)
def test_units_convert_to_the_question_unit(answer, unit, value, given):
    got = parse_number(answer, unit)
    assert isinstance(got, ParsedNumber), got
    assert got.value == pytest.approx(value, rel=1e-12) and got.unit_given == given


INVALID = {
    "unit_dimension": [("3 TB/s", "s"), ("1 ms", "B"), ("16 GiB", "B/s"), ("5 FLOPs", "FLOP/s"), ("2 s", ""),
                       ("25%", "s"), ("2*31.27e9 B/s", "B")],
    "unknown_unit": [("3 parsecs", "s"), ("1.2 MS", "s"), ("5 gb", "B"), ("0x10", "s"), ("2 q", ""),
                     ("1 ms ms", "s"), ("2*31.27e9 GB/ss", "B/s"), ("1e+", "")],
    # a unit ends the answer; "4/2 ms" reads, and the sentence says to compute first
    "unit_arithmetic": [("4 ms / 2", "s"), ("244 us / 224 us", "")],
    # inside a calculation a times-ten is not one number: "2 / 1.5 x 10^3" is 2/1500, or 2/1.5 times 1000?
    "scientific_notation": [("2 / 1.5 x 10^3", ""), ("1 + 1.5×10⁻³ s", "s"), ("(1.5 x 10^3)", ""),
                            ("2*1.5*10^3", "")],
    "formula_for_number": [("2*B", "s"), ("4*(N + 1)", ""), ("2*sqrt(B)", "")],
    # a calculation of numbers with a function or pi in it, as text: compute it first
    "number_expression": [("8*sqrt(3)", ""), ("76.47*pi", ""), ("log(4096)/log(2)", ""), ("sqrt(2)", ""),
                          ("2 pi", "")],
    "count_word": [("240 tokens", "")],
    "scale_suffix": [("13B", ""), ("70M", ""), ("13 bn", ""), ("$1.2M", ""), ("1.2M dollars", "")],
    # an amount of money is a plain number, in US dollars (their sign or name is read on a plain-number question):
    # another currency's sign or name is left out, as a dollar sign is on a question with a unit
    "currency": [("1.2 euros", ""), ("€20", ""), ("20 EUR", ""), ("£5", ""), ("GBP 5", ""), ("$5", "s"),
                 ("5 USD", "B")],
    "separator": [("1,000", "s"), ("1_000", "s"), ("1,024", ""), ("1 024", ""), ("1'024", ""), ("1,5 ms", "s"),
                  ("1, 2", "")],
    "not_a_number": [("abc", "s"), ("ms", "s"), ("", "s"), ("()", ""),
                     ("١٢٣", "")],  # digits other than 0-9 are not read, though Python's float() would
    # a number that is not finite, however it is written: the same sentence as "1e999"
    "not_finite": [("1e999", "s"), ("-1e999", ""), ("1e308 TB/s", "B/s"), ("1 / 0", ""), ("1/0", ""),
                   ("2*1e999", ""), ("(1-1)**-1", ""), ("3 x 10^400", ""), ("nan", "s"), ("inf", "s"), ("-inf", "s"),
                   ("Infinity", "s"), ("inf ms", "s"), (float("nan"), "s"), (float("inf"), "s"), (-math.inf, ""),
                   (np.float64("inf"), ""), (sp.oo, ""), (sp.nan, "")],
    "complex": [("(-8)**(1/3)", ""), ("(-1)**0.5", "")],
    "too_long": [("1" * 300, "s"), ("x" * 10**6, "s"), ("-" * 150 + "1", "")],
    "too_large": [(10**5000, "s"), ("10**100", ""), ("9**9**9", ""), ("1e30*1e30", "")],
    "syntax": [("1.2.3", ""), ("2*", ""), ("(2", "")],
    "implicit_multiplication": [("(2)(3)", "")],
    "caret_power": [("2^10", "")],
    "unicode_operator": [("2×3", ""), ("−5 ms", "s")],
    "empty": [(None, "s"), (Ellipsis, "")],
    "wrong_type": [(True, ""), (False, "s"), ([1.0], "s"), ({"a": 1}, "s"), (object(), "s"), (1j, "s")],
}
INVALID_CASES = [pytest.param(code, answer, unit, id=f"{code}-{i}") for code, cases in INVALID.items()
                 for i, (answer, unit) in enumerate(cases)]


@pytest.mark.parametrize(("code", "answer", "unit"), INVALID_CASES)
def test_invalid(code, answer, unit):
    got = parse_number(answer, unit)
    assert isinstance(got, Invalid) and got.code == code, got
    v = verdict(1.0, unit, answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, code)


def test_a_currency_is_named_with_the_fix_and_no_answer():
    for answer, named in (("€1.2M", "€"), ("1.2M euros", "euros"), ("GBP 5", "GBP")):
        got = parse_number(answer, "")
        sentence = phrase_invalid(got)
        assert f"'{named}'" in sentence and "plain number" in sentence and "1.2" not in sentence, sentence


def test_a_separator_is_shown_where_it_is():
    got = parse_number("1,024 GB", "B")
    assert isinstance(got, Invalid) and got.offset == 1 and got.detail == ","
    sentence = phrase_invalid(got)
    assert "1024 or 1.024" in sentence and sentence.endswith("1,024 GB\n     ^")


def test_unknown_question_unit_is_an_authoring_error():
    with pytest.raises(ValueError, match="unknown unit"):
        unit_dimension("parsecs")


def test_unit_examples_name_the_units_of_the_dimension():
    # the question's unit, then its common prefixes ("sec" had come second, and no prefix of a rate showed)
    assert unit_examples("s").split(", ")[:4] == ["s", "ms", "µs", "ns"]
    assert "plain number" in unit_examples("") and "25%" in unit_examples("")  # % is an option, not the unit


# --- fair reading: arithmetic, percentages, 3 significant figures --------------------------------

# (reference, unit, answer, passes): how an answer to a Number question at the course's default
# precision, Tolerance.figures(), is read.
READINGS = [
    # Arithmetic goes through the formula parser with no names.
    (0.25, "", "1/4", True),
    (0.25, "", "1/3", False),
    (0.25, "", "(1/4)", True),
    (244 / 224, "", "244/224", True),
    (244 / 224, "", "224/244", False),
    (6.254e10, "", "2*31.27e9", True),
    (6.254e10, "B/s", "2*31.27e9 B/s", True),
    (6.254e10, "B/s", "2 * 31.27e9B/s", True),
    (6.254e10, "B/s", "2*31.27 GB/s", True),
    (6.254e10, "B/s", "31.27e9 B/s", False),
    (57344.0, "", "(8192*3584*2)/1024", True),
    (57344.0, "", "8192*3584/1024", False),
    (58720256.0, "B", "8192*3584*2 B", True),
    (58720256.0, "B", "8192*3584*2", True),
    (58720256.0, "B", "8192*3584*4 B", False),
    (0.042, "s", "28 * 1.5 ms", True),
    (0.042, "s", "28 * 1.5 s", False),
    (2.0**30, "B", "2**30 B", True),
    (2.0**30, "B", "2**30 KiB", False),
    (0.125, "", "2**-3", True),
    (1.0, "", "--1", True),
    (-3e-3, "s", "-(1+2) ms", True),
    # A question's unit "" is a plain number, and "25%" is 0.25 of it. A question in "%" reads a bare
    # number as percent, as a question in ms reads a bare number as ms.
    (0.25, "", "25%", True),
    (0.25, "", "25 %", True),
    (0.25, "", "0.25", True),
    (0.25, "", "100/4 %", True),
    (0.25, "", "25", False),
    (0.25, "", "2.5%", False),
    (0.217, "", "21.7%", True),
    (0.217, "", "22%", False),  # rounded to 2 figures: outside 3 significant figures
    # "1.27x" and "1.27×" are how a speed-up is written: a plain number, never a unit of its own.
    (1.27, "", "1.27x", True),
    (1.27, "", "1.27 ×", True),
    (1.27, "", "1.27 times", True),
    (1.27, "", "127x", False),
    (25.0, "%", "25%", True),
    (25.0, "%", "25", True),
    (25.0, "%", "0.25", False),
    # Rounding: a byte count, a bandwidth or a fraction given to 3 significant figures or more.
    (16777216.0, "B", "16777216", True),
    (16777216.0, "B", "1.678e7", True),  # 4 significant figures
    (16777216.0, "B", "1.68e7 B", True),  # 3
    (16777216.0, "B", "16.8 MB", True),
    (16777216.0, "B", "16 MiB", True),
    (16777216.0, "B", "16384 KiB", True),
    (16777216.0, "B", "1.7e7", False),  # 2 figures: 1.3% off
    (16777216.0, "B", "16 MB", False),
    (58720256.0, "B", "56 MiB", True),
    (58720256.0, "B", "58.7 MB", True),
    (58720256.0, "B", "60 MB", False),
    (139264.0, "B", "136 KiB", True),
    (139264.0, "B", "139 kB", True),
    (139264.0, "B", "144 KiB", False),
    (3 / 11, "", "0.273", True),
    (3 / 11, "", "3/11", True),
    (3 / 11, "", "0.27", False),
    (3.6e12, "B/s", "3.6 TB/s", True),
    (3.6e12, "B/s", "3.62 TB/s", False),
    (31372345344.0, "", "3.14e10", True),
    (31372345344.0, "", "31.4e9", True),
    (31372345344.0, "", "3.1e10", False),
    # Money in the course's US dollars, and a count said with the word of its scale, on a plain-number question.
    (1.08e7, "", "$1.08e7", True),
    (1.08e7, "", "$ 1.08e+07", True),
    (1.08e7, "", "1.08e7 USD", True),
    (1.08e7, "", "US$10.8e6", True),
    (1.08e7, "", "$10.8 million", True),
    (1.08e7, "", "10.8 million dollars", True),
    (1.08e7, "", "$10.8 billion", False),
    (3.2e9, "", "3.2 billion", True),
    (3.2e9, "", "3.2 Billion", True),
    (6.54e5, "", "0.654 million", True),
    (1.5e12, "", "1.5 trillion", True),
    (4e3, "", "4 thousand", True),
    (3.2e9, "", "3.2 million", False),
]


@pytest.mark.parametrize(("reference", "unit", "answer", "ok"), READINGS)
def test_fair_reading_at_three_figures(reference, unit, answer, ok):
    """Each answer of READINGS is read (never INVALID) and passes or fails as listed."""
    v = verdict(reference, unit, answer, Tolerance.figures())
    assert v.status is not Status.INVALID, v
    assert v.ok is ok, v


def test_arithmetic_is_exact_before_it_is_rounded():
    """1/3 * 3 is 1 exactly: the parser works in rationals, so no float noise enters the answer."""
    assert parse_number("1/3*3", "") == ParsedNumber(1.0, None)
    assert parse_number("0.1*3", "") == ParsedNumber(0.3, None)  # 0.30000000000000004 in floats


@pytest.mark.parametrize("reference", [1.0, 1.005, 1.00499, 9.995, 0.2727, 16777216.0, 3.3e24, 7e-9, -240.5])
@pytest.mark.parametrize("figures", [3, 4, 6])
def test_rounded_reference_passes(reference, figures):
    assert Tolerance.figures().accepts(reference, round_figures(reference, figures))


# --- fair rounding: exact counts ------------------------------------------------------------------

# (reference, answer, passes) for a record with exact=True: only the whole number.
EXACT = [
    (7, "7", True),
    (7, 7.0, True),
    (7, "14/2", True),
    (7, 0.1 * 70, True),  # 7.000000000000001: float noise in the student's arithmetic
    (7, "6", False),
    (7, "7.4", False),  # a batch that was not rounded down
    (9, 8.75, False),  # nor a GPU count rounded up
    (2240, "2.24e3", True),
    (2240, "2245", False),
    (2240, "2.2e3", False),
    (17920, "17920", True),
    (17920, "1.79e4", False),
]


@pytest.mark.parametrize(("reference", "answer", "ok"), EXACT)
def test_exact_counts_want_the_whole_number(reference, answer, ok):
    v = verdict(reference, "", answer, exact=True)
    assert v.status is not Status.INVALID, v
    assert v.ok is ok, v


# --- the tolerance a record may declare -----------------------------------------------------------

def test_exact_sets_the_whole_number_tolerance():
    q = number(32, exact=True)
    assert q.tolerance == Tolerance.exact_count() and q.tolerance.whole
    assert number(32, exact=True, tolerance=Tolerance.exact_count()).tolerance == q.tolerance


AUTHORING = [
    ({"reference": 4096.0, "tolerance": Tolerance(rtol=1e-9)}, "3 significant figures"),
    ({"reference": 0.2727, "tolerance": Tolerance(rtol=0.001)}, "exact=True"),
    ({"reference": 245.1, "tolerance": Tolerance(low=245.05, high=245.2)}, "3 significant figures"),
    ({"reference": 2.5, "exact": True, "prompt": "How many?"}, "not a whole number"),
    ({"reference": 32, "exact": True, "prompt": "Hosts of a pod."}, "say so in its prompt"),
    ({"reference": 32, "exact": True, "prompt": "How many?", "tolerance": Tolerance(rtol=0.05)}, "sets the tolerance"),
    ({"reference": 32, "tolerance": Tolerance.exact_count()}, "needs exact=True"),
    # A count to more figures than 3 (a parameter count, whose 3 figures are the model's name) must say so.
    ({"reference": 13_015_449_600.0, "tolerance": Tolerance.figures(4)}, "4 significant figures"),
    ({"reference": 13_015_449_600.0, "tolerance": Tolerance.figures(4), "prompt": "Its count (to 3 significant "
      "figures)."}, "4 significant figures"),
]


@pytest.mark.parametrize(("fields", "words"), AUTHORING)
def test_unfair_tolerances_are_authoring_errors(fields, words):
    record = {"qid": "ch99-t1-tight", "points": 1, "prompt": "A number.", "slips": (Slip(1.0, "not_equal"),),
              **fields}
    with pytest.raises(AuthoringError, match=f"ch99-t1-tight: .*{words}"):
        Number(**record)


def test_a_prompt_that_asks_for_more_figures_allows_a_tighter_tolerance():
    """LLaMA 2-13B's 13,015,449,600 parameters to 3 figures are 13.0e9, the name's size: the question asks
    for 4 figures, says so, and refuses 13e9."""
    q = Number(qid="ch99-t1-count", points=1, prompt="Its parameter count (to 4 significant figures).",
               reference=13_015_449_600.0, tolerance=Tolerance.figures(4), slips=(Slip(13e9, "close"),))
    assert q.tolerance.accepts(q.reference, 13.02e9) and not q.tolerance.accepts(q.reference, 13e9)
    assert q.figures == 4 and number(32).figures == 3


@pytest.mark.parametrize(("tolerance", "fair"), [
    (Tolerance.figures(), True), (Tolerance(), True), (Tolerance(rtol=0.0049), False),
    (Tolerance(low=240, high=250), True),  # 245 rounds to itself
    (Tolerance(low=245.3, high=250), False),  # 245.25 rounds to 245
    (Tolerance.exact_count(), False),
])
def test_honours_rounding(tolerance, fair):
    assert tolerance.honours_rounding(245.25) is fair


@pytest.mark.parametrize(("tolerance", "words"), [
    (Tolerance.figures(), "3 significant figures (±0.5%)"),
    (Tolerance.figures(2), "2 significant figures (±5%)"),
    (Tolerance.figures(1), "1 significant figure (±50%)"),
    (Tolerance(), "±2%"),
    (Tolerance(rtol=0.035), "±3.5%"),
    (Tolerance.exact_count(), "the exact whole number"),
    (Tolerance(low=10, high=20), "only values within a set range"),
])
def test_describe(tolerance, words):
    """The words a message puts after "the question accepts"; never the reference."""
    assert tolerance.describe() == words


def test_figures_and_rounding_agree():
    assert FIGURES == 3 and Tolerance.figures().rtol == 0.005
    assert round_figures(16777216) == 16800000.0 and round_figures(0.0) == 0.0
    assert round_figures(-0.00123456, 2) == -0.0012


def test_exact_count_has_no_range():
    with pytest.raises(ValueError, match="no range"):
        Tolerance(low=1, high=2, whole=True)


# --- tolerance edges ------------------------------------------------------------------------------

@pytest.mark.parametrize("reference", [100.0, 1.97e14, 3.3e-9, -40.0])
@pytest.mark.parametrize("rtol", [0.02, 0.001, 0.25])
def test_relative_tolerance_edges(reference, rtol):
    t = Tolerance(rtol=rtol)
    lo, hi = t.bounds(reference)
    assert lo < reference < hi
    assert t.accepts(reference, lo) and t.accepts(reference, hi) and t.accepts(reference, reference)
    assert t.accepts(reference, reference * (1 + 0.99 * rtol))
    assert not t.accepts(reference, reference * (1 + 1.01 * rtol))
    assert not t.accepts(reference, math.nextafter(hi, math.inf))
    assert not t.accepts(reference, math.nextafter(lo, -math.inf))


def test_range_tolerance_ignores_the_reference():
    t = Tolerance(low=240, high=250)
    assert t.bounds(1e9) == (240, 250)
    assert all(t.accepts(245.0, v) for v in (240, 245, 250))
    assert not any(t.accepts(245.0, v) for v in (239.99, 250.01, -245))
    assert t.relative() == Tolerance(rtol=t.rtol)
    assert Tolerance.exact_count().relative() == Tolerance.exact_count()


@pytest.mark.parametrize(("answer", "ok"), [(245.0, True), ("0.25 kB", True), (251, False)])
def test_check_number_with_a_range(answer, ok):
    assert verdict(245.0, "B", answer, Tolerance(low=240, high=250)).ok is ok


# --- diagnoses ------------------------------------------------------------------------------------

# A computed reference (1.37 ms, not 1 ms): where the answer is a simple number, a factor would give it away, and
# is withheld (``test_a_simple_answer_is_not_given_away``).
DIAGNOSES = [
    (1.37e-3, "s", 1.37, "unit:1000"),  # a time in ms, given without a unit
    (1.37e-3, "s", "1.37", "unit:1000"),
    (1.37e-3, "s", 1370.0, "unit:1000000"),  # in us
    (1.37e-3, "s", "1.37 s", "ratio:1000"),  # the unit was written: a factor, not a unit slip
    (1.37e-3, "s", 1.37e-6, "ratio:1/1000"),  # in ks, were there such a unit
    (16.4e9, "B", 16.4, "unit:1/1000000000"),  # in GB
    (1.37e-3, "s", 2.74e-3, "ratio:2"),
    (1.37e-3, "s", "2.74 ms", "ratio:2"),
    (1.37e-3, "s", 6.85e-4, "ratio:1/2"),
    (1.37e-3, "s", -1.37e-3, "ratio:-1"),
    (1.37e-3, "", 1.37, "ratio:1000"),  # a plain number has no unit to slip on
    (0.247, "", "24.7", "ratio:100"),  # a percentage given as a plain number
    (1.37e-3, "s", 1.4385e-3, "close"),
    (1.37e-3, "s", 1.096e-3, "close"),
    # 1.37 ms within 2% holds a simple number (1.3653 ms, 1024 times 4/3 us): any other wrong value reads alike there, a
    # power of ten and "nor a simple multiple" included (``WITHHELD``); 1.12 within 2% holds none
    (1.12e-3, "", 1.344, "magnitude:+3"),
    (1.12, "", 1.12 / 120, "magnitude:-2"),
    (1.12e-3, "", 1.904e-3, "not_equal"),
    (1.12e-3, "", -1.904e-3, "not_equal"),
    (1.12e-3, "", 0.0, "not_equal"),
    (1.37e-3, "s", 1.644, WITHHELD),
    (1.37, "", 1.37 / 120, WITHHELD),
    (1.37e-3, "s", 2.329e-3, WITHHELD),
    (1.37e-3, "s", -2.329e-3, WITHHELD),
    (1.37e-3, "s", 0.0, WITHHELD),
]


@pytest.mark.parametrize(("reference", "unit", "answer", "diagnosis"), DIAGNOSES)
def test_wrong_number_diagnosis(reference, unit, answer, diagnosis):
    v = verdict(reference, unit, answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, diagnosis)


@pytest.mark.parametrize(("reference", "answer"), [(1e-10, 1e308), (1e10, 1e-308)])
def test_far_off_numbers_are_judged(reference, answer):
    """value / reference overflows or underflows; the verdict is still a plain wrong answer."""
    v = verdict(reference, "s", answer)
    assert (v.status, v.score) == (Status.INCORRECT, 0.0) and v.message


def test_accept_and_hinted_slip():
    accept, slip = Accept(2.74, 0.5, "Right for one direction only."), Slip(5.48, "ratio:4", "Count bytes, not bits.")
    q = number(1.37, accept=(accept,), slips=(slip,))
    assert judge(q, 2.75).score == 0.5
    v = judge(q, 5.48)
    assert v.diagnosis == "ratio:4" and v.message.endswith(" Hint: Count bytes, not bits.")
    assert "Hint" not in judge(q, 10.96).message


# --- both judges: time units that are not a power of ten apart, a clock in Hz, the edge ------------------

def both(q: Number, answer: object) -> tuple[Verdict, Verdict]:
    """The grader's verdict and the self-check's, on the answer as a notebook records it."""
    from autograder import fingerprint, record

    encoded = record.encode_scalar("number", answer)
    return judge(q, encoded), fingerprint.selfcheck(fingerprint.make(q), q.qid, encoded)


# References that are no simple number (2500 s is one: a factor named to a guess would give it, below).
TIME_UNIT_SLIPS = [
    (17.38, "days", 17.38 * 24, "unit:24", "hours"),
    (17.38, "days", 17.38 * 24 * 60, "unit:1440", "minutes"),
    (17.38, "days", 17.38 * 86400, "unit:86400", "seconds"),
    (17.38, "days", 17.38 / 7, "unit:1/7", "weeks"),
    (2.47e3, "s", 2.47e3 / 60, "unit:1/60", "minutes"),
    (2.47e4, "s", 2.47e4 / 3600, "unit:1/3600", "hours"),
    (3.07e6, "s", 3.07e6 / 86400, "unit:1/86400", "days"),
    (435.0, "years", 435.0 * 365.25, "unit:1461/4", "days"),
    (435.0, "years", 435.0 * 365.25 * 24, "unit:8766", "hours"),
    (17.38, "days", 17.38 / 365.25, "unit:4/1461", "years"),
]


@pytest.mark.parametrize(("reference", "unit", "answer", "code", "guess"), TIME_UNIT_SLIPS)
def test_a_time_in_another_unit_is_named_by_that_unit(reference, unit, answer, code, guess):
    """Hours for days is a factor of 24, not "about 10^1": both judges name the unit the number is in."""
    for v in both(number(reference, unit, Tolerance(rtol=0.01)), answer):
        assert v.diagnosis == code, v.message
        assert f"the answer in {guess}; the question asks for {unit}" in v.message
        assert "power" not in v.message


def test_every_time_unit_names_the_unit_of_each_factor():
    """Over every time unit a question may ask in, and every other time unit a student may answer in: a number in
    that other unit is a unit slip named by that unit's word, in both judges (the words of the table above)."""
    from autograder.kinds.number import time_factors
    from autograder.numbers import UNITS

    words = {1.0: "seconds", 60.0: "minutes", 3600.0: "hours", 86400.0: "days", 604800.0: "weeks",
             31557600.0: "years"}
    asked = ("s", "min", "h", "hours", "days", "years")
    for unit in asked:
        assert time_factors(unit), unit
        want = UNITS[unit][1]
        for other, word in words.items():
            if other == want or round(want / other, 9) in (10.0**k for k in range(-12, 13)):
                continue
            k = want / other  # a number of `other` units is k times the same time in `unit`
            # 3 figures: at 1% a week in minutes (10,080) would pass for a power of ten
            for v in both(number(7.3, unit, Tolerance.figures()), 7.3 * k):
                assert v.diagnosis.startswith("unit:"), (unit, word, v.diagnosis)
                assert f"the answer in {word}; the question asks for {unit}" in v.message, (unit, word, v.message)


def test_a_time_with_its_unit_written_is_off_by_the_factor():
    """The student wrote "days" on a number of hours: a factor of 24, said as one."""
    for v in both(number(17.38, "days"), "417.1 days"):
        assert v.diagnosis == "ratio:24" and "24 times the expected value" in v.message


@pytest.mark.parametrize(("reference", "unit", "answer", "code"), [
    (17.38, "days", 17.38 * 10, "ratio:10"),
    # no time unit is 12 days; but a time within 1% holds a simple number (the time units' factors leave no gap), so
    # the power of ten is not said either: any wrong value reads alike there
    (17.38, "days", 17.38 * 12, WITHHELD),
    (17.38, "", 17.38 * 12, "magnitude:+1"),  # a plain number has no time unit to slip on
    (17.38, "", 17.38 * 24, "not_equal"),  # nor is 24 times it near a power of ten
    (1.37e-3, "s", 1.37, "unit:1000"),
])
def test_other_factors_are_said_as_before(reference, unit, answer, code):
    for v in both(number(reference, unit, Tolerance(rtol=0.01)), answer):
        assert v.diagnosis == code
    if code.startswith("magnitude"):
        # 12 times is "about 10^1" too: the message names the other cause, a wrong quantity, beside the units
        assert "powers of ten" in v.message and "within 25%" in v.message
        assert "which quantities you combined" in v.message


@pytest.mark.parametrize(("answer", "value", "given"), [
    ("2.11 GHz", 2.11e9, "GHz"), ("2110 MHz", 2.11e9, "MHz"), ("2.11e9 Hz", 2.11e9, "Hz"),
    ("2.11e6 kHz", 2.11e9, "kHz"), (2.11e9, 2.11e9, None)])
def test_a_clock_is_read_in_hz(answer, value, given):
    p = parse_number(answer, "Hz")
    assert isinstance(p, ParsedNumber) and math.isclose(p.value, value) and p.unit_given == given
    assert unit_dimension("Hz") == unit_dimension("GHz") == "frequency"


def test_a_clock_in_ghz_without_its_unit_is_a_unit_slip():
    q = number(2.11e9, "Hz", Tolerance(rtol=0.01))
    for answer in ("2.11 GHz", "2110 MHz", "2.11e9 Hz", 2.11e9):
        assert all(v.ok for v in both(q, answer)), answer
    for v in both(q, 2.11):
        assert v.diagnosis == "unit:1/1000000000" and "the answer in GHz; the question asks for Hz" in v.message
    assert isinstance(parse_number("2.11 GHz", "s"), Invalid)


def test_the_edge_asks_for_a_figure_only_where_one_would_help():
    """At the very edge of the accepted range the self-check cannot tell. A rounded answer is asked for one more
    figure; an answer that already has many is not (more figures cannot move it)."""
    q = number(1000.0, "", Tolerance(rtol=0.01))
    graded, rounded = both(q, 990)
    assert rounded.diagnosis == "edge" and "one more significant figure" in rounded.message
    precise_answer = 990.0000000001234
    graded, precise = both(q, precise_answer)
    assert graded.ok and precise.diagnosis == "edge"
    assert "significant figure" not in precise.message and "constant" in precise.message


@pytest.mark.parametrize(("low", "high", "reference", "answer"), [
    (10, 20, 10.92, 9.9),  # 2 x 9.9 lies inside the range, but 9.9 is not half of anything the question meant
    (2e-6, 4e-6, 3e-6, 1.9e-6),
    (2.475, 3.03, 2.5, 2.25),
    (0.1658, 0.2501, 0.1667, 0.15),
    (10, 20, 10.92, 24.0),
])
def test_just_outside_a_range_is_close_not_a_factor(low, high, reference, answer):
    """A range is the book's vague wording: a value a little outside it is close, for the grader and the
    self-check alike, and the message says so in words that read as a sentence."""
    from autograder import fingerprint, record

    q = Number(qid="ch99-r1-range", points=1, prompt="p", reference=reference, unit="",
               tolerance=Tolerance(low=low, high=high), slips=(Slip(3 * reference, "ratio:3"),))
    encoded = record.encode_scalar("number", answer)
    for v in (judge(q, encoded), fingerprint.selfcheck(fingerprint.make(q), q.qid, encoded)):
        assert (v.status, v.diagnosis) == (Status.INCORRECT, "close"), v.message
        assert "accepts the accepted" not in v.message and "range" in v.message


def test_a_factor_of_the_reference_is_still_named_in_a_range():
    v = verdict(10.92, "", 2 * 10.92, Tolerance(low=10, high=20))
    assert v.diagnosis == "ratio:2"


def test_a_slip_rounded_to_two_figures_is_told_its_hint_but_not_half_way_to_the_reference():
    """A student who slips and rounds ("27%" for a fraction 0.2746 where a ratio 1.2746 is asked) is told the slip's
    hint; an answer nearer the reference, or nearer another slip, is not told it."""
    from autograder.kinds import number

    slips = (Slip(0.2746, "magnitude:-1", "the fraction faster."), Slip(0.2154, "magnitude:-1", "the time saved."))

    def told(answer):
        return number.check("ch99-t0-speedup", 1.2746, "", Tolerance(rtol=0.01), answer, slips=slips).message

    assert "the fraction faster" in told(0.27) and "the fraction faster" in told(0.28)
    assert "the time saved" in told(0.22) and "the time saved" in told(0.21)
    for far in (0.3, 0.245, 0.25, 0.19):  # beyond 2 figures, or nearer the other slip
        assert "fraction faster" not in told(far) and "time saved" not in told(far), (far, told(far))
    # a slip near the reference reaches only half way to it
    near = (Slip(1.3, "close", "the near slip."),)
    assert "near slip" in number.check("ch99-t0-near", 1.2746, "", Tolerance(rtol=0.01), 1.295, slips=near).message
    assert "near slip" not in number.check("ch99-t0-near", 1.2746, "", Tolerance(rtol=0.01), 1.287,
                                           slips=near).message


@pytest.mark.parametrize(("answer", "code"), [
    (7.0e9 * 3 / 16, "not_equal"),  # a KV cache left out hit 3/16 by chance: no 3 beside 16 is named, nor 10^-1
    (7.0e9 * 16 / 3, "not_equal"), (7.0e9 * 3 / 8, "not_equal"), (7.0e9 * 0.11, "magnitude:-1"),
    (7.0e9 / 5, "ratio:1/5"),  # the weights' 2 bytes for the 10 of training state: a factor of 5
    (7.0e9 * 5, "ratio:5"), (7.0e9 * 3 / 2, "ratio:3/2"), (7.0e9 / 8, "ratio:1/8"),
])
def test_the_factors_a_number_is_said_to_be_off_by(answer, code):
    # a count of parameters: in bytes, every value is within 2% of a binary size times a factor (a simple question)
    q = Number(qid="ch99-n9-params", points=1, prompt="p", reference=7.0e9,
               slips=(Slip(7.0e9 / 2, "ratio:1/2"),))
    for v in both(q, answer):
        assert v.diagnosis == code, v.message


def test_a_k_is_told_both_of_its_readings():
    """"8K" for 8192 tokens: told to write 8e3 alone, the student who followed it was then "close" (8K tokens is
    8 * 1024 in the book)."""
    q = Number(qid="ch99-n8-tokens", points=1, prompt="p", reference=8192.0, slips=(Slip(4096.0, "ratio:1/2"),))
    for v in both(q, "8K"):
        assert "write 8e3" in v.message and "write 8*1024" in v.message, v.message
    assert all(v.ok for v in both(q, "8*1024"))
    assert "1024" not in judge(q, "13B").message


# A count written the book's way, with the letter of its scale after a space or glued to it ("8.03 B" for Llama's 8.03
# billion parameters, "3.2 G"): on a plain-number question each was told "'B' is not the right kind of unit" or
# "Unknown unit 'G'", true but no help. Each is now told how to write the number, in every plain-number question of
# the course, by both judges; the verdict is the same (no mark: the letter is not read as a scale).
SCALED_FORMS = [("8.03 B", "8.03e9"), ("8.03B", "8.03e9"), ("3.2 G", "3.2e9"), ("3.2G", "3.2e9"), ("70 M", "70e6"),
                ("4 K", "4e3"), ("4 k", "4e3"), ("1.5 T", "1.5e12"), ("13 bn", "13e9"), ("13bn", "13e9")]


def _plain_numbers() -> list[Number]:
    from autograder.questions import chapter_names, load_chapter

    return [q for name in chapter_names() for q in load_chapter(name).questions
            if isinstance(q, Number) and q.unit == ""]


@pytest.mark.parametrize("q", _plain_numbers(), ids=lambda q: q.qid)
def test_a_scale_letter_on_a_plain_number_is_told_how_to_write_the_number(q):
    for text, fix in SCALED_FORMS:
        for v in both(q, text):
            assert v.status is Status.INVALID and v.diagnosis == "scale_suffix", (text, v)
            assert f"write {fix} " in v.message, (text, v.message)
            assert ("B is bytes" in v.message) == text.rstrip().endswith("B"), (text, v.message)


def test_a_scale_letter_is_no_unit_where_the_question_has_one():
    """A question in bytes reads "8.03 B" as bytes and "3.2 G" as no unit it knows: only a plain number's count is
    written the book's way."""
    q = Number(qid="ch99-n9-bytes", points=1, prompt="p", reference=8.03, unit="B", slips=(Slip(16.06, "ratio:2"),))
    assert all(v.ok for v in both(q, "8.03 B"))
    assert all(v.diagnosis == "unknown_unit" for v in both(q, "3.2 G"))


# --- a factor that would give a guess the answer is withheld ----------------------------------------------

@pytest.mark.parametrize(("reference", "unit", "guess"), [(1 / 32, "", 1), (0.25, "", 1), (1e-3, "s", 1),
                                                          (1e-15, "s", 1), (2.5e3, "s", 2.5e3 / 60)])
def test_a_simple_answer_is_not_given_by_a_factor(reference, unit, guess):
    """1/32 is 1 over 32: "off by a factor of 32" to a guess of 1 would be the answer. Both judges say only that the
    guess is not equal, as they say of any other wrong value (no direction, no power of ten); nor does the diagnosis
    code, which a student can read too, name the factor."""
    for v in both(number(reference, unit, Tolerance.figures()), guess):
        assert not v.ok and v.diagnosis == WITHHELD, v.diagnosis
        assert "factor of" not in v.message.replace("more than a factor of three", ""), v.message
        assert "looks like the answer in" not in v.message and "simple multiple" not in v.message, v.message
        assert v.message.startswith("Not the expected value"), v.message


def test_a_slip_on_a_computed_answer_is_still_named():
    """Twice an answer that is no simple number (7.3 ms with its figures) is told as twice; so is twice 1/96.13 at the
    figures the student carries, and not twice it rounded to 2 figures (0.021 is 2 over 96)."""
    for v in both(number(7.3123e-3, "s"), 2 * 7.3123e-3):
        assert v.diagnosis == "ratio:2" and "twice the expected value" in v.message, v.message
    r = 1 / 96.13
    for v in both(number(r, "s", Tolerance(rtol=0.05)), 2 * r):
        assert "twice the expected value" in v.message, v.message
    for v in both(number(r, "s", Tolerance(rtol=0.05)), 0.021):
        assert v.diagnosis == WITHHELD and "twice" not in v.message, v.message


@pytest.mark.parametrize(("ratio", "code"), [
    (1000.0, "ratio:1000"), (1200.0, "magnitude:+3"), (800.0, "magnitude:+3"), (6.0, "not_equal"), (24.0, "not_equal"),
    (600.0, "not_equal"), (1 / 6, "not_equal"), (0.012, "magnitude:-2"), (0.006, "not_equal"),
])
def test_a_power_of_ten_is_said_only_near_one(ratio, code):
    """A function counting an einsum's shared batch dimensions twice was 6 times the count at a case, and told "off by
    about a factor of 10^1 ... check the powers of ten": a ratio is said to be about a power of ten only within 25% of
    one, by both judges."""
    for v in both(number(1.12), 1.12 * ratio):  # 1.12 within 2% holds no simple number: every factor is said
        assert v.diagnosis == code, (ratio, v.message)


def test_a_computed_float_is_read_as_its_text_is():
    """A function's outputs are floats, read without their text; the value and unit must be those of the text."""
    rng = random.Random(5)
    values = [rng.choice((1, -1)) * rng.random() * 10 ** rng.uniform(-300, 300) for _ in range(3000)]
    values += [0.0, -0.0, 5e-324, 1.7976931348623157e308, 1e22, 0.1, 1 / 3]
    for unit in ("", "%", "s", "B", "B/s"):
        for v in values:
            fast, text = parse_number(v, unit), parse_number(repr(v), unit)
            assert (fast.value, fast.unit_given) == (text.value, text.unit_given), (v, unit)
    assert parse_number(float("inf"), "").code == "not_finite" and parse_number(float("nan"), "s").code == "not_finite"
