"""Properties of the number check on arbitrary input: nothing escapes or runs long, an answer is
unreadable exactly when the parser rejects it, a value written in any unit of the right dimension
is accepted, a multiple of the reference is diagnosed as a factor or a unit slip, and the fair-reading
rules hold for any value: arithmetic of numbers is read as its value, a percentage as hundredths, and
an answer rounded to 3 significant figures passes.

Verdicts come from ``checks.judge`` on a Number record, the grader's public door.
"""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.checks import judge
from autograder.formula import Invalid
from autograder.kinds.common import WITHHELD
from autograder.kinds.number import check as number_check
from autograder.messages import phrase
from autograder.numbers import UNITS, ParsedNumber, Tolerance, parse_number, round_figures
from autograder.questions import Number, Slip
from autograder.verdict import Status, Verdict
from tests.badinput.common import INSTRUCTION, INVALID_CODES, assert_judged, assert_sound, stray_placeholders, timed
from tests.strategies import answer_text, hostile_objects


def check(reference: float, unit: str, tolerance: Tolerance, answer: object) -> Verdict:
    """The grader's verdict on ``answer`` for a Number record with this reference, unit and tolerance, as its
    diagnosis reads it: the factor said, where a typed answer's verdict may withhold it (``typed_check``)."""
    return number_check("ch99-p1-number", reference, unit, tolerance, answer, slips=_slips(reference))


def typed_check(reference: float, unit: str, tolerance: Tolerance, answer: object) -> Verdict:
    """The grader's verdict on ``answer`` for a Number record: a number question's, typed by the student."""
    q = Number(qid="ch99-p1-number", points=1, prompt="A number.", reference=reference, unit=unit,
               tolerance=tolerance, slips=_slips(reference), negative=reference < 0)
    return judge(q, answer)


def _slips(reference: float) -> tuple[Slip, ...]:
    return (Slip(2 * reference, "ratio:2"),)


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-20, 1e20), st.sampled_from(["2", "1/2", "8", "1/4", "3/2", "16", "1000"]), st.booleans())
def test_a_typed_number_says_its_factor_or_withholds_it(reference, k, rounded):
    """A number question's verdict is the diagnosis's, or the same verdict with its factor withheld (its answer is a
    simple number a guess could reach); an answer rounded to 2 figures never hears a factor of a simple answer."""
    value = reference * float(Fraction(k))
    value = float(f"{value:.2g}") if rounded else value
    said, typed = check(reference, "", Tolerance(), value), typed_check(reference, "", Tolerance(), value)
    assert (typed.status, typed.score) == (said.status, said.score)
    assert typed.diagnosis in (said.diagnosis, WITHHELD), (typed, said)
    if typed.diagnosis == WITHHELD:
        assert "factor of" not in typed.message.replace("more than a factor of three", ""), typed.message


def assert_unreadable(v: Verdict, inv: Invalid) -> None:
    """``v`` reports the parser's rejection ``inv``: no credit, the parser's code, and a sentence for that
    code, with every field filled, that says what to type instead."""
    assert_sound(v)
    assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, inv.code), (v, inv)
    assert inv.code in INVALID_CODES, inv
    assert not stray_placeholders(v.message, inv), v.message
    own_words = phrase(inv.code, detail="")
    assert INSTRUCTION.search(own_words), f"{inv.code}: {own_words!r} does not say what to type"


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-30, 1e30), st.floats(1e-6, 0.5), st.floats(0.0, 0.98))
def test_inside_accepted_outside_rejected(reference, rtol, fraction):
    t = Tolerance(rtol=rtol)
    assert t.accepts(reference, reference * (1 + fraction * rtol))
    assert t.accepts(reference, reference * (1 - fraction * rtol))
    assert not t.accepts(reference, reference * (1 + (1.02 + fraction) * rtol))


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-20, 1e20), st.sampled_from(["2", "1/2", "8", "1/4", "3/2", "16"]))
def test_nice_factor_is_a_ratio(reference, k):
    value = reference * float(Fraction(k))
    assert check(reference, "", Tolerance(), value).diagnosis == f"ratio:{k}"


