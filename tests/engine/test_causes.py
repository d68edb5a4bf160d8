"""A diagnosis never asserts a cause its evidence does not determine.

1. "Close, but the question accepts N significant figures" only where a rounding explains the answer: the
   reference, rounded (or cut off) to the figures the answer carries, could give it. An exact count answered by a
   whole number is never a precision slip: one away is "off by one", further is "close_count". Near a range,
   the words speak of the range, not of its reference.
2. A slip's hint keyed on a value that other simple mistakes reach too (twice or half a number of bytes, one more
   or less of an exact count) is told as one possible cause (``Slip.maybe``), and the release names such slips.
3. A program whose entries are each the max (or min) of the shares has reduced them, with the wrong operation:
   it is not told that a psum is missing.
"""

from __future__ import annotations

import inspect
import math

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from autograder.kinds import number
from autograder.numbers import Tolerance
from autograder.programs import judge_report, run
from autograder.questions import Number, Slip, load_chapter
from course.devices import mesh
from tests.chapter_checks import both_judges
from tests.engine.test_program_diagnoses import CASE3, DP, case3_no_psum, dp_grad_no_psum, dp_local, smap

CLOSE = "Close, but the question accepts"
FAR = "Within 25% of the expected value, but further off than a rounding explains"
RANGE_FAR = "Within 25% of the expected range, but further outside it than a rounding of its ends explains"
COUNT = "Within 25% of the expected count, but not it"
OFF_BY_ONE = "Off by one: check where the count starts and ends ("
ROUNDED = "Off by one: check where the count starts and ends, and how the division that gives it rounds, floor against"


def _number(reference: float, *, exact: bool = False, tolerance: Tolerance | None = None, unit: str = "",
            prompt: str = "How many (exact).", slips: tuple[Slip, ...] = ()) -> Number:
    extra = {"tolerance": tolerance} if tolerance is not None else {}
    return Number(qid="ch99-t1-count", points=1, prompt=prompt, reference=reference, unit=unit, exact=exact,
                  slips=slips or (Slip(reference * 10, "magnitude:+1"),), **extra)


def _said(q: Number, answer: object) -> str:
    graded, checked = both_judges(q, answer)
    assert graded.diagnosis == checked.diagnosis and graded.message == checked.message, (graded, checked)
    return graded.message


# --- 1. a precision message only where a rounding explains the answer ---------------------------------------------

TOTAL = 70_553_706_496.0  # LLaMA 3-70B's parameters, the reference; asked to 3 figures (±0.5%)


@pytest.mark.parametrize("answer", [
    69_216_694_272,  # an exact 11-digit count 1.9% off (the K projections dropped): more digits cannot fix it
    TOTAL * 0.981,  # the same off by as much, as a float of 17 figures
    "6.92e10",  # 3 figures, further off than its last figure
])
def test_an_answer_no_rounding_explains_is_not_told_to_keep_more_figures(answer):
    message = _said(_number(TOTAL, tolerance=Tolerance.figures(3), prompt="All parameters."), answer)
    assert message.startswith(FAR) and CLOSE not in message, message


@pytest.mark.parametrize(("reference", "answer"), [
    (TOTAL, 7e10),  # 1 figure: 70.55e9 cut to 7e10
    (6.957e10, "6.9e10"),  # 2 figures, cut off: within one unit of the last
    (4096.0, 4000),  # 1 figure
    (2.049e-3, "2.0 ms"),  # a unit read: 2.0e-3 s has 1 figure
    (2.36e-6, "2.3 us"),  # read as 2.2999999999999996e-06 s: float noise is no figure
])
def test_a_rounding_of_the_reference_is_told_to_keep_more_figures(reference, answer):
    unit = "s" if isinstance(answer, str) and answer.endswith("s") else ""
    message = _said(_number(reference, tolerance=Tolerance.figures(3), prompt="A value.", unit=unit), answer)
    assert message.startswith(CLOSE), message


