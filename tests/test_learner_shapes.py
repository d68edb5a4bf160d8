"""What a learner reads when a number comes in a container, and when a check cell runs before its answer cell.

- an array of one number (``jnp.array([t])``, ``np.array([[t]])``) is that number, as a 0-d array is, in both
  judges and in the demo cells' reader; a list or tuple of one (``[t]``, ``t,``), and an array of several values,
  are refused with their shape and what to give instead, never a library's class name.
- a check cell run before its answer cell (its argument is a name no cell has set yet) says in one line to run
  the answer cell first; a NameError anywhere else keeps Python's own traceback.
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from autograder import record
from autograder.checks import judge
from autograder.kinds import function as fn_kind
from autograder.messages import phrase
from autograder.questions import load_chapter
from autograder.verdict import Status
from course.answers import AnswerError, check, verdict
from tests.chapter_checks import recorded

TIME = load_chapter("ch01_rooflines")["ch01-e1-h100-time"]  # a number in s
FORMULA = load_chapter("ch01_rooflines")["ch01-e2-dot-flops"]
CHOICE = load_chapter("ch12_gpus")["ch12-e6-shard-bandwidth"]  # options '450', '370', '150'
CLASS_NAMES = ("ArrayImpl", "ndarray", "Array", "type list", "type tuple", "of type")


def _both(q, answer):
    """The self-check's verdict and the grader's (on the record, through JSON), which must agree."""
    s = verdict(q.qid, answer)
    g = judge(q, json.loads(json.dumps(recorded(q, answer))))
    assert (s.status, s.diagnosis, s.message) == (g.status, g.diagnosis, g.message), (s, g)
    return s


# --- one number in a container --------------------------------------------------------------------------

ONE_ELEMENT_ARRAYS = {
    "jnp-(1,)": lambda t: jnp.array([t]),
    "np-(1,)": lambda t: np.array([t]),
    "np-(1,1)": lambda t: np.array([[t]]),
    "jnp-(1,1,1)": lambda t: jnp.array([[[t]]]),
    "np-float32-(1,)": lambda t: np.array([t], dtype=np.float32),
}


@pytest.mark.parametrize("make", list(ONE_ELEMENT_ARRAYS.values()), ids=list(ONE_ELEMENT_ARRAYS))
def test_an_array_of_one_number_is_that_number_in_both_judges(store, make, capsys):
    """A 0-d array is a number; so is an array of one element, whatever its shape: the value is not in doubt."""
    answer = make(TIME.reference)
    assert _both(TIME, answer).status is Status.CORRECT
    check(TIME.qid, answer)
    assert "correct" in capsys.readouterr().out


def test_a_wrong_array_of_one_number_is_diagnosed_like_the_number(store):
    v = _both(TIME, jnp.array([TIME.reference * 1000]))
    assert v.status is Status.INCORRECT and v.diagnosis == _both(TIME, TIME.reference * 1000).diagnosis, v


def test_an_array_of_one_option_value_is_that_option():
    assert _both(CHOICE, np.array([150])).status is Status.CORRECT


def test_the_demo_cells_read_an_array_of_one_number_as_the_judges_do():
    import course

    assert course.as_number(jnp.array([1.5e-3]), "s") == pytest.approx(1.5e-3)


@pytest.mark.parametrize(("answer", "says", "fix"), [
    ([2.5e-3], "a list of one value", "x[0]"),
    ((2.5e-3,), "a tuple of one value", "a comma after a value makes a tuple"),
    ([[2.5e-3]], "a list of one value", "not the list"),
    ([1e-3, 2e-3], "a list of 2 values", "not a list of them"),
    (np.array([1e-3, 2e-3]), "a NumPy array of shape (2,)", "not an array of them"),
    (jnp.zeros((2, 3)), "a JAX array of shape (2, 3)", "the one value the question asks for"),
], ids=["list", "tuple", "nested-list", "list-of-2", "np-(2,)", "jnp-(2,3)"])
def test_a_number_in_a_list_tuple_or_larger_array_is_told_its_shape_and_the_fix(store, answer, says, fix):
    v = _both(TIME, answer)
    assert v.status is Status.INVALID and says in v.message and fix in v.message, v.message
    assert not any(name in v.message for name in CLASS_NAMES), v.message
    with pytest.raises(AnswerError) as e:
        check(TIME.qid, answer)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_choice_in_an_array_of_several_values_is_told_its_shape():
    v = _both(CHOICE, np.array([150, 370]))
    assert v.status is Status.INVALID and "a NumPy array of shape (2,)" in v.message, v.message
    assert not any(name in v.message for name in CLASS_NAMES), v.message


@pytest.mark.parametrize("answer", [jnp.array([2.0]), np.array([sp.Symbol("N")])], ids=["jnp-(1,)", "object-array"])
def test_a_formula_in_an_array_names_its_shape_not_its_class(answer):
    v = _both(FORMULA, answer)
    assert v.status is Status.INVALID and "array of shape (1,)" in v.message and "x.item()" in v.message, v.message
    assert not any(name in v.message for name in CLASS_NAMES), v.message


def test_a_function_returning_a_list_of_lists_where_an_array_is_asked_gives_its_values():
    """Nested lists are an array's values in order (an array's .tolist()), in rows the record keeps (the shape is
    judged: ``tests/engine/test_array_shapes.py``); a ragged nesting has no shape, which the judge refuses."""
    from autograder import record

    assert record._encode_item("array", [[1.0, 2.0], [3.0, 4.0]]) == [[1.0, 2.0], [3.0, 4.0]]
    assert fn_kind.flat(record._encode_item("array", [[1.0, 2.0], [3.0, 4.0]])) == [1.0, 2.0, 3.0, 4.0]
    assert record._encode_item("array", [[1.0], [2.0, 3.0]]) == [[1.0], [2.0, 3.0]]
    assert fn_kind.nested_shape([[1.0], [2.0, 3.0]]) is None


# --- a check cell run before its answer cell ------------------------------------------------------------

@pytest.mark.parametrize("cell", ['check("ch01-e1-h100-time", t_h100)',
                                  'check("ch01-e1-h100-time", float(t_h100))',
                                  'import course\ncourse.check(\n    "ch01-e1-h100-time",\n    t_h100,\n)'],
                         ids=["bare", "inside-a-call", "course.check-over-lines"])
def test_a_check_before_its_answer_cell_says_run_that_cell_in_one_line(shell, cell):
    result = shell.run_cell(cell)
    assert isinstance(result.error_in_exec, NameError)  # the cell still fails: Run All stops, validate counts it
    assert len(shell.shown) == 1 and len(shell.shown[0]) == 1, shell.shown
    line = shell.shown[0][0]
    assert "\n" not in line and line.startswith("NameError: name 't_h100' is not defined"), line
    assert "run the answer cell above (the one that sets t_h100) first" in line, line


@pytest.mark.parametrize("cell", ["print(not_defined_anywhere)",
                                  "def f():\n    return not_defined_anywhere\ncheck('ch01-e1-h100-time', f())",
                                  "x = 1e-3\nnot_defined_anywhere\ncheck('ch01-e1-h100-time', x)"],
                         ids=["no-check", "inside-a-function", "another-line"])
def test_other_name_errors_keep_their_traceback(shell, cell, capsys):
    result = shell.run_cell(cell)
    assert isinstance(result.error_in_exec, NameError)
    assert len(shell.shown) == 1 and len(shell.shown[0]) > 1, shell.shown
    text = "\n".join(shell.shown[0])
    assert "not_defined_anywhere" in text and "answer cell" not in text, text


def test_a_kernel_with_its_own_exception_handler_keeps_it():
    """The course adds its handler only where the kernel has none: IPython holds one handler for all."""
    from IPython.core.interactiveshell import InteractiveShell

    from course.answers import show_run_first

    sh = InteractiveShell.instance()
    before = sh.custom_exceptions, sh.CustomTB
    seen = []
    try:
        sh.set_custom_exc((KeyError,), lambda self, etype, value, tb, tb_offset=None: seen.append(etype))
        show_run_first(sh)
        assert sh.custom_exceptions == (KeyError,)
        sh.run_cell("{}['k']")
        assert seen == [KeyError]
    finally:
        sh.custom_exceptions, sh.CustomTB = before


# --- one plain-words description of a value of the wrong type, for every kind -----------------------

FUNCTION = load_chapter("ch01_rooflines")["ch01-cx2-attainable"]
BOUND = load_chapter("ch01_rooflines")["ch01-e2-bound"]  # options 'compute', 'memory'
INTERNAL = ("Mul", "ArrayImpl", "NoneType", "float64", "ndarray", "MutableDenseMatrix", "type list", "type tuple",
            "of type")


@pytest.mark.parametrize(("q", "answer", "says", "fix"), [
    (FORMULA, [2 * sp.Symbol("N", positive=True) - 1], "a list of one value", "x[0]"),
    (FORMULA, (2 * sp.Symbol("N", positive=True) - 1,), "a tuple of one value", "x[0]"),
    (BOUND, ["memory"], "a list of one value", "x[0]"),
    (FORMULA, sp.Matrix([2 * sp.Symbol("N", positive=True) - 1]), "a sympy Matrix of shape (1, 1)", "M[0]"),
    (TIME, sp.Matrix([1e-3]), "a sympy Matrix of shape (1, 1)", "M[0]"),
    (FORMULA, jnp.array([2.0, 3.0]), "a JAX array of shape (2,)", "not an array of them"),
], ids=["formula-list", "formula-tuple", "choice-list", "formula-matrix", "number-matrix", "formula-jax-(2,)"])
def test_every_kind_describes_a_container_in_words_with_its_fix(store, q, answer, says, fix):
    v = _both(q, answer)
    assert v.status is Status.INVALID and says in v.message and fix in v.message, v.message
    assert "x.item()" not in v.message or "Matrix" not in v.message, v.message  # a Matrix has no .item()
    assert not any(name in v.message for name in INTERNAL), v.message


@pytest.mark.parametrize(("answer", "says"), [
    (2 * sp.Symbol("N", positive=True) - 1, "a formula"),
    (jnp.array([1.0, 2.0]), "a JAX array of shape (2,)"),
    (np.float64(3.0), "a number"),
    ("lambda x: x", "text"),
], ids=["sympy", "jax", "float64", "str"])
def test_a_function_question_describes_what_it_got_in_words(store, answer, says):
    v = _both(FUNCTION, answer)
    assert v.status is Status.INVALID and f"got {says}" in v.message, v.message
    assert not any(name in v.message for name in INTERNAL), v.message


def test_none_for_a_function_is_no_answer_yet_as_for_a_number(store):
    assert _both(FUNCTION, None).message == _both(TIME, None).message


def test_a_number_times_a_unit_symbol_is_the_number_in_that_unit(store):
    """``0.00101*s`` with a sympy symbol s: recorded as text "0.00101*s", read as 0.00101 s, not as the unit "*s"."""
    s = sp.Symbol("s")
    v = _both(TIME, sp.Float(TIME.reference) * s)
    assert v.status is Status.CORRECT, v.message
    v = _both(TIME, sp.Float(TIME.reference) * sp.Symbol("parsec"))
    assert "'*" not in v.message, v.message


@pytest.mark.parametrize(("text", "unit", "value"), [("0.00101*s", "s", 0.00101), ("0.00101 * ms", "s", 1.01e-6),
                                                     ("(2+1)*GB", "GB", 3.0)])
def test_a_number_times_a_unit_reads_alike_in_the_self_check_form_the_grader_and_a_choice(text, unit, value):
    """The rule lives in ``numbers.parse_number``, so every reader agrees: ``course.as_number`` (the self-check
    form), the number kind (the grader) and a choice's option values."""
    from autograder import numbers
    from autograder.kinds import number
    from course.answerforms import as_number

    assert as_number(text, unit) == pytest.approx(value)
    assert number.read(text, unit).value == pytest.approx(value)
    assert numbers.parse_number(text, unit).value == pytest.approx(value)


