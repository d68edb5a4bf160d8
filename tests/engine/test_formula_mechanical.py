"""Mechanical wrong answers to every formula question: its diagnosis names no cause the answer does not have.

An honest student whose answer is the reference with one simple thing wrong (a symbol too many or too few as a
factor, a shard size or a count forgotten, one term of a sum doubled, halved or dropped, one side of a max alone,
or doubled or halved, or a term of it doubled, a ring's (N-1)/N counted as (N-2)/N or doubled) must be told something
true, and nothing that hands over the answer (an outside review found "partly: a max or min?"
of an answer off by N/2, where neither formula has one, and "the lower-order terms differ" of one whose terms are
all of the same order). For each candidate, in both judges (which must agree exactly):

- it is never right;
- "partly" (with its max/min advice) only where the reference or the answer has a max or a min;
- "lower_terms" only where what differs vanishes beside the reference as the symbols grow: all together, and each
  one faster than the others (``_lower_order``);
- the message never names the factor between the answer and the reference, nor the term of the sum that is off (a
  symbol may be named: "depends on F", "changes with N"; a slip's own hint is the author's to word);
- "partly" never where one term of the sum is off by a factor (``term_factor`` is the cause);
- "missing_symbol:S" never where the answer's value depends on S (``_holds``: a side of a max the public points
  never pick, a term that vanishes there), "extra_symbol:S" never where the reference or its exact form uses S.
"""

from __future__ import annotations

from collections import Counter

import mpmath
import pytest
import sympy as sp

from autograder import equivalence as eq
from autograder.formula import to_text
from autograder.kinds import formula
from autograder.questions import Formula, chapter_names, load_chapter
from autograder.verdict import Status
from tests.chapter_checks import both_judges

FORMULAS = [q for name in chapter_names() for q in load_chapter(name).questions if isinstance(q, Formula)]
HALF = sp.Rational(1, 2)


def candidates(q: Formula) -> list[tuple[str, sp.Expr, str | None]]:
    """(what was done, the wrong answer, the text a message must not hold) for one question."""
    ref = formula.parse_known(q.names, q.reference).expr
    out: list[tuple[str, sp.Expr, str | None]] = []
    for s in sorted(ref.free_symbols, key=lambda x: x.name):
        for how, k in ((f"*{s}", s), (f"/{s}", 1 / s), (f"*{s}/2", s / 2), (f"*2/{s}", 2 / s)):
            out.append((how, ref * k, f"factor of {s}" if k == s else to_text(k)))
    common, terms = formula.terms_of(ref)
    terms = terms if len(terms) > 1 else []  # no sum: no term to change alone
    if len(terms) > 1:
        for j, t in enumerate(terms):
            rest = sum(terms[:j] + terms[j + 1:], sp.Integer(0))
            said = to_text(common * t) if len((common * t).free_symbols) > 1 or not (common * t).is_Symbol else None
            for how, k in (("*2", 2), ("/2", HALF)):
                out.append((f"term {j}{how}", common * (rest + k * t), said))
            out.append((f"term {j} dropped", common * rest, said))
    for node in sorted(ref.atoms(sp.Max, sp.Min), key=sp.default_sort_key):
        kind = type(node).__name__
        for j, a in enumerate(node.args):
            out.append((f"{kind} arg {j}", ref.xreplace({node: a}), None))
            for how, k in (("*2", 2), ("/2", HALF)):  # one side off by a factor, the other kept
                side = node.func(*node.args[:j], k * a, *node.args[j + 1:])
                out.append((f"{kind} arg {j}{how}", ref.xreplace({node: side}), f"factor of {to_text(k)}"))
            inner, its = formula.terms_of(a)
            for i, t in enumerate(its if len(its) > 1 else ()):  # one term of a side's sum doubled
                side = node.func(*node.args[:j], inner * (sp.Add(*its) + t), *node.args[j + 1:])
                out.append((f"{kind} arg {j} term {i}*2", ref.xreplace({node: side}), None))
    exact = formula.exact_of(q.names, ref, q.limit.split(), q.exact_form)
    for form, f in (("reference", ref), ("exact form", exact)):  # a ring's (N-1)/N counted wrong, or its factor
        for n in sorted(f.free_symbols if f is not None and q.counts else (), key=lambda x: x.name):
            if n.name not in q.counts.split() or not f.has(n - 1):
                continue
            off = f.xreplace({n - 1: n - 2})
            out += [(f"{form} ({n}-2)", off, None), (f"{form} *2", 2 * f, None), (f"{form} ({n}-2)*2", 2 * off, None)]
    right = [ref, *([exact] if exact is not None else [])]
    return [(how, c, banned) for how, c, banned in out if not any(_same(c, r) for r in right)]


