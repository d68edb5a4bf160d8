"""Properties of the formula parser and the formula check on arbitrary input: nothing escapes,
nothing runs long, and an answer is unreadable (INVALID) exactly when the parser rejects it."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.formula import Invalid, Parsed, parse_formula
from autograder.kinds import formula
from autograder.messages import phrase_invalid
from course.symbols import symbol
from tests.badinput.common import assert_as_parsed, stray_placeholders, timed
from tests.strategies import (
    COURSE_NAMES,
    answer_text,
    formula_text,
    hostile_objects,
    near_limit_text,
    positive_expressions,
    symbol_names,
)

NAMES = ("B", "D", "F", "N")
REFERENCE = "2*B*D*(N-1)/N"



@settings(max_examples=150, deadline=None)
@given(formula_text(), symbol_names())
def test_arbitrary_text_never_raises_and_is_quick(text, names):
    start = time.process_time()  # CPU time: a loaded machine stretches wall time alone
    got = parse_formula(text, names)
    assert time.process_time() - start < 1.0, text
    assert isinstance(got, Parsed | Invalid)
    if isinstance(got, Invalid):
        assert got.code and ":" not in got.code
        assert got.offset is None or 0 <= got.offset <= len(got.text)
        # No template field is left unfilled; the sentence may quote the student's own braces ("'{' was never closed").
        message = phrase_invalid(got, names=", ".join(names), expected="a formula")
        assert not stray_placeholders(message, got), (text, message)
    else:
        again = parse_formula(got.text, names)
        assert isinstance(again, Parsed) and again.expr == got.expr, (text, got.text, again)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_generated_expressions_round_trip(data):
    names = data.draw(symbol_names())
    expr = data.draw(positive_expressions(names))
    got = parse_formula(expr, names)
    assert isinstance(got, Parsed), (expr, got)
    # sympy may nest a product it builds itself, (3*sqrt(2))*3**(3/4)/9: equal, not identical
    assert got.expr == expr or formula.check("ch99-t0-trip", expr, names, (), got.expr).ok, (expr, got.expr)
    again = parse_formula(got.text, names)
    assert isinstance(again, Parsed) and again.expr == got.expr, (expr, got.text)
    assert got.expr.free_symbols <= {symbol(n) for n in names}


@settings(max_examples=60, deadline=None)
@given(st.from_type(object) | st.floats() | st.integers() | st.binary() | st.lists(st.integers()))
def test_arbitrary_objects_never_raise(answer):
    assert isinstance(parse_formula(answer, NAMES), Parsed | Invalid)


@settings(max_examples=80, deadline=None)
@given(near_limit_text())
def test_text_at_the_parser_caps_is_judged_quickly(text):
    """Up to MAX_CHARS characters and MAX_NODES nodes, powers up to 64, literals up to 1e40, nesting as
    deep as Python reads: parsing and the whole formula check each return within the time bound."""
    got = timed(formula.read, text, COURSE_NAMES)  # the kind reads a unit word as a unit
    assert isinstance(got, Parsed | Invalid)
    v = timed(formula.check, "ch99-t0-text", REFERENCE, COURSE_NAMES, ("N",), text)
    assert_as_parsed(v, got, **formula.context(COURSE_NAMES))


@settings(max_examples=150, deadline=None)
@given(st.one_of(answer_text(), hostile_objects()), symbol_names())
def test_invalid_exactly_when_the_parser_rejects(answer, names):
    """formula.check says INVALID (no credit, a sentence saying what to type) for what the parser
    rejects, and judges everything the parser reads as right, partly right or wrong."""
    got = timed(formula.read, answer, names)  # the kind reads a unit word as a unit
    v = timed(formula.check, "ch99-t0-text", "+".join(names), names, (), answer)
    assert isinstance(got, Parsed | Invalid)
    assert_as_parsed(v, got, **formula.context(names))


def test_nested_powers_of_sums_parse_quickly():
    """A power of a sum of powers of sums, at the exponent cap: sympy, evaluating each power as it was
    built, searched the terms' assumptions for minutes (found here, at the caps, on a fresh machine)."""
    nested = "(B+" * 4 + "(B+1)**64" + ")**64" * 4

    def parse_twice() -> None:  # the second time with sympy's caches warm from other answers
        for text in (nested, "B+1", nested):
            assert isinstance(parse_formula(text, COURSE_NAMES), Parsed)

    timed(parse_twice)


def test_a_float_that_is_no_number_is_said_to_be_so():
    """``dot_flops = float('nan')`` was read as the name "nan": "Unknown name 'nan'. Use only these symbols"."""
    import math

    import numpy as np

    from autograder.formula import answer_to_text
    from autograder.record import encode_scalar

    for answer in (math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("inf")):
        assert answer_to_text(answer) == Invalid("not_finite"), answer
        assert encode_scalar("formula", answer) == {"invalid": "not_finite", "detail": ""}
