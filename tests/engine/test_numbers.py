"""Numeric answers: units, tolerance edges, the diagnosis of a wrong number, hostile input."""

from __future__ import annotations

import math

import pytest

from autograder.checks import check_number
from autograder.formula import Invalid
from autograder.numbers import ParsedNumber, Tolerance, parse_number, unit_dimension
from autograder.questions import Accept, Slip
from autograder.verdict import Status

UNIT_CASES = [
    ("1.2 ms", "s", 1.2e-3, "ms"),
    ("1.2ms", "s", 1.2e-3, "ms"),
    ("16 GiB", "B", 16 * 2**30, "GiB"),
    ("16 GB", "B", 16e9, "GB"),
    ("3 TB/s", "B/s", 3e12, "TB/s"),
    ("3 TB/s", "GB/s", 3e3, "TB/s"),
    ("2 us", "ms", 2e-3, "us"),
    ("1.5 µs", "s", 1.5e-6, "µs"),
    ("5 min", "s", 300.0, "min"),
    ("197 TFLOP/s", "FLOP/s", 1.97e14, "TFLOP/s"),
    ("197 TFLOPS", "FLOP/s", 1.97e14, "TFLOPS"),
    ("240 FLOPs/byte", "FLOP/B", 240.0, "FLOPs/byte"),
    ("1e3 s", "ms", 1e6, "s"),
    (" 1.5 ", "s", 1.5, None),
    ("-3 ms", "s", -3e-3, "ms"),
    (".5", "", 0.5, None),
    ("5.", "", 5.0, None),
    (0.5, "s", 0.5, None),
    (7, "B", 7.0, None),
]


@pytest.mark.parametrize(("answer", "unit", "value", "given"), UNIT_CASES)
def test_units_convert_to_the_question_unit(answer, unit, value, given):
    got = parse_number(answer, unit)
    assert isinstance(got, ParsedNumber), got
    assert got.value == pytest.approx(value, rel=1e-12) and got.unit_given == given


INVALID = {
    "unit_dimension": [("3 TB/s", "s"), ("1 ms", "B"), ("16 GiB", "B/s"), ("5 FLOPs", "FLOP/s"), ("2 s", "")],
    "unknown_unit": [("3 parsecs", "s"), ("1,000", "s"), ("1.2 MS", "s"), ("5 gb", "B"), ("1_000", "s"),
                     ("0x10", "s"), ("2 x", "")],
    "not_a_number": [("nan", "s"), ("inf", "s"), ("-inf", "s"), ("Infinity", "s"), ("abc", "s"), ("ms", "s"),
                     ("", "s"), (float("nan"), "s"), (float("inf"), "s")],
    "not_finite": [("1e999", "s"), ("-1e999", ""), ("1e308 TB/s", "B/s")],  # the last overflows on conversion
    "too_long": [("1" * 300, "s"), ("x" * 10**6, "s")],
    "too_large": [(10**5000, "s")],
    "empty": [(None, "s"), (Ellipsis, "")],
    "wrong_type": [(True, ""), (False, "s"), ([1.0], "s"), ({"a": 1}, "s"), (object(), "s"), (1j, "s")],
}
INVALID_CASES = [pytest.param(code, answer, unit, id=f"{code}-{i}") for code, cases in INVALID.items()
                 for i, (answer, unit) in enumerate(cases)]


@pytest.mark.parametrize(("code", "answer", "unit"), INVALID_CASES)
def test_invalid(code, answer, unit):
    got = parse_number(answer, unit)
    assert isinstance(got, Invalid) and got.code == code, got
    v = check_number(1.0, unit, Tolerance(), answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, code)


def test_unknown_question_unit_is_an_authoring_error():
    with pytest.raises(ValueError, match="unknown unit"):
        unit_dimension("parsecs")


# --- tolerance ------------------------------------------------------------------------------------

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


@pytest.mark.parametrize(("answer", "ok"), [(245.0, True), ("0.25 kB", True), (251, False)])
def test_check_number_with_a_range(answer, ok):
    v = check_number(245.0, "B", Tolerance(low=240, high=250), answer)
    assert v.ok is ok


# --- diagnoses ------------------------------------------------------------------------------------

DIAGNOSES = [
    (1e-3, "s", 1.0, "unit:1000"),  # a time in ms, given without a unit
    (1e-3, "s", "1.0", "unit:1000"),
    (1e-3, "s", 1000.0, "unit:1000000"),  # in us
    (1e-3, "s", "1 s", "ratio:1000"),  # the unit was written: a factor, not a unit slip
    (1e-3, "s", 1e-6, "unit:1/1000"),  # in ks
    (16e9, "B", 16.0, "unit:1/1000000000"),  # in GB
    (1e-3, "s", 2e-3, "ratio:2"),
    (1e-3, "s", "2 ms", "ratio:2"),
    (1e-3, "s", 5e-4, "ratio:1/2"),
    (1e-3, "s", -1e-3, "ratio:-1"),
    (1e-3, "", 1.0, "ratio:1000"),  # a plain number has no unit to slip on
    (1e-3, "s", 1.05e-3, "close"),
    (1e-3, "s", 0.8e-3, "close"),
    (1e-3, "s", 1.2, "magnitude:+3"),
    (1.0, "", 1 / 120, "magnitude:-2"),
    (1e-3, "s", 1.7e-3, "not_equal"),
    (1e-3, "s", -1.7e-3, "not_equal"),
    (1e-3, "s", 0.0, "not_equal"),
    (1e-10, "s", 1e308, "magnitude:+318"),  # value / reference overflows
    (1e10, "s", 1e-308, "magnitude:-318"),  # and underflows
]


@pytest.mark.parametrize(("reference", "unit", "answer", "diagnosis"), DIAGNOSES)
def test_wrong_number_diagnosis(reference, unit, answer, diagnosis):
    v = check_number(reference, unit, Tolerance(), answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, diagnosis)


def test_accept_and_hinted_slip():
    accept, slip = Accept(2.0, 0.5, "Right for one direction only."), Slip(4.0, "ratio:4", "Count bytes, not bits.")
    assert check_number(1.0, "", Tolerance(), 2.01, (accept,), (slip,)).score == 0.5
    v = check_number(1.0, "", Tolerance(), 4.0, (accept,), (slip,))
    assert v.diagnosis == "ratio:4" and v.message.endswith(" Hint: Count bytes, not bits.")
    assert "Hint" not in check_number(1.0, "", Tolerance(), 8.0, (accept,), (slip,)).message
