"""The grader's draw asks only whether answers pass (``verdict.passing_only``): a wrong answer is then refused without
its diagnosis. That must never change what passes, nor a function's score (its share of passing cases): for every
function question, the reference, each slip, and the reference with each numeric input written in (at its commonest
probe value: wrong arrays, wrong orders, factors) score the same on a student's drawn cases either way."""

import json

import pytest

from autograder import probes as builders
from autograder import record
from autograder.kinds.function import _judges, _kinds, _probe, diagnose, drawn_probes, frozen_values, numeric_inputs
from autograder.questions import Function, chapter_names, load_chapter
from autograder.verdict import REFUSED, Status, passing_only

FUNCTIONS = [pytest.param(q, marks=getattr(pytest.mark, q.chapter), id=q.qid)
             for name in chapter_names() for q in load_chapter(name).questions if isinstance(q, Function)]


def _answers(q: Function) -> dict[str, object]:
    out: dict[str, object] = {"reference": q.reference}
    out |= {f"slip{i}": slip.answer for i, slip in enumerate(q.slips)}
    for name in numeric_inputs(q):
        value = frozen_values(q, name)[0]
        out[f"{name}={value}"] = _written_in(q, name, value)
    return out


def _written_in(q: Function, name: str, value: object):
    return lambda *a, **kw: q.reference(*a, **(kw | {name: value}))


@pytest.mark.parametrize("q", FUNCTIONS)
def test_passing_only_changes_no_score(q):
    cases = drawn_probes(q, "passing-only")
    try:
        calls = [builders.build(q.builder, c) for c in cases]
    except Exception as e:  # a builder that needs JAX arrays runs in the program tests
        pytest.skip(f"cases not built here: {e}")
    kinds = _kinds(q)
    judged = wrong = 0
    for label, answer in _answers(q).items():
        try:
            outputs = json.loads(json.dumps(record.encode_outputs(answer, calls, kinds)))
        except Exception:
            continue
        full = diagnose(cases, _judges(q, cases), outputs)
        with passing_only():
            quick = diagnose(cases, _judges(q, cases), outputs)
        assert (quick.ok, quick.score) == (full.ok, full.score), (label, full.message)
        judged += 1
        wrong += not full.ok
    assert judged >= 2 and wrong >= 1  # the reference and at least one answer that fails a case


def test_only_the_draw_is_refused_without_a_reason():
    """A wrong array is refused without its diagnosis inside ``passing_only`` alone: outside, the student is told
    what is wrong."""
    q = load_chapter("ch01_rooflines")["ch01-cx2-attainable"]
    cases = drawn_probes(q, "passing-only")
    calls = [builders.build(q.builder, c) for c in cases]
    wrong = json.loads(json.dumps(record.encode_outputs(lambda **kw: q.reference(**(kw | {"bw": 1.0})), calls,
                                                        _kinds(q))))
    with passing_only():
        quick = _probe(wrong[0], _judges(q, cases)[0])
    assert quick == REFUSED and REFUSED.status is Status.INCORRECT and REFUSED.score == 0
    told = _probe(wrong[0], _judges(q, cases)[0])
    assert not told.ok and told.message and told.diagnosis != REFUSED.diagnosis
