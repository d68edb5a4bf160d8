"""Self-check data: fingerprints of the answers, so a release notebook can say "off by a factor of
2" offline without containing the answer in plain text.

A formula's fingerprint is the hash of its value (9 significant digits) at fixed points of its
domain; a number's is the set of hashes of the fine logarithmic buckets that cover its tolerance
interval; a choice's is the hash of the right option. The same fingerprints are taken of accepted
alternatives and of slips that carry a hint, and coarse buckets mark numbers that are "close".
Diagnosis reuses the grader's codes and order: a student value divided by each common factor is
hashed again, so "ratio:2" needs no reference value.

Anyone can brute-force a hashed number with enough tries; the aim is that the answer is not
*printed*, not that it is secret.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import mpmath

from . import equivalence as eq
from .checks import (
    CLOSE,
    choice_context,
    correct,
    factor_code,
    formula_context,
    invalid,
    number_context,
    parse_choice,
    parse_known,
    wrong,
)
from .formula import Invalid, parse_formula
from .numbers import Tolerance, parse_number
from .questions import Chapter, Choice, Formula, Function, Number, Program, Question
from .verdict import Status, Verdict

SALT = "scaling-course/fingerprint/v1"
DIGITS = 9  # rounding of formula values before hashing; the grader's tolerance is 1e-10
LEADING_DIGITS = eq.LEADING_DIGITS
GRID = 8  # number buckets per tolerance width
COARSE = 0.01  # bucket width of the "close" band
ARRAY_ELEMENTS = 8  # elements of an array output that the self-check fingerprints


def _h(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, (SALT, *parts))).encode()).hexdigest()[:16]


def _seed(tag: str) -> int:
    return int(hashlib.sha256(tag.encode()).hexdigest()[:8], 16)


def _round(v: mpmath.mpf | None, digits: int = DIGITS) -> str:
    return eq.round_token(v, digits)


# --- formulas -------------------------------------------------------------------------------------

def formula_print(tag: str, names: Sequence[str], counts: Sequence[str], reference: Any,
                  known: Sequence[tuple[Any, float, str, str]] = ()) -> dict[str, Any]:
    """``known``: (answer, credit, message, hint) of accepted alternatives and hinted slips."""
    domain = eq.Domain(tuple(names), frozenset(counts))
    points = domain.points(eq.N_POINTS, seed=_seed(tag))
    large = domain.large(points)

    def answer(expr: Any, credit: float, message: str, hint: str) -> dict[str, Any]:
        at = eq.evaluator(parse_known(names, expr).expr, names)
        entry = {"credit": credit, "message": message, "hint": hint,
                 "hashes": [_h(tag, i, _round(at(p))) for i, p in enumerate(points)]}
        if credit == 1.0:
            entry["leading"] = [_h(tag, "large", i, _round(at(p), LEADING_DIGITS))
                                for i, p in enumerate(large)]
        return entry

    ref = parse_known(names, reference).expr
    return {"symbols": list(names), "counts": list(counts), "reference_symbols": sorted(eq.free_names(ref)),
            "at": [{k: str(v) for k, v in p.items()} for p in points],
            "answers": [answer(reference, 1.0, "", "")] + [answer(*k) for k in known]}


def _matches(tag: str, hashes: list[str], values: list[mpmath.mpf | None], k: Fraction = Fraction(1),
             sub: tuple = (), digits: int = DIGITS) -> bool:
    with mpmath.workdps(eq.DIGITS):
        factor = mpmath.mpf(k.numerator) / k.denominator
        for i, v in enumerate(values):
            candidates = eq.tokens(None if v is None else v / factor, digits)
            if not any(_h(tag, *sub, i, t) == hashes[i] for t in candidates):
                return False
    return True


def formula_check(fp: dict[str, Any], tag: str, answer: Any) -> Verdict:
    names = tuple(fp["symbols"])
    ctx = formula_context(names)
    p = parse_formula(answer, names)
    if isinstance(p, Invalid):
        return invalid(p, **ctx)
    points = [{k: Fraction(v) for k, v in pt.items()} for pt in fp["at"]]
    at = eq.evaluator(p.expr, names)
    values = [at(pt) for pt in points]
    ref, *others = fp["answers"]
    if _matches(tag, ref["hashes"], values):
        return correct()
    for a in others:
        if a["credit"] > 0 and _matches(tag, a["hashes"], values):
            return Verdict(Status.PARTIAL, a["credit"], "partial", a["message"])
    hint = next((a["hint"] for a in others if a["hint"] and _matches(tag, a["hashes"], values)), "")
    # The grader's order (equivalence.diagnose): factor, symbols, leading terms, partial agreement.
    if all(v is None for v in values):
        return wrong("not_real", hint, **ctx)
    for k in eq.NICE_FACTORS:
        if _matches(tag, ref["hashes"], values, k):
            return wrong(f"ratio:{k}", hint, **ctx)
    mine, theirs = eq.free_names(p.expr), frozenset(fp["reference_symbols"])
    if mine - theirs:
        return wrong("extra_symbol:" + ",".join(sorted(mine - theirs)), hint, **ctx)
    if theirs - mine:
        return wrong("missing_symbol:" + ",".join(sorted(theirs - mine)), hint, **ctx)
    large = [at(pt) for pt in eq.Domain(names).large(points)]
    if _matches(tag, ref["leading"], large, sub=("large",), digits=LEADING_DIGITS):
        return wrong("lower_terms", hint, **ctx)
    return wrong("partly" if _any_point(tag, ref["hashes"], values) else "not_equivalent", hint, **ctx)


def _any_point(tag: str, hashes: list[str], values: list[mpmath.mpf | None]) -> bool:
    with mpmath.workdps(eq.DIGITS):
        return any(v is not None and _h(tag, i, _round(v)) == hashes[i] for i, v in enumerate(values))


# --- numbers --------------------------------------------------------------------------------------

def _grid(tol: Tolerance, reference: float) -> float:
    lo, hi = tol.bounds(reference)
    width = math.log(hi / lo) if lo > 0 and hi > 0 else 2 * tol.rtol
    return max(width / GRID, 1e-12)


def _bucket(value: float, g: float) -> str:
    if value == 0:
        return "0"
    if not math.isfinite(value):  # a huge answer divided by a small factor
        return "inf"
    return ("-" if value < 0 else "+") + str(math.floor(math.log(abs(value)) / math.log1p(g)))


def _buckets(tag: str, tol: Tolerance, reference: float, g: float) -> list[str]:
    lo, hi = tol.bounds(float(reference))
    if lo <= 0 <= hi:
        return [_h(tag, "0")]
    sign = "-" if hi < 0 else "+"
    a, b = sorted(int(_bucket(v, g)[1:]) for v in (lo, hi))
    return [_h(tag, f"{sign}{i}") for i in range(a, b + 1)]


def number_print(tag: str, unit: str, tol: Tolerance, reference: float,
                 known: Sequence[tuple[float, float, str, str]] = ()) -> dict[str, Any]:
    g = _grid(tol, float(reference))
    answers = [{"credit": 1.0, "message": "", "hint": "", "buckets": _buckets(tag, tol, reference, g)}]
    answers += [{"credit": c, "message": m, "hint": h, "buckets": _buckets(tag, tol.relative(), v, g)}
                for v, c, m, h in known]
    return {"unit": unit, "grid": g, "tolerance": {"rtol": tol.rtol, "low": tol.low, "high": tol.high},
            "answers": answers, "close": _buckets(tag, Tolerance(rtol=CLOSE), reference, COARSE)}


def number_check(fp: dict[str, Any], tag: str, answer: Any) -> Verdict:
    ctx = number_context(fp["unit"], Tolerance(**fp["tolerance"]))
    p = parse_number(answer, fp["unit"])
    if isinstance(p, Invalid):
        return invalid(p, **ctx)
    g = fp["grid"]

    def inside(value: float, buckets: list[str], width: float = g) -> bool:
        return _h(tag, _bucket(value, width)) in buckets

    ref, *others = fp["answers"]
    if inside(p.value, ref["buckets"]):
        return correct()
    for a in others:
        if a["credit"] > 0 and inside(p.value, a["buckets"]):
            return Verdict(Status.PARTIAL, a["credit"], "partial", a["message"])
    hint = next((a["hint"] for a in others if a["hint"] and inside(p.value, a["buckets"])), "")
    if p.value != 0:
        for k in eq.NICE_FACTORS:
            if inside(p.value / float(k), ref["buckets"]):
                return wrong(factor_code(k, fp["unit"], p.unit_given), hint, **ctx)
        if inside(p.value, fp["close"], COARSE):
            return wrong("close", hint, **ctx)
    return wrong("not_equal", hint, **ctx)


# --- questions and chapters -----------------------------------------------------------------------

def make_chapter(chapter: Chapter) -> dict[str, Any]:
    return {"chapter": chapter.name, "title": chapter.title, "format": 1,
            "questions": {q.qid: make(q) for q in chapter.questions}}


def make(q: Question) -> dict[str, Any]:
    from .hints import hint_for

    base = {"kind": q.kind, "points": q.points, "prompt": q.prompt, "url": q.url, "hint": hint_for(q)}
    if isinstance(q, Formula):
        known = [(a.answer, a.credit, a.message, "") for a in q.accept]
        known += [(s.answer, 0.0, "", s.hint) for s in q.slips if s.hint]
        return base | formula_print(q.qid, q.names, q.counts.split(), q.reference, known)
    if isinstance(q, Number):
        known = [(a.answer, a.credit, a.message, "") for a in q.accept]
        known += [(s.answer, 0.0, "", s.hint) for s in q.slips if s.hint]
        return base | number_print(q.qid, q.unit, q.tolerance, q.reference, known)
    if isinstance(q, Choice):
        hints = {_h(q.qid, s.answer): s.hint for s in q.slips if s.hint}
        return base | {"options": list(q.options), "answer": _h(q.qid, q.reference), "hints": hints}
    if isinstance(q, Function):
        return base | {"probes": [dict(p) for p in q.probes], "builder": q.builder,
                       "outputs": [_output_print(q, i, probe) for i, probe in enumerate(q.probes)]}
    if isinstance(q, Program):
        return base | {"program": q.spec.to_json()}
    raise TypeError(f"{q.qid}: no fingerprint for kind {q.kind!r}")


def _output_print(q: Function, i: int, probe: dict[str, Any]) -> list[dict[str, Any]]:
    expected = q.reference(**probe)
    specs = q.outputs
    expected = (expected,) if len(specs) == 1 else tuple(expected)
    prints = []
    for n, (spec, e) in enumerate(zip(specs, expected, strict=True)):
        tag = f"{q.qid}/{i}/{n}"
        if spec.kind == "formula":
            prints.append({"kind": "formula"} | formula_print(tag, spec.symbols.split(), (), e))
        elif isinstance(e, list | tuple):
            elements = [number_print(f"{tag}/{j}", spec.unit, spec.tolerance, x)
                        for j, x in enumerate(e[:ARRAY_ELEMENTS])]
            prints.append({"kind": "array", "length": len(e), "elements": elements})
        else:
            prints.append({"kind": "number"} | number_print(tag, spec.unit, spec.tolerance, e))
    return prints


def selfcheck(fp: dict[str, Any], qid: str, answer: Any) -> Verdict:
    """Judge a recorded answer against the fingerprints of question ``qid``."""
    kind = fp["kind"]
    if kind == "formula":
        return formula_check(fp, qid, answer)
    if kind == "number":
        return number_check(fp, qid, answer)
    if kind == "choice":
        return _choice_check(fp, qid, answer)
    if kind == "function":
        return _function_check(fp, qid, answer)
    if kind == "program":  # ``answer`` is the live function here: the self-check runs it
        from .programs import judge_report, run
        from .questions import ProgramSpec

        spec = ProgramSpec.from_json(fp["program"])
        return judge_report(spec, run(spec, answer, seed=0), seed=0)
    return Verdict(Status.INVALID, 0.0, "unknown_kind", f"This course version cannot check {kind!r} answers.")


def _choice_check(fp: dict[str, Any], qid: str, answer: Any) -> Verdict:
    options = tuple(fp["options"])
    ctx = choice_context(options)
    p = parse_choice(options, answer)
    if isinstance(p, Invalid):
        return invalid(p, **ctx)
    if _h(qid, p) == fp["answer"]:
        return correct()
    return wrong("wrong_option", fp["hints"].get(_h(qid, p), ""), **ctx)


def _function_check(fp: dict[str, Any], qid: str, outputs: Any) -> Verdict:
    if isinstance(outputs, dict) and "error" in outputs:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"Your function raised an error: {outputs['error']}")
    failed = []
    for i, (probe, items, prints) in enumerate(zip(fp["probes"], outputs, fp["outputs"], strict=True)):
        v = _probe_check(f"{qid}/{i}", items, prints)
        if not v.ok:
            failed.append((probe, v))
    if not failed:
        return correct()
    probe, v = failed[0]
    args = ", ".join(f"{k}={val!r}" if not isinstance(val, list) else f"{k}=[{len(val)} values]"
                     for k, val in probe.items())
    score = 1 - len(failed) / len(fp["probes"])
    return Verdict(Status.PARTIAL if score else Status.INCORRECT, score, v.diagnosis,
                   f"{len(failed)} of {len(fp['probes'])} test cases fail. First, with {args}: {v.message}")


def _probe_check(tag: str, items: Any, prints: list[dict[str, Any]]) -> Verdict:
    if isinstance(items, dict) and "error" in items:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"your function raised {items['error']}")
    if len(prints) == 1:
        items = [items[0] if isinstance(items, list) and len(items) == 1 else items]
    if not isinstance(items, list) or len(items) != len(prints):
        return invalid(Invalid("wrong_type", "a different number of results"),
                       expected=f"{len(prints)} returned values")
    for n, (item, p) in enumerate(zip(items, prints, strict=True)):
        v = _item_check(f"{tag}/{n}", item, p)
        if not v.ok:
            where = f"returned value {n + 1}: " if len(prints) > 1 else ""
            return Verdict(v.status, 0.0, v.diagnosis, where + v.message)
    return correct()


def _item_check(tag: str, item: Any, p: dict[str, Any]) -> Verdict:
    if p["kind"] == "formula":
        return formula_check(p, tag, item)
    if p["kind"] == "number":
        return number_check(p, tag, item)
    if not isinstance(item, list) or len(item) != p["length"]:
        got = f"{len(item)} values" if isinstance(item, list) else type(item).__name__
        return invalid(Invalid("wrong_type", f"{got} (expected {p['length']} values)"),
                       expected="an array the shape of the input")
    for j, (x, e) in enumerate(zip(item, p["elements"], strict=False)):
        v = number_check(e, f"{tag}/{j}", x)
        if not v.ok:
            return v
    return correct()