@pytest.mark.parametrize(("reference", "answer", "said"), [
    (40, 41, OFF_BY_ONE), (40, 39, OFF_BY_ONE), (7, 6, OFF_BY_ONE),
    (40, 43, COUNT), (40, 37.0, COUNT),  # an integer off by 3: not "close" for precision
    (40, 40.4, CLOSE), (40, 39.6, CLOSE),  # a count left unrounded: the exact whole number is asked
    (40, 42.5, FAR),
])
def test_an_exact_count_off_by_a_whole_number_is_no_precision_slip(reference, answer, said):
    message = _said(_number(reference, exact=True), answer)
    assert message.startswith(said), message
    if said != CLOSE:
        assert CLOSE not in message


@pytest.mark.parametrize("answer", [41, 39])
def test_floor_against_round_is_said_only_of_a_rounded_count(answer):
    """A count of things counted (hops, accepted tokens) has no rounding to check; one the record declares a rounded
    quotient (the sequences that fit) is told to check it, by both judges, a function's output as a number's."""
    from autograder.kinds import number

    assert "round" not in _said(_number(40, exact=True), answer)
    assert _said(_number(40, exact=True, tolerance=Tolerance.exact_count(rounded=True)), answer).startswith(ROUNDED)
    assert "round" not in number.check("ch99-t1-fn/0", 40.0, "", Tolerance(rtol=1e-9), answer).message
    rounded = number.check("ch99-t1-fn/0", 40.0, "", Tolerance(rtol=1e-9, rounded=True), answer).message
    assert rounded.startswith(ROUNDED), rounded


@pytest.mark.parametrize(("answer", "said"), [
    (15.3, CLOSE), (13.6, CLOSE),  # just past an end of the range: as near as a rounding of it
    (17.67, RANGE_FAR), (11.5, RANGE_FAR),  # 18% past an end (a classmate's value): within 25% of it, no more
])
def test_a_value_far_past_a_range_is_not_called_close(answer, said):
    """A range of 14 to 15 (ch05-e8-gemma-tp, the book's "about 14 or 15"): "Close" only near its ends."""
    message = _said(_number(14.456, tolerance=Tolerance(low=14, high=15), prompt="A value."), answer)
    assert message.startswith(said), message
    if said != CLOSE:
        assert CLOSE not in message


def test_the_diagnosis_stays_close_so_declared_slips_keep_it():
    q = _number(40, exact=True)
    for answer in (41, 43, 40.4):
        graded, checked = both_judges(q, answer)
        assert graded.diagnosis == checked.diagnosis == "close"


def test_a_function_whose_number_is_off_by_three_is_no_rounding():
    """ch08-cx2-largest-batch: a grid counted past its end returns a whole number 3 steps off."""
    graded = number.check("ch99-t1-fn/0", 48.0, "", Tolerance(rtol=1e-9), 51.0)
    assert graded.diagnosis == "close" and graded.message.startswith(COUNT) and CLOSE not in graded.message
    one = number.check("ch99-t1-fn/0", 48.0, "", Tolerance(rtol=1e-9), 47.0)
    assert one.message.startswith(OFF_BY_ONE), one.message


def test_the_reviews_total_params_answer():
    """ch07-e5-total-params with LLaMA 3-70B (a student dealt that model), the K projections dropped, every digit kept:
    1.9% off, at every variant with that model."""
    from course import models
    from tests.engine.test_fair_reading_variants import cases

    seen = 0
    for c in cases("ch07_inference", "number"):
        if c.q.qid != "ch07-e5-total-params" or not c.q.prompt.startswith("LLaMA 3-70B"):
            continue
        m = models.LLAMA3_70B
        answer = m.L * (3 * m.D * m.F + 2 * m.D * m.N * m.H) + 2 * m.V * m.D
        graded, checked = c.both(answer)
        assert graded.message.startswith(FAR) and graded.message == checked.message, graded.message
        seen += 1
    assert seen


# --- 2. a hint keyed on a value other mistakes reach too ----------------------------------------------------------

def test_a_maybe_slip_tells_its_hint_as_one_possible_cause():
    q = _number(7, exact=True, slips=(Slip(6, "close", "128k here means 128,000 tokens.", maybe=True),))
    message = _said(q, 6)
    assert "Hint: one possible cause (other mistakes give this value too): 128k here" in message, message
    plain = _number(7, exact=True, slips=(Slip(5, "close", "128k here means 128,000 tokens."),))
    assert "Hint: 128k here means" in _said(plain, 5)


