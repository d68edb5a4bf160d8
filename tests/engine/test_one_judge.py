"""One judge: for every formula, number, choice and function question of every chapter, a family of
candidate answers goes through the grader and through the offline self-check, and both give the same
verdict.

The family: the reference and rewrites of it, constant multiples (nice and not), an added term,
coefficients rounded inside and outside the tolerance, values inside and outside the accepted range,
every slip and accepted alternative, every option of a choice in other spellings, a function's model
solution and its slips. The one allowed
difference is "edge": where its data cannot tell, the self-check withholds the tick (never the other
way round), and that happens only within 1/64 of the accepted range's width from its ends.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import sympy as sp

from autograder import bounds, fingerprint
from autograder.checks import judge
from autograder.questions import Choice, Formula, Function, Number, Question, chapter_names, load_chapter
from autograder.verdict import Verdict
from course.symbols import symbol
from tests.chapter_checks import recorded


def formula_candidates(q: Formula) -> list[Any]:
    r = sp.sympify(q.reference)
    stray = symbol(q.names[0])
    return [r, sp.expand(r), 2 * r, r / 2, sp.Rational(73, 10) * r, sp.Rational(3, 2) * r, -r, 1000 * r,
            r + stray, r * stray, sp.Float("1.002", 15) * r, sp.Float("1.02", 15) * r, sp.Float("0.97", 15) * r,
            *(s.answer for s in q.slips), *(a.answer for a in q.accept)]


def number_candidates(q: Number) -> list[Any]:
    r = float(q.reference)
    lo, hi = q.tolerance.bounds(r)
    values = [r, 2 * r, r / 2, 7.3 * r, 1.5 * r, 11 * r, -r, 1e3 * r, 1e-3 * r, float(f"{r:.3g}"), float(f"{r:.4g}")]
    if lo > 0:
        width = math.log(hi / lo)
        values += [lo * math.exp(width * t) for t in (0.3, 0.7)]  # inside, away from the ends
        values += [lo / (1 + max(width, 1e-6)), hi * (1 + max(width, 1e-6))]  # outside, by one width
    values += [float(s.answer) for s in q.slips] + [float(a.answer) for a in q.accept]
    texts = [f"{r:.4g} {q.unit}"] if q.unit else [f"{r:.4g}"]
    return values + texts


def choice_candidates(q: Choice) -> list[Any]:
    out: list[Any] = []
    for o in q.options:
        out += [o, o.upper(), o.replace("-", " "), f"  {o.title()} "]
    return out + ["none of these", None, 3]


def function_candidates(q: Function) -> list[Any]:
    return [q.solution, *(s.answer for s in q.slips)]


CANDIDATES = {"formula": formula_candidates, "number": number_candidates, "choice": choice_candidates,
              "function": function_candidates}


def both(q: Question, fp: dict, answer: Any) -> tuple[Verdict, Verdict]:
    encoded = recorded(q, answer)
    return judge(q, encoded), fingerprint.selfcheck(fp, q.qid, encoded)


@pytest.mark.parametrize("name", chapter_names())
def test_grader_and_self_check_agree(name, monkeypatch):
    # What is compared is the two judges' verdicts, not their bounds: on a loaded machine a slow slip ran past the
    # wall-clock bound in one judge and not in the other. The CPU bound stays.
    monkeypatch.setattr(bounds, "ANSWER_WALL_SECONDS", 600.0)
    disagreements, edges, judged = [], [], 0
    for q in load_chapter(name).questions:
        if q.kind not in CANDIDATES:
            continue
        fp = fingerprint.make(q)
        for answer in CANDIDATES[q.kind](q):
            graded, checked = both(q, fp, answer)
            judged += 1
            assert graded.ok or not checked.ok, f"{q.qid} {answer!r}: the self-check ticks what the grader refuses"
            if checked.diagnosis == "edge":
                edges.append((q.qid, answer, graded.diagnosis))
                continue
            if (graded.status, graded.score, graded.diagnosis, graded.message) != (
                    checked.status, checked.score, checked.diagnosis, checked.message):
                disagreements.append(f"{q.qid} {str(answer)[:40]!r}: grader {graded.diagnosis} ({graded.message[:60]}),"
                                     f" self-check {checked.diagnosis} ({checked.message[:60]})")
    asked = sum(q.kind in CANDIDATES for q in load_chapter(name).questions)
    assert judged >= asked, f"{judged} answers judged for {asked} questions: a question has no candidates"
    assert not disagreements, f"{len(disagreements)} of {judged}:\n" + "\n".join(disagreements[:20])
    assert len(edges) <= judged // 200, edges


def test_function_slips_are_told_apart():
    """Two bugs of a decode step that both leave every element wrong get different messages: each
    slip's hint appears only for an answer that returns what that slip returns."""
    q = load_chapter("ch07_inference")["ch07-cx2-decode-step"]
    fp = fingerprint.make(q)
    messages = []
    for slip in q.slips:
        graded, checked = both(q, fp, slip.answer)
        assert graded.message == checked.message and slip.hint in graded.message
        messages.append(graded.message)
    assert len(set(messages)) == len(q.slips)
    right = q.solution

    def doubled(*args, **kwargs):
        return tuple(2 * x for x in right(*args, **kwargs))

    graded, checked = both(q, fp, doubled)
    assert "Hint:" not in graded.message and graded.message == checked.message
