"""Properties of the number check on arbitrary input: nothing escapes or runs long, an answer is
unreadable exactly when the parser rejects it, a value written in any unit of the right dimension
is accepted, and a multiple of the reference is diagnosed as a factor or a unit slip."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.checks import check_number, number_context
from autograder.formula import Invalid
from autograder.numbers import UNITS, ParsedNumber, Tolerance, parse_number
from autograder.verdict import Status
from tests.badinput.common import assert_invalid, assert_judged, timed
from tests.strategies import answer_text, hostile_objects


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
    assert check_number(reference, "", Tolerance(), value).diagnosis == f"ratio:{k}"


HOSTILE = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "1e-999", "9" * 10**5, "1" * 199, "0.0", "-0", "1e308 TB/s",
                     "\x00", "1 ms ms", "1.2.3", "--1", "1e+", "١٢٣", "1\u00a0ms"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**400), 10**400),
    st.booleans(),
    st.none(),
    st.lists(st.floats(), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(HOSTILE, st.sampled_from(sorted(UNITS)))
def test_hostile_input_never_raises(answer, unit):
    got = parse_number(answer, unit)
    assert isinstance(got, ParsedNumber | Invalid)
    if isinstance(got, ParsedNumber):
        assert math.isfinite(got.value)
    v = check_number(1.5, unit, Tolerance(), answer)
    assert v.status in set(Status) and 0.0 <= v.score <= 1.0 and v.message


TOLERANCES = [Tolerance(), Tolerance(rtol=0.001), Tolerance(rtol=0.25), Tolerance(low=1.0, high=2.0)]


@settings(max_examples=150, deadline=None)
@given(st.one_of(answer_text(), hostile_objects(), HOSTILE), st.sampled_from(sorted(UNITS)),
       st.sampled_from(TOLERANCES), st.floats(-1e12, 1e12).filter(lambda x: x != 0))
def test_invalid_exactly_when_the_parser_rejects(answer, unit, tolerance, reference):
    """check_number says INVALID (no credit, a sentence saying what to type) for what parse_number
    rejects, and judges every number it reads as right, partly right or wrong."""
    if tolerance.low is not None:
        reference = 1.5  # a range ignores the reference, which must still lie in it
    got = timed(parse_number, answer, unit)
    v = timed(check_number, reference, unit, tolerance, answer)
    if isinstance(got, Invalid):
        assert_invalid(v, got, **number_context(unit, tolerance))
    else:
        assert isinstance(got, ParsedNumber) and math.isfinite(got.value)
        assert_judged(v)
        assert v.ok == tolerance.accepts(reference, got.value), (answer, got, v)


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
    v = timed(check_number, reference, unit, Tolerance(), answer)
    assert (v.status, v.score) == (Status.CORRECT, 1.0), (reference, unit, answer, v)


FACTORS = ["2", "1/2", "4", "1/4", "8", "3/2", "16", "1000", "1/1000", "1000000"]


@settings(max_examples=100, deadline=None)
@given(st.data(), unit_pairs(), st.floats(1e-9, 1e9), st.sampled_from(FACTORS))
def test_multiple_in_another_unit_is_a_ratio(data, units, reference, k):
    """A unit written out is never a unit slip: k times the reference, in any unit, is "ratio:k"."""
    unit, given_unit = units
    value = reference * float(Fraction(k)) * UNITS[unit][1] / UNITS[given_unit][1]
    answer = written(value, given_unit, data.draw)
    v = timed(check_number, reference, unit, Tolerance(), answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, f"ratio:{k}"), (reference, unit, answer, v)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(u for u in UNITS if u)), st.floats(1e-9, 1e9), st.sampled_from(FACTORS))
def test_bare_multiple_is_a_unit_slip_or_a_ratio(unit, reference, k):
    """A bare number k times the reference: a unit slip when k is a power of 1000, else a factor."""
    v = timed(check_number, reference, unit, Tolerance(), reference * float(Fraction(k)))
    power = math.log10(float(Fraction(k)))
    expected = f"unit:{k}" if abs(power) >= 3 and power == round(power) else f"ratio:{k}"
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, expected), (reference, unit, k, v)
