"""An array a function returns is judged by its shape before its elements, by both judges alike.

ch03-e5 asks for the AllGather matrix G [p*p*n, p*n] and the ReduceScatter matrix R [p*n, p*p*n]. Its record held
each returned array as a flat list of numbers, so ``G, G.T.copy().reshape(G.shape)`` (R the wrong way round) and
``G.ravel(), G.T.ravel()`` earned full marks, and ``G, G`` was told that half of R's elements were wrong where its
shape is what is wrong. Now the record keeps each array's shape (its values as nested lists), the reference's
shape is part of the self-check data, and a result of another shape is wrong with both shapes named.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from autograder import record
from autograder.checks import judge
from autograder.kinds import function as fn_kind
from autograder.questions import load_chapter
from autograder.verdict import Status
from solutions.ch03_sharding import gather_scatter_matrices
from tests.chapter_checks import both_judges, printed, recorded

E5 = load_chapter("ch03_sharding")["ch03-e5-matrices"]
LOCAL_SHAPE = load_chapter("ch03_sharding")["ch03-cx1-local-shape"]


def _agreeing(q, answer):
    graded, checked = both_judges(q, answer)
    assert (graded.status, graded.diagnosis, graded.message) == (checked.status, checked.diagnosis, checked.message)
    return graded


def _r_as_g_shaped(n, p):
    g, r = gather_scatter_matrices(n, p)
    return g, r.copy().reshape(g.shape)


def _flattened(n, p):
    g, r = gather_scatter_matrices(n, p)
    return g.ravel(), r.ravel()


def _g_twice(n, p):
    g, _ = gather_scatter_matrices(n, p)
    return g, g


@pytest.mark.parametrize("answer, got, want", [
    (_r_as_g_shaped, "(4, 2)", "(2, 4)"),
    (_flattened, "(8,)", "(4, 2)"),
    (_g_twice, "(4, 2)", "(2, 4)"),
], ids=["r-reshaped-as-g", "both-flattened", "g-twice"])
def test_e5_matrices_of_another_shape_are_wrong_with_both_shapes_named(answer, got, want):
    v = _agreeing(E5, answer)
    assert v.status is Status.INCORRECT and v.diagnosis == "returned:shape", v
    assert f"shape {got}" in v.message and f"shape {want}" in v.message, v.message
    assert "elements of the returned array are wrong" not in v.message, v.message


def test_e5_right_matrices_pass_as_arrays_and_as_nested_lists():
    assert _agreeing(E5, gather_scatter_matrices).ok
    assert _agreeing(E5, lambda n, p: tuple(m.tolist() for m in gather_scatter_matrices(n, p))).ok


def test_the_grade_on_drawn_cases_judges_the_shape_too():
    """The grade counts the cases drawn for a submission, recorded by ``encode_drawn``: the shape is judged there."""
    fp = printed(E5)
    drawn = fn_kind.drawn_probes(E5, "some-seed")
    for answer, ok in ((gather_scatter_matrices, True), (_flattened, False), (_r_as_g_shaped, False)):
        rec = json.loads(json.dumps(fn_kind.encode_drawn(fp, answer, drawn)))
        v = judge(E5, rec, "some-seed")
        assert v.ok is ok and (ok or v.diagnosis == "returned:shape"), v


def test_a_one_dimensional_result_is_any_sequence_of_its_length_but_not_a_column():
    """A 1-d reference accepts a tuple, a list or an array of its length alike; a column (n, 1) is another shape."""
    for shaped in (tuple, list, np.array):
        assert _agreeing(LOCAL_SHAPE, lambda s=shaped, **kw: s(LOCAL_SHAPE.solution(**kw))).ok
    v = _agreeing(LOCAL_SHAPE, lambda **kw: np.array(LOCAL_SHAPE.solution(**kw)).reshape(-1, 1))
    assert v.diagnosis == "returned:shape" and "shape (2, 1)" in v.message and "shape (2,)" in v.message, v.message


def test_ragged_nested_lists_are_no_shape():
    v = _agreeing(E5, lambda n, p: ([[1.0]] + [[0.0, 1.0]] * (p * p * n - 1), gather_scatter_matrices(n, p)[1]))
    assert v.diagnosis == "returned:shape" and "unequal lengths" in v.message, v.message


def test_a_wrong_element_of_a_matrix_is_named_by_its_row_and_column():
    def one_off(n, p):
        g, r = gather_scatter_matrices(n, p)
        g = g.copy()
        g[1, 0] += 1
        return g, r

    v = _agreeing(E5, one_off)
    assert v.diagnosis == "wrong_elements" and "element (1, 0)" in v.message, v.message


def test_the_record_keeps_the_shape_of_an_array_and_of_nested_lists():
    x = np.arange(6.0).reshape(2, 3)
    assert record._encode_item("array", x) == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert record._encode_item("array", [np.array([0.0, 1.0]), (2, 3)]) == [[0.0, 1.0], [2.0, 3.0]]
    assert record._encode_item("array", (1, 2)) == [1.0, 2.0]  # 1-d: as before


def test_the_self_check_data_holds_each_array_outputs_shape():
    out = printed(E5)["outputs"][0]
    assert [o["shape"] for o in out] == [[4, 2], [2, 4]]
    assert recorded(E5, gather_scatter_matrices)[0][1] == np.kron(np.ones((1, 2)), np.eye(2)).tolist()


# --- every function question with an array output ---------------------------------------------------------------

ARRAY_FUNCTIONS = [(name, q) for name in ("ch01_rooflines", "ch02_tpus", "ch03_sharding", "ch04_transformers",
                                          "ch07_inference", "ch09_profiling", "ch10_jax", "ch11_capstone")
                   for q in load_chapter(name).questions if q.kind == "function" and "array" in fn_kind._kinds(q)]


def _other_shape(solution, position, how):
    """``solution`` with its returned array at ``position`` given another shape of the same values."""
    def answer(*args, **kwargs):
        out = solution(*args, **kwargs)
        items = list(out) if isinstance(out, tuple) else [out]
        a = np.asarray(items[position])
        items[position] = (a.reshape(-1) if a.ndim >= 2 else a.reshape(-1, 1)) if how == "flat-or-column" \
            else a.reshape(a.shape[::-1])
        return tuple(items) if isinstance(out, tuple) else items[0]
    return answer


def test_every_array_question_is_listed():
    assert {q.qid for _, q in ARRAY_FUNCTIONS} >= {"ch03-e5-matrices", "ch07-cx2-decode-step", "ch10-q1-roll-in-shard"}


@pytest.mark.parametrize("q", [q for _, q in ARRAY_FUNCTIONS], ids=lambda q: q.qid)
def test_every_array_reference_has_the_shape_of_its_model(q):
    """The reference states the shape its results have (nested lists or an array, never flattened): the model
    answer, the array the prompt describes, is judged right, and the self-check data holds that shape."""
    kinds = fn_kind._kinds(q)
    rec = json.loads(json.dumps(recorded(q, q.solution)))
    out = printed(q)["outputs"]
    for case, items in enumerate(rec):
        for n, kind in enumerate(kinds):
            if kind == "array":
                assert list(fn_kind.nested_shape(items[n])) == out[case][n]["shape"], (case, n)
    assert judge(q, rec).ok


@pytest.mark.parametrize("how", ["flat-or-column", "reversed"])
@pytest.mark.parametrize("q", [q for _, q in ARRAY_FUNCTIONS], ids=lambda q: q.qid)
def test_every_array_output_of_another_shape_is_wrong_in_both_judges(q, how):
    kinds = fn_kind._kinds(q)
    for position in (n for n, k in enumerate(kinds) if k == "array"):
        shapes = [tuple(o[position]["shape"]) for o in printed(q)["outputs"]]
        if how == "reversed" and all(s == s[::-1] for s in shapes):
            continue  # no other shape by reversing (a square matrix, a vector)
        v = _agreeing(q, _other_shape(q.solution, position, how))
        assert not v.ok and v.diagnosis == "returned:shape", (position, v)


def test_an_array_of_entries_that_are_no_real_numbers_is_said_to_be_so():
    """A masked entry, a complex value or arrays inside an object array's cells: "your function returned a array
    (TypeError)" named neither the trouble nor its article."""
    import numpy as np

    from autograder.record import UNREAD_ARRAY, encode_outputs

    masked = np.ma.masked_array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 1], [0, 0]])
    cells = np.empty((2, 2), dtype=object)
    for i in range(2):
        for j in range(2):
            cells[i, j] = np.array([1.0])
    for bad in (masked, np.ones((2, 2)) * 1j, cells):
        assert encode_outputs(lambda b=bad: b, [((), {})], ["array"]) == [[{"invalid": "wrong_type",
                                                                             "detail": UNREAD_ARRAY}]], bad
    from autograder.kinds.function import _returned

    assert _returned({"invalid": "wrong_type", "detail": UNREAD_ARRAY}).startswith("an array whose entries")
