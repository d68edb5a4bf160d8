"""An answer that ignores one of its inputs must fail most of a student's drawn cases. A function is scored by the
share of its drawn cases that pass, so were most cases drawn with an input at its common value, an answer that wrote
that value in (``peak / bw`` for a critical batch whose weights are bf16: ``weight_bytes`` = 2) would keep most of
the marks: CX3's critical batch earned half from both judges, since half its cases were bf16. For every function
question and every numeric argument of its probes, the reference with that argument frozen (at each value it takes
in the public probes, at their median, at 1, at twice and half the median: ``freezes``; and at the value commonest in
the student's own cases: ``own_freeze``) scores at most half at each student's drawn cases, and
less than half over the class; an input the record declares narrow (``Function.narrow_inputs``: one that counts in one
regime alone, or one the result never depends on) is let be.
"""

import json
from typing import Any

import pytest

from autograder import probes as builders
from autograder import record
from autograder.kinds.function import _judges, _kinds, _probe, diagnose, drawn_probes, frozen_values
from autograder.kinds.function import numeric_inputs as inputs
from autograder.questions import Function, chapter_names, load_chapter
from autograder.verdict import passing_only

STUDENTS = ("a1f3", "seed-b", "0", "student-3", "student-7", "student-11")


# (question, argument): an input still ignorable at the grading draws, to be drawn afresh (strict: one that is fixed
# fails here until it leaves the list). Most are integers the record's draw keeps as its probe has it (``vary`` keeps
# integers as structure); the cure is the record's draw (``with_choices``, a draw of its own), or a declaration.
KEPT = "an integer (or a constant) the record's draw keeps as its probe has it"
INPUTS_STILL_IGNORABLE: dict[str, str] = {f"{qid}:{arg}": why for qid, args, why in (
    ("ch03-cx5-collective-time", "N axes", KEPT),
    ("ch03-cx5-collective-time", "V W", "counts in the bandwidth-bound cases alone, and like_probes keeps 9 of 17 "
                                        "cases latency-bound (for the slip that ignores the latency)"),
    ("ch04-cx5-train-flops", "k", KEPT),
    ("ch05-cx4-choose-mesh", "M_X M_Y", KEPT),
    ("ch05-cx4-choose-mesh", "B F", "the mesh is rounded to a power of two: a frozen value lands on the same mesh"),
    ("ch05-cx4-forward-time", "X Y M_X M_Y", KEPT + " (like_probes over the default draw)"),
    ("ch05-cx4-forward-time", "C", "counts in the compute-bound cases alone, which like_probes keeps few"),
    ("ch06-cx1-llama-budget", "n_ckpt", KEPT),
    ("ch06-cx2-comm-ratio", "X Y M_X M_Y", KEPT),
    ("ch06-cx2-comm-ratio", "F", "counts in some of the probes' regimes alone"),
    ("ch07-cx1-max-batch", "n_chips", KEPT),
    ("ch07-cx1-step-time", "n_chips", KEPT),
    ("ch07-cx1-step-time", "weight_bytes", "counts in the memory-bound cases alone"),
    ("ch08-cx1-serving-plan", "context decode_tokens", KEPT),
    ("ch08-cx2-largest-batch", "weight_bytes kv_bytes_per_token n_chips", KEPT),
    ("ch08-cx2-largest-batch", "step", "drawn from a few values, and the answer is rounded to whole steps"),
    ("ch09-cx5-matmul-cost", "bw", "counts in the 2 memory-bound cases of 5 alone (peak in the 3 others)"),
    ("ch11-c1-plan-serving", "N H K V context kv_bytes weight_bytes", KEPT),
    ("ch11-c1-plan-serving", "hbm latency peak", "a plan is a choice among a few: a frozen value picks the same one"),
    ("ch11-c1-plan-training", "D F H K L N V chips mesh_axes", KEPT),
    ("ch11-c1-plan-training", "ici_bw", "a plan is a choice among a few: a frozen value picks the same one"),
    ("ch11-c4-train-losses", "steps", KEPT),
) for arg in args.split()}

QUESTIONS = [q for name in chapter_names() for q in load_chapter(name).questions
             if isinstance(q, Function) and inputs(q)]
CASES = [pytest.param(q, arg, id=f"{q.qid}-{arg}",
                      marks=[getattr(pytest.mark, q.chapter)]
                      + ([pytest.mark.xfail(strict=True, reason=INPUTS_STILL_IGNORABLE[f"{q.qid}:{arg}"])]
                         if f"{q.qid}:{arg}" in INPUTS_STILL_IGNORABLE else []))
         for q in QUESTIONS for arg in inputs(q)]

_SET: dict[tuple[int, str], tuple] = {}  # (question, student): the drawn cases, their calls and judges, made once
_REFERENCE: dict[tuple[int, str], tuple[bool, Any]] = {}  # (question, case as JSON): what the reference returns


