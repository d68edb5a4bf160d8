"""Formula answers are judged where the student cannot see (an outside review found each).

- Public points: the grader also asks for agreement at points of its own (drawn from the submission's grading
  seed; without one, from points of the tag that no self-check data holds), so a table of the values at the public
  points, which the self-check data lets anyone recover, earns nothing, while every honest form stays right.
- Own branches: it also asks at points where each branch of the answer's own max/min/abs is the active one; the
  self-check, which cannot, withholds its tick from an answer whose branch is never active at its points ("edge").
- Limits: a ``limit`` record's answer is right where it equals the large-N form or the exact (N-1)/N form at the
  question's points, not where it merely has the same limit.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
import sympy as sp

import autograder.checks
from autograder import equivalence as eq
from autograder.grading import judge as judging
from autograder.kinds import formula
from autograder.kinds import targets as tg
from autograder.questions import Formula, chapter_names, load_chapter
from autograder.verdict import Status
from tests.chapter_checks import both_judges, printed

QUESTIONS = {q.qid: q for name in chapter_names() for q in load_chapter(name).questions}
FORMULAS = [q for q in QUESTIONS.values() if isinstance(q, Formula)]


# --- a table of the public values --------------------------------------------------------------------------------

def _public_points(q: Formula) -> list[eq.Point]:
    fp = printed(q)
    return [{k: Fraction(v) for k, v in p.items()} for p in [*fp["at"], *fp.get("small", [])]]


def _table(q: Formula, points: list[eq.Point], values: list) -> str | None:
    """The table answer: hat functions in one symbol, each centred on that symbol's
    value at one public point and worth the value there, 0 elsewhere; None where it cannot be built."""
    for name in q.names:
        xs = [p[name] for p in points]
        if len(set(xs)) == len(xs):
            break
    else:
        return None
    if any(v is None or v <= 0 for v in values):
        return None
    xs = sorted(xs)
    k = Fraction(2) / min(b - a for a, b in zip(xs, xs[1:], strict=False))
    terms = [f"{float(v):.6e}*Max(0, 1 - ({k.numerator}/{k.denominator})*Abs({name} - "
             f"{p[name].numerator}/{p[name].denominator}))" for p, v in zip(points, values, strict=True)]
    return "Max(" + ", ".join(terms[:8]) + ")" + (" + Max(" + ", ".join(terms[8:]) + ")" if terms[8:] else "")


def _recovered(qid: str, key: str, i: int, entry: list) -> mpmath.mpf | None:
    """A value inside target ``i`` of ``key``, found from the self-check data alone by hashing every block of
    buckets between 1e-40 and 1e45 (about 2 s a question)."""
    g, sign, inside, _ = entry
    step = mpmath.log1p(g)
    wanted = {s[0]: s for s in inside}
    for block in range(int(math.log(1e-40) / float(step)) // tg.GRID, int(math.log(1e45) / float(step)) // tg.GRID + 2):
        h = tg.digest(qid, key, i, sign, block)
        if h in wanted:
            with mpmath.workdps(30):
                v = mpmath.exp((block * tg.GRID + (wanted[h][1] + wanted[h][2]) / 2) * step)
            return -v if sign == "-" else v
    return None


def test_a_table_recovered_from_the_self_check_data_scores_nothing():
    """The table built on ch05-e9-x-opt: the values come from the hashes only, never the reference."""
    q = QUESTIONS["ch05-e9-x-opt"]
    fp = printed(q)
    entries = [("ref", i, e) for i, e in enumerate(fp["targets"]["ref"])] + \
              [("small", i, e) for i, e in enumerate(fp["targets"].get("small", []))]
    values = [None if e is None else _recovered(q.qid, key, i, e) for key, i, e in entries]
    answer = _table(q, _public_points(q), values)
    assert answer is not None
    graded, checked = both_judges(q, answer)
    assert graded.score == 0 and graded.status is Status.INCORRECT, graded
    for seed in ("one submission", "another"):
        assert formula.judge(q, answer, seed).score == 0


@pytest.mark.parametrize("q", FORMULAS[::2], ids=lambda q: q.qid)
def test_a_table_of_the_public_values_scores_nothing(q):
    """Every other formula question (the rest is the same code): the table holds the reference's values at the
    public points to 7 figures, which is what inverting their hashes gives (the test above)."""
    points = _public_points(q)
    at = eq.evaluator(formula.parse_known(q.names, q.reference).expr, q.names)
    answer = _table(q, points, [at(p) for p in points])
    if answer is None:
        pytest.skip("no symbol takes distinct values at every public point, or a value is not positive")
    assert autograder.checks.judge(q, answer).score == 0
    assert formula.judge(q, answer, "a submission's seed").score == 0


def _honest(q: Formula) -> list:
    r = formula.parse_known(q.names, q.reference).expr
    return [q.reference, str(r), sp.expand(r), sp.factor(sp.together(r)), sp.together(r), 2 * r / 2]


@pytest.mark.parametrize("q", FORMULAS, ids=lambda q: q.qid)
def test_honest_forms_stay_right_at_every_seed(q):
    for answer in _honest(q):
        for seed in (None, "s1", "s2"):
            v = formula.judge(q, answer, seed)
            assert v.status is Status.CORRECT, (q.qid, answer, seed, v)


def test_the_grader_points_are_its_own():
    """Drawn per seed, none of them public; without a seed, fixed per question but in no self-check data."""
    q = QUESTIONS["ch05-e9-x-opt"]
    public = _public_points(q)
    a, b, none = (formula.grader_points(q, s) for s in ("a", "b", None))
    assert a != b and none == formula.grader_points(q, None)
    assert not [p for p in a + b + none if p in public]


def test_a_verdict_that_depends_on_the_seed_is_remembered_per_seed(tmp_path, asked):
    qid = "ch01-e4-t-math"
    request = {"chapter": "ch01_rooflines", "course_dir": str(tmp_path), "items": [{"qid": qid, "answer": "B*D*F/C"}]}
    for seed in ("a", "b", "a"):
        assert judging.handle({**request, "seed": seed})[qid]["status"] == "correct"
    assert asked == {(qid, "B*D*F/C"): 2}


# --- the answer's own branches -----------------------------------------------------------------------------------

BRANCHED = [  # wrong at many points of the domain, right at the public ones
    ("ch04-e1-matmul-flops", "Max(2*M*N*P, M*P + N*P)"),
    ("ch03-q5-comm-allreduce", "Min(4*I*K/(3*W), I*J*K/32)"),
    ("ch04-e3-mlp-flops", "Min(18*B*D*F*T, 12*B*D*H*T*(K + N))"),
    # a sample of a sweep over Max/Min pairs of references, the rarest first
    ("ch01-e3-intensity", "Min(2*B*D*F/(2*B*D + 2*B*F + 2*D*F), 8*B*D*F)"),
    ("ch01-q1-bytes", "Max(B*D + B*F + D*F, 2*B*D*F/(B*D*F + B*D + B*F))"),
    ("ch01-q4-intensity", "Min(2*B*D*F/(B*D*F + B*D + B*F), B*D + B*F + D*F)"),
    ("ch04-q2-total-flops", "Max(8*B*D*F, 2*B*D*F/(2*B*D + 2*B*F + 2*D*F))"),
    ("ch01-e3-intensity-limit", "Min(B, 8*B*D*F)"),
    ("ch04-e2-train-flops", "Max(6*M*N*P, N*P + P)"),
    ("ch05-e6-tp-max-y", "Max(F*M_Y*W/C, C**2/(F*M_X*M_Y*W**2))"),
    ("ch05-e10-mix-bound", "Min(C**2/(F*M_X*M_Y*W**2), 4*B*D/W)"),
    ("ch05-e2-dp-t-comms", "Max(8*D*F/W, C**2/(F*M_X*M_Y*W**2))"),
]


@pytest.mark.parametrize(("qid", "answer"), BRANCHED)
def test_a_branch_of_the_answer_never_active_at_the_public_points_is_tested_by_the_grader(qid, answer):
    graded, checked = both_judges(QUESTIONS[qid], answer)
    assert graded.score == 0, graded
    assert not checked.ok, checked


@pytest.mark.parametrize(("qid", "answer"), [
    ("ch03-cx3-t-allreduce", "Min(2*V/W, V*(2*N - 2)/(N*W))"),  # the exact form, everywhere (N >= 2)
    ("ch03-cx3-t-allgather", "Max(V/W, V/(N*W))"),  # V/W, everywhere: right
])
def test_the_self_check_says_it_cannot_check_a_branch_it_never_sees(qid, answer):
    """Right everywhere (the grader credits it), but one branch is never the active one at the public points, so
    the self-check does not tick it, and says why."""
    graded, checked = both_judges(QUESTIONS[qid], answer)
    assert graded.ok
    assert checked.diagnosis == "edge" and "max(), min() or abs()" in checked.message, checked


# --- Own steps and switches beyond the public range -------------------------------------------------------------------

# A right answer with a term that acts only beyond the public points' range, or only between their grid points.
INTENSITY = "2*B*D*F/(2*B*D + 2*B*F + 2*D*F)"
SWITCHED = {"ch01-e3-intensity": (f"{INTENSITY} + B*floor(B/2**30)", f"{INTENSITY} + 1000*(ceiling(64*B) - 64*B)",
                                  f"Max({INTENSITY}, B*D - 10**12)"),
            "ch01-e2-dot-flops": ("2*N - 1 + floor(N/10**5)*N",)}


@pytest.mark.parametrize(("qid", "answer"), [(qid, a) for qid, answers in SWITCHED.items() for a in answers])
def test_a_switch_that_acts_beyond_the_public_points_is_found_by_the_grader_and_not_ticked(qid, answer):
    """A floor, ceiling or max of the answer's own that acts only for sizes above the public range (up to 2**16) or
    between its grid points (multiples of 1/64): the grader asks at points of its own up to 2**40, off that grid,
    and refuses it; the self-check, which sees only its own points, does not tick it."""
    graded, checked = both_judges(QUESTIONS[qid], answer)
    assert graded.score == 0, graded
    assert not checked.ok, checked


@pytest.mark.parametrize(("qid", "answer"), [
    ("ch01-e3-intensity", "2*B*D*F/(2*B*D + 2*B*F + 2*D*F) + 0*floor(B)"),
    ("ch01-e2-dot-flops", "2*floor(N) - 1"),
    ("ch01-e2-dot-flops", "ceiling(2*N - 1)"),
])
def test_a_step_that_changes_nothing_is_still_right_for_the_grader(qid, answer):
    assert both_judges(QUESTIONS[qid], answer)[0].ok


# --- Limits: limit records ----------------------------------------------------------------------------------------

LIMIT_WRONG = {  # wrong exact forms, vanishing extra terms, a roofline maximum for a time
    "ch03-cx3-t-allgather": ["V*(N-2)/(N*W)", "V*(N+1)/(N*W)", "V*N/((N-1)*W)", "V/W + 1000*V/(N*W)"],
    "ch03-cx3-t-allreduce": ["2*V*(N-2)/(N*W)", "2*V*N/((N-1)*W)", "2*V/W + V/(N*W)", "2*V*(N+1)/(N*W)"],
    "ch03-cx3-t-alltoall": ["V*(N-1)/(4*N*W)", "V*(N**2-1)/(4*N**2*W)", "V*ceiling(N**2/4)/(N**2*W)"],
    "ch05-e2-dp-t-comms": ["8*D*F*(X-4)/(X*W)", "Max(8*D*F/W, 8*B*D*F/(C*X))", "8*D*F/W + 8*B*D*F/(C*X)",
                           "8*D*F/W + 1000*D/X"],
    "ch05-e3-fsdp-t-comms": ["Max(4*D*F/W, 8*B*D*F/(C*X))", "4*D*F/W + 8*B*D*F/(C*X)", "4*D*F*(X-4)/(X*W)",
                             "4*D*F*(X+1)/(X*W)"],
    "ch05-e6-tp-t-comms": ["Max(4*B*D/W, 8*B*D*F/(C*Y))", "4*B*D/W + 8*B*D*F/(C*Y)", "4*B*D*Y/((Y-1)*W)",
                           "4*B*D*(Y-2)/(Y*W)"],
    # the exact count less each GPU's own share; leaving out the node's own or every GPU's own block is not it
    "ch12-q41-node-egress-bytes": ["N*B*(M-1)/M", "B*(N-1)", "B*N*(N-1)/N", "B*N - B/N"],
}
LIMIT_RIGHT = {
    "ch03-cx3-t-allgather": ["V/W", "V*(N-1)/(N*W)", "V/W - V/(N*W)"],
    "ch03-cx3-t-allreduce": ["2*V/W", "2*V*(N-1)/(N*W)"],
    "ch03-cx3-t-alltoall": ["V/(4*W)", "V*floor(N**2/4)/(N**2*W)", "V*floor(N*N/4)/(W*N**2)"],
    "ch05-e2-dp-t-comms": ["8*D*F/W", "8*D*F*(X-1)/(X*W)"],
    "ch05-e3-fsdp-t-comms": ["4*D*F/W", "4*D*F*(X-1)/(X*W)"],
    "ch05-e6-tp-t-comms": ["4*B*D/W", "4*B*D*(Y-1)/(Y*W)"],
    "ch12-q41-node-egress-bytes": ["B*N", "N*B - B/M", "B*N*(N*M-1)/(N*M)"],
}


def test_every_limit_record_is_covered():
    assert {q.qid for q in FORMULAS if q.limit} == set(LIMIT_WRONG) == set(LIMIT_RIGHT)


@pytest.mark.parametrize(("qid", "answer"), [(qid, a) for qid, answers in LIMIT_WRONG.items() for a in answers])
def test_an_answer_right_only_in_the_limit_is_wrong(qid, answer):
    graded, checked = both_judges(QUESTIONS[qid], answer)
    assert graded.score == 0 and not checked.ok, (graded, checked)
    assert checked.diagnosis in (graded.diagnosis, "edge"), (graded, checked)
    if graded.diagnosis == "limit_only":
        assert "not the exact form" in graded.message and checked.message == graded.message


@pytest.mark.parametrize(("qid", "answer"), [(qid, a) for qid, answers in LIMIT_RIGHT.items() for a in answers])
def test_the_limit_form_and_the_exact_form_are_right(qid, answer):
    graded, checked = both_judges(QUESTIONS[qid], answer)
    assert graded.status is Status.CORRECT and checked.status is Status.CORRECT, (graded, checked)


def test_the_grader_passes_the_submissions_seed_to_a_formula(monkeypatch):
    """The unseen points are drawn from the submission's grading seed: the one judge hands it to the formula kind."""
    from autograder import kinds
    from autograder.kinds import formula as formula_kind
    from autograder.questions import chapter_names, load_chapter

    q = next(q for c in chapter_names() for q in load_chapter(c).questions if q.kind == "formula")
    seen = []
    real = formula_kind.judge
    monkeypatch.setattr(formula_kind, "judge", lambda q, a, seed=None: seen.append(seed) or real(q, a, seed))
    kinds.judge(q, str(q.reference), "submission-seed")
    assert seen == ["submission-seed"]