@pytest.mark.parametrize(("fields", "slip"), [
    ({"reference": 7, "exact": True}, Slip(6, "close", "128k here means 128,000 tokens.")),
    ({"reference": 7, "exact": True}, Slip(8, "close", "round down.")),
    ({"reference": 2048.0, "unit": "B", "prompt": "Bytes of it."}, Slip(4096.0, "ratio:2", "split once.")),
    ({"reference": 1e-3, "unit": "s", "prompt": "Seconds of the bandwidth term."},
     Slip(5e-4, "ratio:1/2", "one direction of a link carries 4.5e10 B/s.")),
    ({"reference": 1e-3, "unit": "s", "prompt": "Time of the layer's all-reduces on its links."},
     Slip(2e-3, "ratio:2", "the partial sums are bf16.")),
])
def test_a_slip_whose_value_other_mistakes_reach_is_told_as_one_possible_cause(fields, slip):
    """One more or one less than an exact count, twice or half a value in bytes (or the time they take)."""
    q = Number(qid="ch01-zz-q", points=1, section="roofline", slips=(slip,), **{"prompt": "How many (exact).",
                                                                                 **fields})
    assert q.slips[0].maybe
    assert "one possible cause (other mistakes give this value too)" in _said(q, slip.answer)


def test_two_slips_of_one_value_are_each_one_possible_cause():
    """ch03-q6-a-threshold on a 2 x 4 mesh: an AllReduce counted once and |X| in place of |Y| both halve it."""
    q = _number(100.0, slips=(Slip(50.0, "ratio:1/2", "an AllReduce costs two gathers' worth."),
                              Slip(50.2, "ratio:1/2", "the AllReduce runs over Y.")))
    assert all(s.maybe for s in q.slips)


def test_a_slip_no_other_simple_mistake_reaches_keeps_its_hint():
    q = Number(qid="ch01-zz-q", points=1, section="roofline", prompt="FLOPs of it.", reference=8.0,
               slips=(Slip(16.0, "ratio:2", "count the multiply and the add."),))
    assert not q.slips[0].maybe


def test_a_variants_values_are_weighed_too():
    """ch03-e1-b-bytes on a mesh with |X| = 2: "B is not split along X" halves the bytes, as bf16's 2 bytes do, at
    those values only (the book's |X| is 4)."""
    from tests.engine.test_fair_reading_variants import cases

    told = {}
    for c in cases("ch03_sharding", "number"):
        if c.q.qid == "ch03-e1-b-bytes":
            told[c.q.reference] = [s.maybe for s in c.q.slips if s.hint]
    assert any(all(m) for m in told.values()) and any(not any(m) for m in told.values()), told


@pytest.mark.parametrize(("qid", "answer"), [
    ("ch09-q2-allreduce-count", 1), ("ch10-e1-local-rows", 1),
])
def test_the_reviews_colliding_slips_read_as_one_possible_cause(qid, answer):
    q = load_chapter(qid.split("-")[0] + {"ch09": "_profiling", "ch10": "_jax"}[qid[:4]])[qid]
    graded, checked = both_judges(q, answer)
    assert "Hint: one possible cause" in graded.message and graded.message == checked.message, graded.message


def test_the_reviews_max_batch_answer_with_bf16_weights():
    """ch07-q2-max-batch: one sequence fewer, from bf16 weights, is not told that 128k means 128,000 tokens."""
    q = load_chapter("ch07_inference")["ch07-q2-max-batch"]
    graded, checked = both_judges(q, float(q.reference) - 1)
    assert graded.message.startswith(ROUNDED) and graded.message == checked.message, graded.message
    assert "one possible cause" in graded.message


def test_the_reviews_bandwidth_time_answer_with_bf16_forgotten():
    q = load_chapter("ch02_tpus")["ch02-q5-bandwidth-time"]
    graded, checked = both_judges(q, float(q.reference) / 2)
    assert "one possible cause" in graded.message and graded.message == checked.message, graded.message


# --- 3. a max or a min of the shares is no missing psum -----------------------------------------------------------