def freezes(q: Function, name: str) -> list[Any]:
    """Every value a student who ignored ``name`` might write in its place, read off the public probes: each value it
    takes there (the commonest first), their median, 1, and twice and half the median (a regime the probes skip).
    The commonest alone missed answers that froze another probe's width (D = 128 kept every mark of ch04-cx2 at 2
    of 6 students) or the probes' median (N = 56 in ch11-c1)."""
    return frozen_values(q, name)


def own_freeze(q: Function, seed: str, name: str) -> Any:
    """The value ``name`` takes most often in ``seed``'s own drawn cases: what a student who wrote in the usual
    constant of their cases would write (act_bytes = 4 kept every mark of one student's critical batch, whose cases
    were all float32, though no probe was)."""
    values = [c[name] for c in _drawn(q, seed)[0] if name in c]
    return max(values, key=values.count)


def _drawn(q: Function, seed: str) -> tuple:
    key = (id(q), seed)
    if key not in _SET:
        cases = drawn_probes(q, seed)
        _SET[key] = (q, cases, [builders.build(q.builder, c) for c in cases], _judges(q, cases), _kinds(q))
    return _SET[key][1:]


def _ignoring(q: Function, name: str | None, value: Any):
    """The reference with ``name`` frozen at ``value`` (None: the reference itself), each distinct call made once."""
    def answer(**kwargs):
        if name is not None:
            kwargs[name] = value
        key = (id(q), json.dumps(kwargs, sort_keys=True, default=str))
        if key not in _REFERENCE:
            try:
                _REFERENCE[key] = (True, q.reference(**kwargs))
            except Exception as e:  # a frozen value outside the question's domain: that case fails
                _REFERENCE[key] = (False, e)
        ok, got = _REFERENCE[key]
        if not ok:
            raise got
        return got
    return answer


def score(q: Function, seed: str, answer) -> float:
    """The grade's share of ``seed``'s drawn cases that ``answer`` passes (the grader's ``diagnose``, without the
    slips' hints, which do not change it)."""
    cases, calls, judges, kinds = _drawn(q, seed)
    return diagnose(cases, judges, json.loads(json.dumps(record.encode_outputs(answer, calls, kinds)))).score


def _passes(q: Function, seed: str, i: int, name: str, value: Any) -> bool:
    """Whether the reference with ``name`` frozen at ``value`` passes ``seed``'s i-th drawn case, by the grader's
    judge of one case (a case's verdict is its own: the grade is the share passed). A case that already holds that
    value, or where the frozen reference returns the reference's very value, passes without judging (a formula's
    judge costs a solve)."""
    _, calls, judges, kinds = _drawn(q, seed)
    args, kwargs = calls[i]
    if name in kwargs and kwargs[name] == value:
        return True
    frozen = record.encode_outputs(_ignoring(q, name, value), [calls[i]], kinds)
    if frozen == record.encode_outputs(_ignoring(q, None, None), [calls[i]], kinds):
        return True
    with passing_only():  # whether it passes, not why it fails
        return _probe(json.loads(json.dumps(frozen))[0], judges[i]).ok


def _more_than_half(q: Function, seed: str, name: str, value: Any) -> bool | None:
    """Whether the frozen reference passes more than half of ``seed``'s drawn cases (True), less than half (None: an
    answer below half at any one student keeps the class's mean below half), or exactly half (False); it stops as
    soon as the count decides."""
    cases = _drawn(q, seed)[0]
    passed = failed = 0
    for i in range(len(cases)):
        if _passes(q, seed, i, name, value):
            passed += 1
        else:
            failed += 1
        if 2 * passed > len(cases):
            return True
        if 2 * failed > len(cases):
            return None
    return False


@pytest.mark.parametrize("q, arg", CASES)
def test_an_answer_that_ignores_an_input_fails_most_drawn_cases(q, arg):
    assert score(q, STUDENTS[0], _ignoring(q, None, None)) == 1, f"{q.qid}: the reference fails its own cases"
    for value in freezes(q, arg):
        halves = []
        for seed in STUDENTS:
            halves.append(_more_than_half(q, seed, arg, value))
            if halves[-1]:
                break
        if True in halves or None not in halves:  # the scores, for the message
            _fail(q, arg, value, STUDENTS)
    for seed in STUDENTS:  # each student's own commonest value: at most half at that student
        value = own_freeze(q, seed, arg)
        if _more_than_half(q, seed, arg, value):
            _fail(q, arg, value, (seed,))


def _fail(q: Function, arg: str, value: Any, seeds: tuple[str, ...]) -> None:
    scores = {seed: round(score(q, seed, _ignoring(q, arg, value)), 2) for seed in seeds}
    pytest.fail(f"{q.qid}: {arg} frozen at {value!r} scores {scores}, more than half at a student's cases or half on "
                f"average")
