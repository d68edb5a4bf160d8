"""Checkers: pure functions from a question and an answer to a Verdict.

Parse, check and phrase are separate steps: ``parse_*`` turns the raw answer into a value or an
``Invalid``; the checker compares values; ``messages.phrase`` words the diagnosis. One table,
``KINDS``, dispatches on the question's kind: a new question is a record, not a branch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from . import equivalence as eq
from .formula import Invalid, Parsed, answer_to_text, parse_formula
from .messages import phrase, phrase_invalid
from .numbers import DIMENSION_WORDS, UNITS, Tolerance, parse_number
from .questions import Accept, Choice, Formula, Function, Number, Output, Program, Question, Slip
from .verdict import Status, Verdict

CLOSE = 0.25  # a number within 25% but outside tolerance is "close"
# Program inputs at grading time come from a seed the notebook never sees (the self-check uses 0).
GRADING_SEED = 20260101


def judge(question: Question, answer: Any, symbolic: bool = False) -> Verdict:
    """Judge one raw answer (what the student's notebook recorded)."""
    return KINDS[question.kind](question, answer, symbolic)


def invalid(inv: Invalid, **ctx: Any) -> Verdict:
    return Verdict(Status.INVALID, 0.0, inv.code, phrase_invalid(inv, **ctx), {"detail": inv.detail})


def wrong(code: str, hint: str = "", **ctx: Any) -> Verdict:
    message = phrase(code, **ctx)
    if hint:
        message += " Hint: " + hint
    return Verdict(Status.INCORRECT, 0.0, code, message)


def correct(**data: Any) -> Verdict:
    return Verdict(Status.CORRECT, 1.0, "correct", "Correct.", data)


def partial(credit: float, message: str) -> Verdict:
    return Verdict(Status.PARTIAL, credit, "partial", message)


# --- formulas -------------------------------------------------------------------------------------

def formula_context(names: Sequence[str]) -> dict[str, Any]:
    return {"names": ", ".join(names), "expected": "a formula (a sympy expression or text like '2*B*D')"}


def parse_known(names: Sequence[str], answer: Any) -> Parsed:
    """Parse an author's answer (reference, slip, alternative); failing is a course bug."""
    p = parse_formula(answer, names)
    if isinstance(p, Invalid):
        raise ValueError(f"cannot parse the author's formula {answer!r}: {p.code} {p.detail}")
    return p


def check_formula(reference: Any, names: Sequence[str], counts: Sequence[str], answer: Any,
                  accept: Sequence[Accept] = (), slips: Sequence[Slip] = (),
                  symbolic: bool = False) -> Verdict:
    p = parse_formula(answer, names)
    if isinstance(p, Invalid):
        return invalid(p, **formula_context(names))
    domain = eq.Domain(tuple(names), frozenset(counts))
    ref = parse_known(names, reference).expr

    def same(known: Any) -> bool:
        return eq.compare(parse_known(names, known).expr, p.expr, domain).equal

    result = eq.compare(ref, p.expr, domain)
    if result.equal:
        proved = symbolic and eq.confirm_symbolically(ref, p.expr)
        return correct(confirmed="symbolic" if proved else "numeric")
    for a in accept:
        if same(a.answer):
            return partial(a.credit, a.message)
    hint = next((s.hint for s in slips if s.hint and same(s.answer)), "")
    return wrong(result.diagnosis, hint, **formula_context(names))


def judge_formula(q: Formula, answer: Any, symbolic: bool = False) -> Verdict:
    return check_formula(q.reference, q.names, q.counts.split(), answer, q.accept, q.slips, symbolic)


# --- numbers --------------------------------------------------------------------------------------

def number_context(unit: str, tolerance: Tolerance) -> dict[str, Any]:
    dim = UNITS[unit][0]
    examples = [u for u, (d, _) in UNITS.items() if d == dim and u][:6]
    tol = f"±{tolerance.rtol:.2g}" if tolerance.low is None else "the accepted range"
    return {"unit": unit or "a plain number", "dimension": DIMENSION_WORDS[dim],
            "unit_examples": ", ".join(examples) or "a plain number", "tolerance": tol,
            "expected": "a number (or text with a unit, like '1.5 ms')"}


def factor_code(k: Any, unit: str, unit_given: str | None) -> str:
    """A wrong number that is k times the reference: a unit slip (k a power of 1000, no unit
    given) or a plain factor. Shared with the self-check so both say the same."""
    power = math.log10(abs(float(k)))
    if unit_given is None and unit and k > 0 and abs(power) >= 3 and power == round(power):
        return f"unit:{k}"
    return f"ratio:{k}"


def number_diagnosis(reference: float, tolerance: Tolerance, unit: str, value: float,
                     unit_given: str | None) -> str:
    if reference == 0 or value == 0:
        return "not_equal"
    for k in eq.NICE_FACTORS:
        if tolerance.accepts(reference, value / float(k)):
            return factor_code(k, unit, unit_given)
    if abs(value / reference - 1) <= CLOSE:
        return "close"
    decades = round(math.log10(abs(value)) - math.log10(abs(reference)))  # value / reference may overflow
    return f"magnitude:{decades:+d}" if (value > 0) == (reference > 0) and decades else "not_equal"


def check_number(reference: float, unit: str, tolerance: Tolerance, answer: Any,
                 accept: Sequence[Accept] = (), slips: Sequence[Slip] = ()) -> Verdict:
    p = parse_number(answer, unit)
    if isinstance(p, Invalid):
        return invalid(p, **number_context(unit, tolerance))
    reference = float(reference)
    if tolerance.accepts(reference, p.value):
        return correct()
    near = tolerance.relative()
    for a in accept:
        if near.accepts(float(a.answer), p.value):
            return partial(a.credit, a.message)
    hint = next((s.hint for s in slips if s.hint and near.accepts(float(s.answer), p.value)), "")
    code = number_diagnosis(reference, tolerance, unit, p.value, p.unit_given)
    return wrong(code, hint, **number_context(unit, tolerance))


def judge_number(q: Number, answer: Any, symbolic: bool = False) -> Verdict:
    return check_number(q.reference, q.unit, q.tolerance, answer, q.accept, q.slips)


# --- choices --------------------------------------------------------------------------------------

def choice_context(options: Sequence[str]) -> dict[str, Any]:
    return {"options": ", ".join(repr(o) for o in options), "expected": "one of the option names"}


def parse_choice(options: Sequence[str], answer: Any) -> str | Invalid:
    if answer is None or answer is Ellipsis or isinstance(answer, dict):
        # "empty", or the reason a record's marker carries: a recorded None is {"invalid": "empty", ...}
        reason = answer_to_text(answer)
        return reason if isinstance(reason, Invalid) else Invalid("wrong_type", "dict")
    if not isinstance(answer, str):
        return Invalid("wrong_type", type(answer).__name__)
    text = answer_to_text(answer)  # a plain str, whatever a subclass overrides
    if isinstance(text, Invalid):
        return text
    by_lower = {o.lower(): o for o in options}
    return by_lower.get(text.strip().lower()) or Invalid("unknown_option", text[:40])


def judge_choice(q: Choice, answer: Any, symbolic: bool = False) -> Verdict:
    p = parse_choice(q.options, answer)
    if isinstance(p, Invalid):
        return invalid(p, **choice_context(q.options))
    if p == q.reference:
        return correct()
    hint = next((s.hint for s in q.slips if s.hint and s.answer == p), "")
    return wrong("wrong_option", hint, **choice_context(q.options))


# --- functions ------------------------------------------------------------------------------------

def check_output(spec: Output, expected: Any, got: Any, symbolic: bool = False) -> Verdict:
    """One returned item of a student's function; a list of numbers is judged element-wise."""
    if spec.kind == "formula":
        return check_formula(expected, spec.symbols.split(), (), got, symbolic=symbolic)
    if isinstance(expected, list | tuple):
        if not isinstance(got, list) or len(got) != len(expected):
            shape = f"{len(got)} values" if isinstance(got, list) else type(got).__name__
            return invalid(Invalid("wrong_type", f"{shape} (expected {len(expected)} values)"),
                           expected="an array the shape of the input")
        for e, g in zip(expected, got, strict=True):
            v = check_number(e, spec.unit, spec.tolerance, g)
            if not v.ok:
                return v
        return correct()
    return check_number(expected, spec.unit, spec.tolerance, got)


def check_function(q: Function, outputs: Any, symbolic: bool = False) -> Verdict:
    """``outputs``: per probe, the list of returned items as recorded (or {"error": ...})."""
    if isinstance(outputs, dict) and "error" in outputs:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"Your function raised an error: {outputs['error']}")
    if not isinstance(outputs, list) or len(outputs) != len(q.probes):
        return invalid(Invalid("wrong_type", type(outputs).__name__), expected="one result per test case")
    failures = []
    for i, (probe, items) in enumerate(zip(q.probes, outputs, strict=True)):
        v = _check_probe(q, probe, items, symbolic)
        if not v.ok:
            failures.append((i, probe, v))
    if not failures:
        return correct()
    i, probe, v = failures[0]
    args = ", ".join(f"{k}={_short(val)}" for k, val in probe.items())
    message = f"{len(failures)} of {len(q.probes)} test cases fail. First, with {args}: {v.message}"
    score = 1 - len(failures) / len(q.probes)
    status = Status.PARTIAL if score > 0 else Status.INCORRECT
    return Verdict(status, score, v.diagnosis, message, {"failed": [f[0] for f in failures]})