HOSTILE = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "1e-999", "9" * 10**5, "1" * 199, "0.0", "-0", "1e308 TB/s",
                     "\x00", "1 ms ms", "1.2.3", "--1", "1e+", "١٢٣", "1\u00a0ms",
                     # arithmetic at the parser's caps, and forms that leave the real line
                     "9**9**9", "2**64**64", "(" * 150 + "1" + ")" * 49, "-" * 199 + "1", "1/0", "0**-1",
                     "(-8)**(1/3)", "1e40*1e40", "1e308*10", "2^10", "1,000", "1 / 0 ms", "1" * 150 + "/x"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**400), 10**400),
    st.booleans(),
    st.none(),
    st.lists(st.floats(), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(HOSTILE, st.sampled_from(sorted(UNITS)))
def test_hostile_input_never_raises(answer, unit):
    got = timed(parse_number, answer, unit)
    assert isinstance(got, ParsedNumber | Invalid)
    if isinstance(got, ParsedNumber):
        assert math.isfinite(got.value)
    v = timed(check, 1.5, unit, Tolerance(), answer)
    assert v.status in set(Status) and 0.0 <= v.score <= 1.0 and v.message


TOLERANCES = [Tolerance(), Tolerance.figures(), Tolerance(rtol=0.25), Tolerance(low=1.0, high=2.0)]


@settings(max_examples=150, deadline=None)
@given(st.one_of(answer_text(), hostile_objects(), HOSTILE), st.sampled_from(sorted(UNITS)),
       st.sampled_from(TOLERANCES), st.floats(1e-12, 1e12), st.booleans())
def test_invalid_exactly_when_the_parser_rejects(answer, unit, tolerance, reference, negative):
    """The grader says INVALID (no credit, a sentence saying what to type) for what parse_number
    rejects, and judges every number it reads as right, partly right or wrong."""
    reference = -reference if negative else reference  # hostile answers, not hostile references
    if tolerance.low is not None:
        reference = 1.5  # a range ignores the reference, which must still lie in it
    got = timed(parse_number, answer, unit)
    v = timed(check, reference, unit, tolerance, answer)
    if isinstance(got, Invalid):
        assert_unreadable(v, got)
    else:
        assert isinstance(got, ParsedNumber) and math.isfinite(got.value)
        assert_judged(v)
        assert v.ok == tolerance.accepts(reference, got.value), (answer, got, v)


# --- fair reading and fair rounding -----------------------------------------------------------------

OPERANDS = st.one_of(st.integers(1, 10**6), st.floats(1e-6, 1e6).map(lambda x: float(f"{x:.6g}")))


@settings(max_examples=100, deadline=None)
@given(OPERANDS, OPERANDS, st.sampled_from(["*", "/", "+"]), st.sampled_from(["", " "]),
       st.sampled_from(["", " B", "B", " GiB"]))
def test_arithmetic_reads_as_its_value(a, b, op, space, unit):
    """"a*b", "a / b", "a+b B": the value of the arithmetic, in the unit written after it."""
    text = f"{a!r}{space}{op}{space}{b!r}{unit}"
    got = timed(parse_number, text, "B" if unit else "")
    exact = {"*": Fraction(a) * Fraction(b), "/": Fraction(a) / Fraction(b), "+": Fraction(a) + Fraction(b)}[op]
    scale = UNITS[unit.strip()][1] if unit else 1.0
    assert isinstance(got, ParsedNumber), (text, got)
    assert got.value == float(exact) * scale or math.isclose(got.value, float(exact) * scale, rel_tol=1e-15), text


@settings(max_examples=100, deadline=None)
@given(st.floats(-1e6, 1e6), st.sampled_from(["%", " %"]))
def test_a_percentage_is_hundredths(x, sign):
    got = parse_number(f"{x!r}{sign}", "")
    assert isinstance(got, ParsedNumber) and got.unit_given == "%"
    assert math.isclose(got.value, x / 100, rel_tol=1e-15, abs_tol=1e-300)


@settings(max_examples=150, deadline=None)
@given(st.floats(1e-30, 1e30) | st.floats(-1e30, -1e-30), st.integers(3, 8), st.sampled_from(["e", "g"]))
def test_an_answer_rounded_to_three_figures_passes(reference, figures, style):
    """The course's default precision accepts the reference rounded to 3 or more significant figures,
    written in either notation."""
    answer = f"{reference:.{figures - 1}e}" if style == "e" else f"{reference:.{figures}g}"
    assert float(answer) == round_figures(reference, figures)
    v = timed(check, reference, "", Tolerance.figures(), answer)
    assert (v.status, v.score) == (Status.CORRECT, 1.0), (reference, answer, v)


# --- the same quantity in another unit --------------------------------------------------------------

DIMENSIONS: dict[str, list[str]] = {}
for _unit, (_dimension, _) in sorted(UNITS.items()):
    if _unit:
        DIMENSIONS.setdefault(_dimension, []).append(_unit)


@st.composite
def unit_pairs(draw) -> tuple[str, str]:
    """The question's unit and another unit of the same dimension, among all units parse_number knows."""
    dimension = draw(st.sampled_from(sorted(DIMENSIONS)))
    return draw(st.sampled_from(DIMENSIONS[dimension])), draw(st.sampled_from(DIMENSIONS[dimension]))


def written(value: float, unit: str, draw) -> str:
    """``value`` as a student might type it: shortest repr, %g or %e, with or without a space."""
    number = draw(st.sampled_from([repr(value), f"{value:g}", f"{value:.5e}", f"{value:.9g}"]))
    return number + draw(st.sampled_from(["", " ", "  "])) + unit


@settings(max_examples=100, deadline=None)
@given(st.data(), unit_pairs(), st.floats(1e-9, 1e9))
def test_value_in_another_unit_is_correct(data, units, reference):
    """A time in s given as "x ms" or "x us", a size in B as "x GB" or "x GiB", a rate as "x TB/s"..."""
    unit, given_unit = units
    value = reference * UNITS[unit][1] / UNITS[given_unit][1]
    answer = written(value, given_unit, data.draw)
    v = timed(check, reference, unit, Tolerance(), answer)
    assert (v.status, v.score) == (Status.CORRECT, 1.0), (reference, unit, answer, v)


FACTORS = ["2", "1/2", "4", "1/4", "8", "3/2", "16", "1000", "1/1000", "1000000"]


@settings(max_examples=100, deadline=None)
@given(st.data(), unit_pairs(), st.floats(1e-9, 1e9), st.sampled_from(FACTORS))
def test_multiple_in_another_unit_is_a_ratio(data, units, reference, k):
    """A unit written out is never a unit slip: k times the reference, in any unit, is "ratio:k"."""
    unit, given_unit = units
    value = reference * float(Fraction(k)) * UNITS[unit][1] / UNITS[given_unit][1]
    answer = written(value, given_unit, data.draw)
    v = timed(check, reference, unit, Tolerance(), answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, f"ratio:{k}"), (reference, unit, answer, v)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(u for u in UNITS if u)), st.floats(1e-9, 1e9), st.sampled_from(FACTORS))
def test_bare_multiple_is_a_unit_slip_or_a_ratio(unit, reference, k):
    """A bare number k times the reference: a unit slip when k is a power of 1000 and the question's kind of unit
    has one 1/k of its size (ms for s, kB for B), else a factor."""
    v = timed(check, reference, unit, Tolerance(), reference * float(Fraction(k)))
    power = math.log10(float(Fraction(k)))
    dimension, scale = UNITS[unit]
    exists = any(d == dimension and math.isclose(s, scale / float(Fraction(k))) for d, s in UNITS.values())
    expected = f"unit:{k}" if abs(power) >= 3 and power == round(power) and exists else f"ratio:{k}"
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, expected), (reference, unit, k, v)