def _dp(reduce):
    return lambda x, g: smap(DP, lambda a, b: reduce(dp_local(a, b), "X"), (P("X", None), P("X", None)), P())(x, g)


def _case3(reduce):
    return lambda a, b: smap(CASE3, lambda x, y: reduce(x @ y, "Y"), (P("X", "Y"), P("Y", None)),
                             P("X", None))(a, b)


@pytest.mark.parametrize(("spec", "fn", "op", "axis"), [
    (DP, _dp(jax.lax.pmax), "max", "X"), (DP, _dp(jax.lax.pmin), "min", "X"),
    (CASE3, _case3(jax.lax.pmax), "max", "Y"), (CASE3, _case3(jax.lax.pmin), "min", "Y"),
], ids=["dp-pmax", "dp-pmin", "case3-pmax", "case3-pmin"])
def test_a_max_or_min_of_the_shares_is_told_so_not_a_missing_psum(spec, fn, op, axis):
    for seed in (0, 20260101):
        v = judge_report(spec, run(spec, fn, seed, make_mesh=mesh), seed)
        assert v.score == 0 and not v.diagnosis.startswith("partial_sum"), v
        assert "missing" not in v.message and f"the {op}" in v.message and "psum" in v.message, v.message
        assert f"over {axis}" in v.message, v.message


@pytest.mark.parametrize(("spec", "fn", "code"), [(DP, dp_grad_no_psum, "partial_sum:X"),
                                                  (CASE3, case3_no_psum, "partial_sum:Y")])
def test_a_partial_sum_keeps_its_diagnosis(spec, fn, code):
    v = judge_report(spec, run(spec, fn, 0, make_mesh=mesh), 0)
    assert v.diagnosis == code and "missing" in v.message


def test_the_reviews_heads_program_with_pmax():
    """ch07-cx3-heads with pmax for psum (the review's reproducer, at the question's own shapes)."""
    q = load_chapter("ch07_inference")["ch07-cx3-heads"]
    source = inspect.getsource(q.model)
    assert "psum(" in source
    namespace = dict(q.model.__globals__)
    exec(compile(source.replace("jax.lax.psum(", "jax.lax.pmax("), "<pmax>", "exec"), namespace)  # noqa: S102
    v = judge_report(q.spec, run(q.spec, namespace[q.model.__name__], 0, make_mesh=mesh), 0)
    assert "missing" not in v.message and "the max" in v.message, v.message


def test_numbers_in_these_tests_are_what_they_say():
    assert math.isclose(69_216_694_272 / TOTAL, 0.981, rel_tol=1e-3)
    assert not np.isclose(number.last_figure(2.2999999999999996e-06), 1e-22)


@pytest.mark.parametrize(("reference", "answer", "told"), [
    (0.25, 25, True),  # a fraction written as a percentage without its sign
    (0.25, "0.25%", True),  # a percent sign on a fraction
    (0.45, "45", True),
    (448.0, 1.5, False),  # ch10-e3-first: an array's entry, a hundredth of it or so, is no percentage
    (448.0, 4.48, False),
])
def test_a_factor_of_100_is_read_as_a_percentage_only_where_it_can_be_one(reference, answer, told):
    graded = number.check("ch99-t1-pct", reference, "", Tolerance(rtol=0.005), answer)
    assert ("A percentage where a fraction is asked" in graded.message) is told, graded.message


# --- 4. a ratio taken the other way round ---------------------------------------------------------------------------

def test_a_ratio_upside_down_is_told_so():
    """Chapter 2's MXU-over-VPU ratio answered as VPU over MXU was told "Not the expected value ... powers of ten".
    A number whose reciprocal is right is told it is upside down, by both judges; on a question whose accepted values
    hold a simple number, only where the reciprocal carries the reference's figures (an unworked 1/32 is not told)."""
    q = load_chapter("ch02_tpus")["ch02-pq1-ratio"]
    assert "upside down" in _said(q, 1 / q.reference)
    assert "upside down" not in _said(q, 1 / 32)
    assert "upside down" in _said(_number(4230.0, prompt="How many FLOPs per byte?"), 1 / 4230)
    assert "upside down" not in _said(_number(4230.0, prompt="How many FLOPs per byte?"), 2 / 4230)