def _check_probe(q: Function, probe: dict[str, Any], items: Any, symbolic: bool) -> Verdict:
    if isinstance(items, dict) and "error" in items:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"your function raised {items['error']}")
    expected = q.reference(**probe)
    specs = q.outputs
    if len(specs) == 1:
        expected, items = (expected,), (items[0] if isinstance(items, list) and len(items) == 1 else items,)
    if not isinstance(items, list | tuple) or len(items) != len(specs):
        return invalid(Invalid("wrong_type", "a different number of results"),
                       expected=f"{len(specs)} returned values")
    for n, (spec, e, g) in enumerate(zip(specs, expected, items, strict=True)):
        v = check_output(spec, e, g, symbolic)
        if not v.ok:
            where = f"returned value {n + 1}: " if len(specs) > 1 else ""
            return Verdict(v.status, 0.0, v.diagnosis, where + v.message)
    return correct()


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list | tuple) and len(v) > 4:
        return f"[{len(v)} values]"
    return repr(v)


def judge_program(q: Program, answer: Any, symbolic: bool = False) -> Verdict:
    from .programs import judge_program as run_and_judge  # imports jax only when a program is judged

    return run_and_judge(q.spec, answer, seed=GRADING_SEED)


KINDS: dict[str, Callable[[Any, Any, bool], Verdict]] = {
    Formula.kind: judge_formula,
    Number.kind: judge_number,
    Choice.kind: judge_choice,
    Function.kind: check_function,
    Program.kind: judge_program,
}