def _same(a: sp.Expr, b: sp.Expr) -> bool:
    """Whether two formulas are one: by sympy, where their values at one point do not already tell them apart."""
    at = {x: sp.Rational(7 + 3 * k, 5 + k % 3) for k, x in enumerate(sorted(a.free_symbols | b.free_symbols, key=str))}
    d, v = (a - b).evalf(30, subs=at), b.evalf(30, subs=at)
    if d.is_comparable and v.is_comparable and abs(d) > abs(v) * sp.Float("1e-20", 30):
        return False
    return sp.cancel(a - b) == 0


LARGE = 10**12


def _lower_order(q: Formula, ref: sp.Expr, answer: sp.Expr) -> bool:
    """Whether what the answer gets wrong vanishes beside the reference as the symbols grow, from values of one
    size: all of them together, and each in turn faster than the others (a term in B*F/(W*Y*Z) is no lower than one
    in B*D/(W*X): with F the larger it is the larger)."""
    names = q.names
    points = [{n: 3 + (5 * k + 3 * i) % 11 for k, n in enumerate(names)} for i in range(3)]  # all of one size
    r, a = eq.evaluator(ref, names), eq.evaluator(answer, names)
    used = sorted(eq.used_names(ref))
    with mpmath.workdps(80):
        for p in points:
            for faster in (None, *used):
                pt = {k: v * LARGE * (LARGE if k == faster else 1) for k, v in p.items()}
                rv, av = r(pt), a(pt)
                if rv in (None, 0) or av is None or abs(av / rv - 1) > mpmath.mpf("1e-6"):
                    return False
    return True


def _holds(q: Formula, answer: sp.Expr, name: str) -> bool:
    """Whether the answer's value depends on ``name``, by far more points than a judge asks at (spread over the
    domain, where each side of each max, min or abs of the answer is active, and at the bottom of the domain, where
    an exponential of a difference does not vanish), with it moved up and down: a side of a max that the public
    points never pick, or a term e**(M2 - M1) that is tiny there, is still the answer's."""
    if name not in eq.used_names(answer):  # not written, or cancelled by sympy (as in 2*B*D/(B*W))
        return False
    domain = eq.Domain(q.names, frozenset(q.counts.split()))
    points = domain.points(40, 7, cover=answer, kinds=eq.BRANCHING) + domain.small(20, 7)
    at = eq.evaluator(answer, q.names)
    for pt in points:
        v = at(pt)
        for moved in (pt[name] * 5 + 1, pt[name] / 2 if name not in q.counts.split() else pt[name] + 1):
            m = at({**pt, name: moved})
            if v is not None and m is not None and not mpmath.almosteq(m, v, rel_eps=mpmath.mpf(10) ** -30):
                return True
    return False


