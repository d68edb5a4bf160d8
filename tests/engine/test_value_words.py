"""A value of the wrong type is named by what the student gave, in every kind's message and in both judges.

A function for ch02-e3 that returned ``np.array([C / W], dtype=np.float32)`` (an array of one value) was told "got a
value of type list": the record wrote the array down as a list of its numbers, and the judge named that list. A
dict, a truth value or a complex number a function returned was named by its class ("a value of type complex64").
``record.describe`` is the one description of a value's type; every kind's message, a whole answer's and each value
a function returns, uses it, and a value that is read as a number (a numpy scalar, a 0-d array, a Fraction, a
Decimal, a sympy number) is judged as the number it holds. Only the words change: each value keeps its verdict.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from autograder import record
from autograder.questions import load_chapter
from autograder.verdict import Status
from tests.chapter_checks import both_judges

CH01, CH02 = load_chapter("ch01_rooflines"), load_chapter("ch02_tpus")
NUMBER = CH02["ch02-e1-flops-per-cycle"]
FORMULA = CH02["ch02-q3-batch-formula"]
CHOICE = CH02["ch02-q6-plan"]
ONE_NUMBER = CH02["ch02-e3-critical-intensity"]  # a function that returns one number
TWO_ARRAYS = CH02["ch02-cx2-systolic"]  # a function that returns two arrays
FORMULA_AND_NUMBER = CH01["ch01-cx3-critical-batch"]  # a function that returns a formula and a number

# Values of a type no question asks for, made from the value asked for, and how every message names them.
DESCRIBED: list[tuple[str, Any, str]] = [
    ("ndarray-(1,)", lambda v: np.array([v], dtype=np.float32), "a NumPy array of shape (1,)"),
    ("ndarray-(2,)", lambda v: np.array([v, v]), "a NumPy array of shape (2,)"),
    ("ndarray-(1,1)", lambda v: np.array([[v]]), "a NumPy array of shape (1, 1)"),
    ("jax-(1,)", lambda v: jnp.array([v]), "a JAX array of shape (1,)"),
    ("jax-(2,)", lambda v: jnp.array([v, v]), "a JAX array of shape (2,)"),
    ("tuple", lambda v: (v, v), "a tuple of 2 values"),
    ("list", lambda v: [v, v], "a list of 2 values"),
    ("dict", lambda v: {"value": v}, "a dict"),
    ("bool", lambda v: True, "a truth value (True)"),
    ("numpy-bool", lambda v: np.bool_(False), "a truth value (False)"),
    ("complex", lambda v: complex(v, 1), "a complex number"),
    ("numpy-complex64", lambda v: np.complex64(v + 1j), "a complex number"),
    ("ndarray-()-complex", lambda v: np.array(v + 1j), "a complex number"),
    ("sympy-I", lambda v: sp.I * v, "a complex number"),
    ("set", lambda v: {v}, "a set"),
]
# The wrappers read as the number they hold: the value asked for in any of them is right.
AS_NUMBERS: list[tuple[str, Any]] = [
    ("ndarray-()", np.array), ("float64", np.float64), ("float32", np.float32),
    ("jax-()", jnp.asarray), ("Fraction", lambda v: Fraction(v).limit_denominator(10**12)),
    ("Decimal", lambda v: Decimal(repr(float(v)))), ("sympy-Float", lambda v: sp.Float(v, 20)),
    ("str", lambda v: repr(float(v))),
]
# Whole numbers, for a count: a numpy, sympy or Python integer.
AS_COUNTS: list[tuple[str, Any]] = [("int64", np.int64), ("int32", np.int32), ("sympy-Integer", sp.Integer),
                                    ("Fraction", Fraction)]


ONE_VALUE = ("(1,)", "(1, 1)")


def _agreeing(q, answer):
    graded, checked = both_judges(q, answer)
    assert (graded.status, graded.diagnosis, graded.message) == (checked.status, checked.diagnosis, checked.message)
    return graded


def _named(message: str, words: str) -> None:
    assert words in message and "of type" not in message, message


@pytest.mark.parametrize("make, words", [d[1:] for d in DESCRIBED], ids=[d[0] for d in DESCRIBED])
@pytest.mark.parametrize("q", [NUMBER, FORMULA, CHOICE], ids=lambda q: q.kind)
def test_an_answer_of_another_type_is_named_by_what_it_is(q, make, words):
    if q is not FORMULA and words.endswith(ONE_VALUE):
        pytest.skip("a number or an option is read from an array of one value (test_an_array_of_one_number...)")
    v = _agreeing(q, make(float(NUMBER.reference)))
    assert v.status is Status.INVALID, v
    _named(v.message, words)


@pytest.mark.parametrize("make, words", [d[1:] for d in DESCRIBED], ids=[d[0] for d in DESCRIBED])
def test_a_function_that_returns_another_type_is_told_what_it_returned(make, words):
    solution = ONE_NUMBER.solution
    v = _agreeing(ONE_NUMBER, lambda **kw: make(solution(**kw)))
    assert v.score == 0 and not v.ok, v  # the verdict the record made before it kept the type
    _named(v.message, words)


@pytest.mark.parametrize("make, words", [d[1:] for d in DESCRIBED if d[0] not in ("tuple", "list")],
                         ids=[d[0] for d in DESCRIBED if d[0] not in ("tuple", "list")])
@pytest.mark.parametrize("q", [TWO_ARRAYS, FORMULA_AND_NUMBER], ids=lambda q: q.qid)
def test_each_value_a_function_returns_is_named_by_what_it_is(q, make, words):
    """Two values of another type, where two arrays, or a formula and a number, are asked (an array where an array
    is asked is judged by its shape: tests/engine/test_array_shapes.py)."""
    if q is TWO_ARRAYS and "array of shape" in words:
        pytest.skip("an array is the type asked for")
    v = _agreeing(q, lambda *a, **kw: (make(2.5), make(2.5)))
    assert v.score == 0 and not v.ok, v
    _named(v.message, words)


@pytest.mark.parametrize("make", [d[1] for d in DESCRIBED if d[2].endswith(ONE_VALUE)],
                         ids=[d[0] for d in DESCRIBED if d[2].endswith(ONE_VALUE)])
def test_an_array_of_one_number_is_that_number_as_an_answer_but_not_as_a_returned_value(make):
    """A whole answer is read from an array that holds one number, as ever; a function's returned value is not
    (each kept its verdict), and is told to return ``x.item()``."""
    assert _agreeing(NUMBER, make(float(NUMBER.reference))).status is Status.CORRECT
    solution = ONE_NUMBER.solution
    v = _agreeing(ONE_NUMBER, lambda **kw: make(solution(**kw)))
    assert v.score == 0 and "x.item()" in v.message, v.message


def test_a_number_where_an_array_is_asked_is_called_a_number():
    v = _agreeing(TWO_ARRAYS, lambda *a, **kw: (2.5, 2.5))
    assert "returned a number" in v.message and "float" not in v.message, v.message


@pytest.mark.parametrize("make", [m for _, m in AS_NUMBERS], ids=[n for n, _ in AS_NUMBERS])
def test_a_number_in_any_library_is_read_as_that_number(make):
    solution = ONE_NUMBER.solution
    assert _agreeing(ONE_NUMBER, lambda **kw: make(solution(**kw))).status is Status.CORRECT
    assert _agreeing(NUMBER, make(float(NUMBER.reference))).status is Status.CORRECT


@pytest.mark.parametrize("make", [m for _, m in AS_COUNTS], ids=[n for n, _ in AS_COUNTS])
def test_a_whole_number_in_any_library_is_read_as_that_count(make):
    assert _agreeing(NUMBER, make(int(NUMBER.reference))).status is Status.CORRECT


def test_none_is_a_forgotten_return_or_no_answer():
    assert "returned None" in _agreeing(ONE_NUMBER, lambda **kw: None).message
    assert _agreeing(NUMBER, None).diagnosis == "empty"


@pytest.mark.parametrize("make, words", [d[1:] for d in DESCRIBED], ids=[d[0] for d in DESCRIBED])
def test_describe_is_the_one_description(make, words):
    assert record.describe(make(2.5)) == words