@pytest.mark.parametrize("text", ["2*B", "4*(N + 1)*B", "3*T"])
def test_a_capital_after_a_times_sign_stays_a_formula(text):
    from autograder import numbers

    p = numbers.parse_number(text, "B")
    assert getattr(p, "code", None) == "formula_for_number", p


@pytest.mark.parametrize("name", sorted(set(record.ARRAY_NAMES.values())))
def test_every_named_array_is_told_its_fix(name):
    """The container's fix is read off ``record.ARRAY_NAMES``: a library added there is told it too."""
    message = phrase("wrong_type", detail=f"{name} of shape (1,)", expected="a number")
    assert message.startswith(f"Expected a number, got {name} of shape (1,): give the one value it holds"), message


@pytest.mark.parametrize(("detail", "words"), [
    ("int", "a value of type int"), ("a formula", "a formula"), ("text", "text"), ("bytes", "bytes"),
    ("nothing (None)", "nothing (None)")])
def test_an_old_records_bare_type_is_said_in_words_by_every_message(detail, words):
    """A record made before ``record.describe`` holds a type's name: one ``record.in_words`` says it for both."""
    assert record.in_words(detail) == words
    assert phrase("wrong_type", detail=detail, expected="a number") == f"Expected a number, got {words}."
    if detail != "nothing (None)":  # a function question's None is no answer yet
        v = fn_kind.diagnose([], [], {"error": fn_kind.NOT_A_FUNCTION + detail})
        assert f"got {words}:" in v.message, v.message


ARRAY_FUNCTIONS = [q for name in ("ch02_tpus", "ch03_sharding", "ch04_transformers", "ch09_profiling")
                   for q in load_chapter(name).questions
                   if q.kind == "function" and "array" in fn_kind._kinds(q)]


def _as_nested_lists(solution):
    def listed(*args, **kwargs):
        out = solution(*args, **kwargs)
        items = out if isinstance(out, tuple) else (out,)
        listed_items = tuple(np.asarray(x).tolist() if np.ndim(x) >= 2 else x for x in items)
        return listed_items if isinstance(out, tuple) else listed_items[0]
    return listed


@pytest.mark.parametrize("q", ARRAY_FUNCTIONS, ids=lambda q: q.qid)
def test_an_array_returned_as_nested_lists_is_read_as_its_values(q):
    """``.tolist()`` of the right array is the right answer. ch04-cx3's attention output has B = 1: its nested lists
    were read as the one value wrapped in a list ("return it without the brackets"), and a list of 32 lists as no
    array at all; both scored 0 where the array itself passed."""
    answer = _as_nested_lists(q.solution)
    s = verdict(q.qid, answer)
    g = judge(q, json.loads(json.dumps(recorded(q, answer))))
    assert s.ok and g.ok, (s.message, g.message)