def _verdicts(q, answer):
    graded, checked = both_judges(q, answer)
    assert (graded.status, graded.diagnosis, graded.message) == (checked.status, checked.diagnosis,
                                                                  checked.message), (graded, checked)
    return graded


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
def test_a_mechanical_wrong_answer_is_told_a_true_cause(q):
    ref = formula.parse_known(q.names, q.reference).expr
    exact = formula.exact_of(q.names, ref, q.limit.split(), q.exact_form)
    needed = eq.used_names(ref) | (eq.used_names(exact) if exact is not None else frozenset())
    bad = []
    for how, answer, banned in candidates(q):
        v = _verdicts(q, answer)
        head = v.diagnosis.partition(":")[0]
        why = None
        if v.status is Status.CORRECT:
            why = "right"
        elif head == "partly" and not (ref.has(sp.Max, sp.Min) or answer.has(sp.Max, sp.Min)):
            why = "partly without a max or min"
        elif head == "lower_terms" and not _lower_order(q, ref, answer):
            why = "lower_terms of terms that are not lower-order"
        elif banned is not None and banned.replace(" ", "") in v.message.split(" Hint:")[0].replace(" ", ""):
            why = f"names {banned}"
        elif head == "partly" and how.startswith("term ") and not how.endswith("dropped"):
            why = "partly of one term of the sum off by a factor"
        elif head == "missing_symbol" and any(_holds(q, answer, n) for n in v.diagnosis.partition(":")[2].split(",")):
            why = "missing a symbol the answer holds"
        elif head == "extra_symbol" and set(v.diagnosis.partition(":")[2].split(",")) & needed:
            why = "extra a symbol the reference or its exact form uses"
        if why:
            bad.append(f"{how} ({to_text(answer)}): {why}: {v.diagnosis}: {v.message}")
    assert not bad, "\n".join(bad)


def tally() -> Counter:
    """The diagnoses of every candidate, by code head (for the record of a change; not a test)."""
    return Counter(_verdicts(q, c).diagnosis.partition(":")[0] for q in FORMULAS for _, c, _ in candidates(q))


if __name__ == "__main__":
    print(sorted(tally().items(), key=lambda kv: -kv[1]))


QUESTIONS = {q.qid: q for q in FORMULAS}


@pytest.mark.parametrize(("qid", "answer", "code", "said"), [
    # a shard size forgotten: off by N/2, which is 1 at N = 2 (was "partly: ... a max or min?")
    ("ch03-cx3-t-line", "V*(N-1)/W", "ratio_symbols:N", "changes with N, and with no other symbol"),
    # one of two terms of the same order half what it should be (was "lower_terms")
    ("ch07-q7-t-comms", "2*B*D/(W*X) + 2*B*F/(W*Y*Z)", "term_factor", "One term of your sum is off by a simple factor"),
])
def test_the_outside_reviews_answers_are_told_their_cause(qid, answer, code, said):
    v = _verdicts(QUESTIONS[qid], answer)
    assert v.diagnosis == code and said in v.message, v
    assert "max or min" not in v.message and "lower-order" not in v.message and "N/2" not in v.message, v.message


@pytest.mark.parametrize(("qid", "answer", "code"), [
    # the bandwidth side halved: the compute side wins at the first public points, yet the answer holds W (was
    # "missing_symbol:W": "The answer depends on W; yours does not")
    ("ch02-q4-time", "Max(134217728*B/C8, (20480*B + 67108864)/(2*W))", "partly"),
    # M2 and L2 only in a term that vanishes at the public points, not at the bottom of the domain (was
    # "missing_symbol:L2,M1,M2")
    ("ch04-e7-flash-denominator", "L1 + L2*exp(-M1**2*M2)", "partly"),
    # the exact form's factor wrong: N and X are the exact form's, the ratio changes with them (was "extra_symbol")
    ("ch03-cx3-t-allgather", "V*(N-1)/W", "ratio_symbols:N"),
    ("ch05-e2-dp-t-comms", "16*D*F*(X-2)/(X*W)", "ratio_symbols:X"),
    # one term of a sum doubled, in a formula with a max (was "partly", the advice on each side of a max or min)
    ("ch04-e7-flash-denominator", "2*L1*exp(M1 - Max(M1, M2)) + L2*exp(M2 - Max(M1, M2))", "term_factor"),
])
def test_a_symbol_the_answer_holds_is_never_said_missing_nor_one_the_exact_form_holds_extra(qid, answer, code):
    v = _verdicts(QUESTIONS[qid], answer)
    assert v.diagnosis == code, v
