"""A function's returned numbers are compared "up to float rounding", and that rounding includes float32's (JAX's
default): every function question's model outputs cast to float32, with numpy or with jnp, earn full marks from
the grader and the self-check alike, while a slip of 1e-3 still fails both and a count returned as an int stays
exact."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from autograder import probes
from autograder.checks import judge
from autograder.kinds import function as fn_kind
from autograder.kinds import selfcheck_live
from autograder.questions import Function, Output, chapter_names, load_chapter
from autograder.verdict import Status
from solutions._kit import EXACT
from tests.chapter_checks import printed, recorded

FUNCTIONS = [q for name in chapter_names() for q in load_chapter(name).questions if isinstance(q, Function)]
CASTS = {"numpy": np.float32, "jnp": lambda x: jnp.asarray(x, dtype=jnp.float32)}


def _is_number(x) -> bool:
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)


def _each_output(q: Function, result, change):
    """The function's result with ``change(x, n)`` applied to its n-th returned item where that is a number or an
    array (formulas, text and flags as they are)."""
    items = (result,) if len(q.outputs) == 1 else tuple(result)

    def one(x, n):
        if isinstance(x, sp.Basic | str | bool) or x is None:
            return x
        numeric = (isinstance(x, list | tuple) or hasattr(x, "__array__")) and np.asarray(x).dtype.kind in "fiu"
        if _is_number(x) or numeric:  # a JAX array too
            return change(np.asarray(x, dtype=np.float64), n)
        return x
    out = tuple(one(x, n) for n, x in enumerate(items))
    return out[0] if len(q.outputs) == 1 else out


def _answer(q: Function, change):
    """A function returning the model's outputs on each public case, changed: the model runs once per case."""
    calls = [probes.build(q.builder, p) for p in q.probes]
    results = [q.solution(*args, **kwargs) for args, kwargs in calls]
    at = iter(range(len(results)))
    return lambda *args, **kwargs: _each_output(q, results[next(at) % len(results)], change)


def _both(q: Function, answer):
    rec = recorded(q, answer)
    return judge(q, json.loads(json.dumps(rec))), selfcheck_live(printed(q), q.qid, answer, rec)


@pytest.mark.parametrize("q", [pytest.param(q, marks=getattr(pytest.mark, q.chapter[:4]), id=q.qid)
                               for q in FUNCTIONS])
def test_float32_outputs_earn_full_marks_and_a_slip_of_a_thousandth_fails(q):
    for how, cast in CASTS.items():
        graded, checked = _both(q, _answer(q, lambda x, n, cast=cast: cast(x)))
        assert graded.status is Status.CORRECT and graded.score == 1, f"{q.qid} ({how}): grader: {graded.message}"
        assert checked.status is Status.CORRECT, f"{q.qid} ({how}): self-check: {checked.message}"
    tight = {n for n, o in enumerate(q.outputs) if _tight(o)}
    if not any(_tight_values(q)):
        return  # no output asked to float rounding, or all of them zero on the public cases: no slip to see
    graded, checked = _both(q, _answer(q, lambda x, n: np.float32(x * (1 + 1e-3) if n in tight else x)))
    assert graded.score < 1 and checked.status is not Status.CORRECT, f"{q.qid}: a slip of 1e-3 passes"
    assert graded.status == checked.status and graded.diagnosis == checked.diagnosis, (graded, checked)


def _tight(o: Output) -> bool:
    """An output asked to float rounding, which a slip of 1e-3 is outside of."""
    return o.kind == "number" and o.tolerance.rtol < 1e-4 and not o.tolerance.is_range


def _tight_values(q: Function) -> list[float]:
    """The reference's values of the outputs asked to float rounding, over the public cases."""
    out = []
    for p in q.probes:
        expected = q.reference(**p)
        items = (expected,) if len(q.outputs) == 1 else tuple(expected)
        for o, x in zip(q.outputs, items, strict=True):
            if _tight(o):
                out += [float(v) for v in np.ravel(np.asarray(x, dtype=np.float64))]
    return out


def _judges(reference: float, tolerance=EXACT):
    """The grader's and the self-check's judge of one returned number asked to ``tolerance``."""
    spec = Output("number", tolerance=tolerance)
    grader = fn_kind._reference_judge("precision/0/0", spec, reference)
    checker = fn_kind._print_judge("precision/0/0", fn_kind._item_print("precision/0/0", spec, reference))
    return grader, checker


@pytest.mark.parametrize(("reference", "got", "ok"), [
    (123456789.0, float(np.float32(123456789)), True),  # float32 cannot hold the count: its nearest value passes
    (123456789.0, 123456790.0, False),  # an int off by one, which float32 cannot hold: still wrong
    (56.0, 57.0, False),
    (56.0, 56.0, True),
    (2 / 3, float(np.float32(2) / np.float32(3)), True),
    (2 / 3, 2 / 3 * (1 + 3e-7), False),  # a float64 value off by more than float64 rounding
    (2 / 3, float(np.float32(2 / 3 * (1 + 1e-5))), False),  # float32, but off by more than its rounding
    (1e-12, float(np.float32(1e-12)), True),
])
def test_float32_rounding_is_accepted_and_nothing_else(reference, got, ok):
    for name, judge_one in zip(("grader", "self-check"), _judges(reference), strict=True):
        v = judge_one(got)
        assert v.ok is ok, f"{name}: {got!r} against {reference!r}: {v.message}"
        if not ok:
            assert "float rounding" in v.message or "whole number" in v.message, v.message


def test_an_array_of_float32_values_passes_element_by_element():
    reference = [1 / 3, 2 / 7, 123456789.0]
    got = [float(np.float32(x)) for x in reference]
    for judge_one in _judges(reference):
        assert judge_one(got).ok
        assert not judge_one([got[0], got[1] * (1 + 1e-3), got[2]]).ok


def test_the_failing_case_names_small_shapes_and_which_returned_value():
    """A probe's pair of shapes is shown by its values; a returned value is counted out of how many."""
    q = next(q for q in FUNCTIONS if q.qid == "ch01-cx1-intensity")
    graded, checked = _both(q, _answer(q, lambda x, n: np.float32(x * (1 + 1e-3) if n == 2 else x)))
    for v in (graded, checked):
        assert "shapes=[[" in v.message and "array of shape (2, 2)" not in v.message, v.message
        assert "returned value 3 of 3" in v.message and "float rounding" in v.message, v.message
