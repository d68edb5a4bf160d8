"""Hand-made questions of the scalar kinds (chapter 99), their self-check data, and the comparison of
the grader's verdict with the self-check's, shared by the engine tests and the property tests."""

from __future__ import annotations

import sympy as sp

from autograder import fingerprint, record
from autograder.checks import judge
from autograder.numbers import Tolerance
from autograder.questions import Accept, Choice, Formula, Number, Question, Slip
from course.symbols import B, D, F, N

FORMULAS = [
    Formula(qid="ch99-t1-flops", points=1, prompt="p", reference=2 * B * D * F, symbols="B D F N",
            slips=(Slip(B * D * F, "ratio:1/2", "Count the multiply and the add."),
                   Slip(2 * B * D, "missing_symbol:F"), Slip(2 * B * D * F * N, "extra_symbol:N"))),
    Formula(qid="ch99-t2-ring", points=1, prompt="p", reference=B * D * (N - 1), symbols="B D N", counts="N",
            slips=(Slip(B * D * N, "lower_terms", "A ring of N has N-1 hops."), Slip(B * (N - 1), "missing_symbol:D")),
            accept=(Accept(B * D * N - B * D / 2, 0.5, "Close: count the hops exactly."),)),
    Formula(qid="ch99-t3-max", points=1, prompt="p", reference=sp.Max(B * D, D**2) / F, symbols="B D F",
            slips=(Slip(B * D / F, "partly"), Slip(sp.Max(B * D, D**2), "missing_symbol:F"))),
]
NUMBERS = [
    Number(qid="ch99-t4-time", points=1, prompt="p", reference=1.01e-3, unit="s",
           slips=(Slip(1.01, "unit:1000"), Slip(2.02e-3, "ratio:2", "Both directions share the link."))),
    Number(qid="ch99-t5-bytes", points=1, prompt="p", reference=16.4e9, unit="B",
           tolerance=Tolerance(low=15.9e9, high=17.3e9), slips=(Slip(8.2e9, "ratio:1/2"),)),
    Number(qid="ch99-t6-intensity", points=1, prompt="p", reference=243.0, unit="",
           slips=(Slip(486.0, "ratio:2", "bf16 is two bytes."),), accept=(Accept(121.5, 0.5, "Per direction only."),)),
]
CHOICES = [
    Choice(qid="ch99-t7-bound", points=1, prompt="p", reference="memory", options=("compute", "memory", "comms"),
           slips=(Slip("compute", "wrong_option", "Compare the intensity with the critical one."),)),
]
QUESTIONS = FORMULAS + NUMBERS + CHOICES
PRINTS = {q.qid: fingerprint.make(q) for q in QUESTIONS}


def both(q: Question, answer: object):
    encoded = record.encode_scalar(q.kind, answer)
    return judge(q, encoded), fingerprint.selfcheck(PRINTS[q.qid], q.qid, encoded)


def assert_agree(q: Question, answer: object, diagnosis: bool) -> None:
    """The same verdict, except where the self-check cannot tell ("edge"): then it withholds the tick."""
    graded, checked = both(q, answer)
    if checked.diagnosis == "edge":
        assert checked.score == 0.0
        return
    assert checked.status == graded.status, f"{q.qid} {answer!r}: grader {graded}, self-check {checked}"
    assert checked.score == graded.score
    if diagnosis:
        assert checked.diagnosis == graded.diagnosis, f"{q.qid} {answer!r}: {graded.message} / {checked.message}"
        assert checked.message == graded.message
