"""Formula answers: a sympy expression over the book's symbols.

Encoded in the kernel as text (``record.encode_scalar``); compared by value at points of the
symbols' domains (``equivalence``). One diagnosis, ``diagnose``, serves both judges: the grader asks
its questions of the reference's values (``targets.Exact``), the self-check of their hashes
(``targets.Printed``), so the two say the same thing in the same order.

Fair reading: a formula written with a rounded decimal in it (``formula.rounded``: 1.97e14, 0.333,
not 2.0 or 0.5) is right when its values lie within ``RTOL`` (3 significant figures) of the reference's
at every point, so a coefficient the student worked out and rounded honestly (6.25e10*T for
2*31.27e9*T) is accepted while a truly different one is a factor slip; it must agree at the small
points too (``Setting.small``), where lower-order terms weigh, so rounding never hides a missing term.
A formula in whole numbers, fractions and simple decimals must be exact (within ``EXACT``): a small
term that is missing (one norm's D parameters beside 3*D*F) is a slip, not rounding. A record whose
reference is a limit (the book's large-N form) names the symbols in ``limit``; its exact form, the
reference times (N-1)/N for each of them (``full_form``), is right too, and an answer that only agrees
where those symbols are huge is not ("limit_only": a wrong exact form, or a term that vanishes there).

Where credit is decided, the grader does not stop at the public points (they ship in the self-check
data, and their values can be recovered from it): an answer credited there must also agree at points of
its own (``grader_points``), drawn from the submission's grading seed, that cover the reference's
branches and each branch of the answer's own max/min/abs; else it is wrong ("elsewhere"). The
self-check, which has only the public points, withholds its tick ("edge") from an answer with a branch
that is never the active one at them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import mpmath
import sympy as sp

from .. import equivalence as eq
from .. import record
from ..formula import FUNCTIONS, Invalid, Parsed, parse_formula, to_text
from ..messages import phrase
from ..numbers import UNITS
from ..questions import Accept, Formula, Slip
from ..symbols import symbol
from ..verdict import Status, Verdict
from . import targets as tg
from .common import and_list, correct, edge, invalid, partial, wrong

RTOL = 0.005  # an answer with decimals: agreement within 3 significant figures at every point
EXACT = 1e-9  # an answer in exact numbers: the same values, up to the evaluation's own rounding
K_DRAWN = 10  # the grader's own points per kind: covering the reference's branches, and the answer's
ANSWER_CANDIDATES = 200  # points drawn per point kept, to find where each branch of the answer is active
MAX_TERMS = 12  # an answer's terms tried one at a time, each times each simple factor
N_MOVED = 4  # points at which each symbol is moved, to find the symbols the answer's ratio to the reference depends on


def context(names: Sequence[str]) -> dict[str, Any]:
    return {"names": ", ".join(names), "expected": "a formula (a sympy expression or text like '2*B*D')",
            "tolerance": "3 significant figures"}


def parse_known(names: Sequence[str], answer: Any) -> Parsed:
    """Parse an author's answer (reference, slip, alternative); failing is a course bug."""
    p = parse_formula(answer, names)
    if isinstance(p, Invalid):
        raise ValueError(f"cannot parse the author's formula {answer!r}: {p.code} {p.detail}")
    return p


def read(answer: Any, names: Sequence[str]) -> Parsed | Invalid:
    """A student's formula, or why it cannot be read. A word where the parser wants a "*" (2 FLOPs, 4
    bytes) is a unit, not a product: its sentence says to drop the unit, not to multiply by its first
    letter."""
    p = parse_formula(answer, names)
    if isinstance(p, Invalid) and p.code == "unknown_name" and p.text and (apart := _apart(p.detail, names)):
        fix = re.sub(rf"(?<![\w.]){re.escape(p.detail)}(?!\w)", apart, p.text)
        return Invalid("glued_symbols", fix.strip(), None, p.text)
    if isinstance(p, Invalid) and p.code in ("implicit_multiplication", "syntax") and p.text:
        ends = re.fullmatch(r"(.*?[\w)])\s*([A-Za-z_][\w/]*)\s*", p.text, re.S)  # a formula, then a word
        unit = ends.group(2) if ends else ""
        if unit and unit not in UNITS and (apart := _apart(unit, names)) \
                and isinstance(parse_formula(ends.group(1), names), Parsed):  # type: ignore[union-attr]
            return Invalid("glued_symbols", f"{ends.group(1)}*{apart}", None, p.text)
        if unit and unit not in names and unit not in FUNCTIONS and (unit in UNITS or len(unit) >= 3) \
                and isinstance(parse_formula(ends.group(1), names), Parsed):  # type: ignore[union-attr]
            return Invalid("unit_in_formula", unit, ends.start(2), p.text)  # type: ignore[union-attr]
    return p


def _apart(word: str, names: Sequence[str]) -> str:
    """``word`` as the product of the question's symbols it is glued from ("BDF" -> "B*D*F", "BDF/NC" ->
    "B*D*F/(N*C)"), or "" where it is not: "2BDF" is how a product is written on paper, and read as a unit, the
    sentence said to drop the formula."""
    def split(part: str) -> list[str] | None:
        if re.fullmatch(r"\d+", part):  # a number divides too: "2BDF/16"
            return [part]
        if not part:
            return None
        for name in sorted(names, key=len, reverse=True):
            if part.startswith(name):
                rest = part[len(name):]
                tail = split(rest) if rest else []
                if tail is not None:
                    return [name, *tail]
        return None

    parts = [split(p) for p in word.split("/")]
    if any(p is None for p in parts) or sum(len(p) for p in parts) < 2:  # type: ignore[arg-type]
        return ""
    texts = ["*".join(p) for p in parts]  # type: ignore[arg-type]
    return "/".join([texts[0], *(t if "*" not in t else f"({t})" for t in texts[1:])])


def seed(tag: str) -> int:
    return int(hashlib.sha256(tag.encode()).hexdigest()[:8], 16)


def full_form(reference: sp.Expr, limit: Sequence[str]) -> sp.Expr:
    """The exact form of a reference that is the large-N limit (the record's ``limit`` symbols): the
    reference times (N-1)/N for each, as each prompt and the syllabus state it (T_AG = (N-1)/N * V/W)."""
    out = reference
    for name in limit:
        out = out * (symbol(name) - 1) / symbol(name)
    return out


def exact_of(names: Sequence[str], reference: sp.Expr, limit: Sequence[str], exact_form: Any) -> sp.Expr | None:
    """The exact form that is right beside the reference: the record's own (``exact_form``), else the reference times
    (N-1)/N for each limit symbol; None where the reference is exact."""
    if exact_form is not None:
        return parse_known(names, exact_form).expr
    return full_form(reference, limit) if limit else None


@dataclass(frozen=True)
class Setting:
    """What both judges know of a question: public, shipped with the self-check data."""

    names: tuple[str, ...]
    counts: tuple[str, ...]
    limit: tuple[str, ...]
    points: tuple[eq.Point, ...]
    anchor: int | None  # the point whose value the "same shape" ratios divide by
    accepts: tuple[tuple[float, str], ...]  # (credit, message) of each accepted alternative
    hints: tuple[str, ...]  # of each slip that carries one
    branches: bool  # the reference has a max or a min: which side is active varies over the domain
    # Points at the bottom of the domain where the reference has a value (not zero): a formula with a
    # rounded decimal must agree there too (``eq.Domain.small``).
    small: tuple[eq.Point, ...] = ()
    exact: bool = False  # the reference is the book's large-N form of an exact one, which is right too
    # The reference has terms of lower order than its leading one (an exact count, (S-1)/(M+S-1)), rather than being
    # its own leading term (2*B*D*F): an answer wrong in its lower-order terms recounts them, or drops them.
    counted: bool = False

    @property
    def large(self) -> list[eq.Point]:
        return eq.Domain.scaled(list(self.points[:3]), self.names)

    @property
    def directions(self) -> list[list[eq.Point]]:
        """Points where every symbol is large and of one size (``LARGE`` times 2 to 8), then the same with each symbol
        in turn (every declared one, so the data does not say which the reference uses) ``LARGE`` times larger still.
        What differs only in lower-order terms vanishes at all of them; a term lower-order as all symbols grow
        together, but not as one grows faster (B*F/(W*Y*Z) beside B*D/(W*X), with F the larger), is no lower-order
        term. One size for all: at the points of the domain, whose values span orders of magnitude, one degree less
        need not be smaller."""
        even = [{name: eq.LARGE * (2 + (k + 2 * i) % 7) for k, name in enumerate(self.names)} for i in range(3)]
        return [even, *(eq.Domain.scaled(even, (name,)) for name in self.names)]

    def moved(self, name: str) -> list[eq.Point]:
        """The first ``N_MOVED`` points with ``name`` alone moved: where the answer's ratio to the reference does
        not change, that ratio does not depend on ``name``."""
        step = 1 if name in self.counts else Fraction(1, 3)
        return [{**pt, name: pt[name] * 3 + step} for pt in self.points[:N_MOVED]]

    @property
    def limit_points(self) -> list[eq.Point]:
        return eq.Domain.scaled(list(self.points), self.limit) if self.limit else []


@dataclass(frozen=True)
class Expected:
    setting: Setting
    oracle: tg.Printed  # tg.Exact in the grader
    uses: Callable[[str], bool]  # does the reference depend on this symbol?
    # does the exact form, right beside the reference, depend on this symbol where the reference does not (N in
    # V*(N-1)/(N*W) beside V/W)? An answer that holds it is not wrong for that.
    uses_exact: Callable[[str], bool] = lambda name: False


def has_lower_terms(ref: sp.Expr) -> bool:
    """Whether the reference, as one fraction, has a sum in its numerator or denominator: terms of different orders
    (or several of one order, whose count is as exact), rather than a single term."""
    numerator, denominator = sp.fraction(sp.together(ref))
    return any(isinstance(sp.expand(part), sp.Add) for part in (numerator, denominator))


@lru_cache(maxsize=4096)
def expected(tag: str, names: tuple[str, ...], counts: tuple[str, ...], reference: Any,
             limit: tuple[str, ...] = (), accept: tuple[Accept, ...] = (),
             slips: tuple[Slip, ...] = (), exact_form: Any = None) -> tuple[Expected, tg.Targets]:
    """The grader's view of a formula question, and the intervals the self-check data is made from."""
    ref = parse_known(names, reference).expr
    domain = eq.Domain(names, frozenset(counts))
    points = domain.points(eq.N_POINTS, seed(tag), cover=ref)
    at = eq.evaluator(ref, names)
    values = [at(p) for p in points]
    anchor = next((i for i, v in enumerate(values) if v is not None and v != 0), None)
    hinted = [s for s in slips if s.hint]
    small = [p for p in domain.small(eq.N_SMALL, seed(tag + "/small")) if at(p) not in (None, 0)]
    exact = exact_of(names, ref, limit, exact_form)
    setting = Setting(names, counts, limit, tuple(points), anchor,
                      tuple((a.credit, a.message) for a in accept), tuple(s.hint for s in hinted),
                      ref.has(sp.Max, sp.Min), tuple(small), exact is not None, has_lower_terms(ref))
    t: tg.Targets = {"ref": [tg.around(v, RTOL) for v in values], "exact": [tg.around(v, EXACT) for v in values],
                     "small": [tg.around(at(p), RTOL) for p in small]}
    if not setting.branches:  # where a max picks a side, "the leading term" means nothing
        t["lead"] = [tg.around(at(p), RTOL) for p in setting.large]
        for k, direction in enumerate(setting.directions):
            t[f"lead{k}"] = [tg.around(at(p), RTOL) for p in direction]
    with mpmath.workdps(eq.DIGITS):  # the reference's ratio between each point and the point with one symbol moved
        for k, name in enumerate(names):
            ratios = [None if v in (None, 0) or m is None else m / v
                      for v, m in zip(values, map(at, setting.moved(name)), strict=False)]
            t[f"move{k}"] = [tg.around(r, EXACT) for r in ratios]
            t[f"mover{k}"] = [tg.around(r, RTOL) for r in ratios]
    common, terms = terms_of(ref)
    for j, term in enumerate(terms if len(terms) > 1 else ()):  # the reference less each of its terms
        less = eq.evaluator(ref - common * term, names)
        t[f"less{j}"] = [tg.around(less(p), EXACT) for p in points]
        t[f"lessr{j}"] = [tg.around(less(p), RTOL) for p in points]
    if anchor is not None:
        with mpmath.workdps(eq.DIGITS):
            t["shape"] = [None if i == anchor or v is None else tg.around(v / values[anchor], RTOL)
                          for i, v in enumerate(values)]
    if limit:
        t["limit"] = [tg.around(at(p), RTOL) for p in setting.limit_points]
    if exact is not None:
        full = eq.evaluator(exact, names)
        t["full"] = [tg.around(full(p), EXACT) for p in points]
        t["full_ref"] = [tg.around(full(p), RTOL) for p in points]
        t["full_small"] = [tg.around(full(p), RTOL) for p in small]
    for key, alternatives in (("accept", [a.answer for a in accept]), ("slip", [s.answer for s in hinted])):
        for j, alt in enumerate(alternatives):
            f = eq.evaluator(parse_known(names, alt).expr, names)
            t[f"{key}{j}"] = [tg.around(f(p), RTOL) for p in points]
            if key == "slip":  # an answer in exact numbers is told a slip's hint only where it is that slip
                t[f"slipx{j}"] = [tg.around(f(p), EXACT) for p in points]
    uses = eq.used_names(ref)
    beside = eq.used_names(exact) - uses if exact is not None else frozenset()
    return Expected(setting, tg.Exact(tag, t), uses.__contains__, beside.__contains__), t


def diagnose(e: Expected, p: Parsed) -> Verdict:
    """The one diagnosis of a formula answer. Order matters: right (or right in the declared limit),
    an accepted alternative, then a constant factor (most specific), a wrong coefficient (or one within 3
    figures yet not right: a constant slightly off), symbols that should or should not appear, a right
    leading order with wrong lower terms (lower-order in every direction of growth), one term of a sum wrong
    (right at every point once it is fixed: more specific than what follows), partial agreement (where a max or
    min picks a side), a ratio to the reference that changes with some of its symbols only; else not equivalent.
    Each names a cause the answer has; none names the factor or the term that would make it right."""
    s, near = e.setting, e.oracle
    ctx = context(s.names)
    at = eq.evaluator(p.expr, s.names)
    values = [at(pt) for pt in s.points]
    if all(v is None for v in values):
        return wrong("not_real", **ctx)
    right = near.accepts("exact", values) if not p.approximate else _rounded_right(e, near.accepts("ref", values), at)
    if right is True:
        return correct()
    full = False
    if s.exact:  # the exact form of the book's large-N one
        full = near.accepts("full", values) if not p.approximate \
            else _rounded_right(e, near.accepts("full_ref", values), at, "full_small")
        if full is True:
            return correct(form="exact")
    if right is None or full is None:
        return edge(**ctx)
    if isinstance(p.expr, sp.floor | sp.ceiling) and _right_unrounded(e, p):
        return wrong("whole_number", **ctx)
    # A limit record's answer in the exact form's shape (it holds a limit symbol) is also read against that form:
    # its values over the (N-1)/N factors, so that twice the exact form is "twice", with the slip's hint.
    written = eq.free_names(p.expr)
    mine = written - _unused(s, p.expr, at, values, written)  # B in 2*B*D*F/(4*B*D*F + 4*B*D): written, not used
    in_limit = bool(mine & set(s.limit))
    readings = [(values, at)]
    if in_limit:
        readings.append(_over_limit_factors(s, values, at))
    # A slip's hint where the answer is that slip: exactly, for an answer in exact numbers (one norm too many is not
    # the slip of none, though within 3 figures of it), to 3 figures for one with rounded decimals.
    slip = "slip" if p.approximate else "slipx"
    hints = list(dict.fromkeys(h for vs, _ in readings for j, h in enumerate(s.hints)
                               if tg.all_near(near, f"{slip}{j}", vs) is True))
    if s.limit and tg.all_near(near, "limit", [at(pt) for pt in s.limit_points]) is True:
        return wrong("limit_only", hints, **ctx, limit=and_list(list(s.limit)))
    for j, (credit, message) in enumerate(s.accepts):
        if near.accepts(f"accept{j}", values) is True:
            return partial(credit, message)
    # Within 3 significant figures everywhere, yet not right: the big terms are right, a small one is not.
    nearly = [tg.all_near(near, "ref", vs) is True for vs, _ in readings]
    for (vs, fn), close in zip(readings, nearly, strict=True):
        code = _constant_factor(e, vs, fn, close)
        if code is not None:
            return wrong(code, hints, **ctx)
    # A symbol the exact form uses (N, beside the large-N form) is no extra one: an answer that holds it wrongly
    # (V*(N-1)/W) has a ratio to the expected one that changes with it, which ``_ratio_depends`` says.
    extra = sorted(n for n in mine if not e.uses(n) and not e.uses_exact(n))
    missing = sorted(n for n in s.names if n not in mine and e.uses(n))
    if extra:  # where it tends to the reference as those counts grow, that says more (a ring's (N-1)/N kept)
        grows = set(extra) <= set(s.counts) and tg.all_near(
            near, "ref", [at(pt) for pt in eq.Domain.scaled(list(s.points), extra)]) is True
        return wrong(("large_only:" if grows else "extra_symbol:") + ",".join(extra), hints, **ctx)
    if missing:  # said otherwise of a number like no slip's: its symbols were numbers when computed (S = 4 in a cell)
        return wrong("missing_symbol:" + ",".join(missing), hints, **ctx, number=not written and not hints)
    if (any(nearly) or tg.all_near(near, "lead", [at(pt) for pt in s.large]) is True) and _lower_order(s, near, at):
        return wrong("lower_terms", hints, **ctx, counted=s.counted)
    # One term of a sum off, the others right, at every point: a cause more specific than agreeing at some points
    # only, which a term off by 2 does where a max picks the side without it.
    code = _one_term(e, p, values)
    if code is not None:
        return wrong(code, hints, **ctx)
    # Agreement at some points only, where the reference or the answer has a max or min: within 3 figures for the
    # reference's (one side dominates there); for the answer's own, exactly, or a term that is merely small somewhere
    # would read as a branch. Without one, agreeing at some points is a coincidence (N/2 is 1 at N = 2), not a cause.
    own_branch = p.expr.has(sp.Max, sp.Min)
    partly = "ref" if p.approximate or s.branches else "exact"
    if (s.branches or own_branch) and any(near.near(partly, i, v) is True for i, v in enumerate(values)):
        return wrong("partly", hints, **ctx, own_branch=own_branch)
    return wrong(_ratio_depends(e, p, values, at) or "not_equivalent", hints, **ctx)


def terms_of(expr: sp.Expr) -> tuple[sp.Expr, list[sp.Expr]]:
    """The terms of a sum at the top of ``expr``, with the factor common to them taken out (2*V*(N - 1)/(N*W) is
    2*V/(N*W) times N and -1): (that factor, the terms); one term where it is no sum."""
    if isinstance(expr, sp.Add):
        return sp.Integer(1), list(expr.args)
    if isinstance(expr, sp.Mul):
        sums = [a for a in expr.args if isinstance(a, sp.Add)]
        if len(sums) == 1:
            return expr / sums[0], list(sums[0].args)
    return sp.Integer(1), [expr]


def _lower_order(s: Setting, near: tg.Printed, at: Callable[[eq.Point], Any]) -> bool:
    """Whether an answer that agrees at the large points still agrees with one symbol growing faster than the others,
    each in turn (``Setting.directions``): what it gets wrong is lower-order in every direction. For a max or min,
    which has no leading term, the agreement at the points decides alone."""
    return s.branches or all(tg.all_near(near, f"lead{k}", [at(pt) for pt in points]) is True
                             for k, points in enumerate(s.directions))


def _one_term(e: Expected, p: Parsed, values: list[Any]) -> str | None:
    """One term of a sum is wrong, the others right: one of the answer's terms off by a simple factor
    ("term_factor"), or one too many ("term_extra"), or the reference less one of its terms ("term_missing").
    Neither the term nor the factor is named: with them, the answer would be one step away."""
    near, key = e.oracle, "ref" if p.approximate else "exact"
    # a rounded answer already within 3 figures would be so with any small term changed: that says nothing
    if not (p.approximate and tg.all_near(near, "ref", values) is True):
        with mpmath.workdps(eq.DIGITS):
            for term in _answer_terms(p.expr):
                f = eq.evaluator(term, e.setting.names)
                tv = [f(pt) for pt in e.setting.points]
                if any(v is None for v in tv):
                    continue
                if tg.all_near(near, key, [None if v is None else v - t for v, t in zip(values, tv, strict=True)]) \
                        is True:
                    return "term_extra"
                for k in eq.NICE_FACTORS:
                    c = mpmath.mpf(k.numerator) / k.denominator - 1
                    if tg.all_near(near, key, [None if v is None else v + c * t for v, t in zip(values, tv,
                                                                                              strict=True)]) is True:
                        return "term_factor"
    less = "lessr" if p.approximate else "less"
    j = 0
    while f"{less}{j}" in near.entries:
        if tg.all_near(near, f"{less}{j}", values) is True:
            return "term_missing"
        j += 1
    return None


def _answer_terms(expr: sp.Expr) -> list[sp.Expr]:
    """The terms of the answer's sum, each with the factor common to them (``terms_of``), then, where products of sums
    are few, those of its expanded form (the 2*D*F*L of L*(2*D*F + 4*D*H*N) + 2*D*V); none where it is no sum. An
    answer whose sums would multiply out to more than ``MAX_TERMS`` squared terms is not expanded."""
    common, terms = terms_of(expr)
    out = [common * t for t in terms] if 1 < len(terms) <= MAX_TERMS else []
    products = 1  # at most as many terms as the product of the sums' lengths: few enough to multiply out cheaply
    for node in sp.preorder_traversal(expr):
        products *= len(node.args) if isinstance(node, sp.Add) else 1
        if products > MAX_TERMS * MAX_TERMS:
            return out
    if products > 1:
        expanded = sp.Add.make_args(sp.expand_mul(expr))
        if 1 < len(expanded) <= MAX_TERMS:
            out += [t for t in expanded if t not in out]
    return out


def _ratio_depends(e: Expected, p: Parsed, values: list[Any], at: Callable[[eq.Point], Any]) -> str | None:
    """"ratio_symbols:N": the answer's ratio to the reference changes with some of the symbols the reference (or its
    exact form) uses, not with the others (V*(N-1)/W beside 2*V*(N-1)/(N*W): a shard size forgotten; beside the
    large-N V/W, whose exact form holds N), decided by moving each symbol alone (``Setting.moved``). Which symbols
    are said; by what factor is not."""
    s, near = e.setting, e.oracle
    used = [n for n in s.names if e.uses(n) or e.uses_exact(n)]
    depends = []
    with mpmath.workdps(eq.DIGITS):
        for k, name in enumerate(s.names):
            if name not in used:
                continue
            ratios = [None if v in (None, 0) or m is None else m / v
                      for v, m in zip(values, map(at, s.moved(name)), strict=False)]
            key = f"mover{k}" if p.approximate else f"move{k}"
            known = any(near.has(key, i) for i in range(len(ratios)))
            if known and tg.all_near(near, key, ratios, only_known=True) is False:
                depends.append(name)
    return "ratio_symbols:" + ",".join(depends) if depends and len(depends) < len(used) else None


def _unused(s: Setting, expr: sp.Expr, at: Callable[[eq.Point], Any], values: list[Any],
            written: frozenset[str]) -> set[str]:
    """The symbols written in an answer that its value does not depend on: the same values with each moved alone
    (``Setting.moved``'s step) at the public points, then at points at the bottom of the domain (where e**(M2 - M1)
    does not vanish beside the other terms, as it does where M1 is 500) and, for an answer with a max, min or abs of
    its own, at points where each of its branches is the active one (a side that never wins at the public points is
    still the answer's). By value, not by sympy's cancel, which a student's text could make slow and which keeps D in
    Max(D*F, B*D)/D. Both judges draw the same points: from the answer and the public symbols alone."""
    domain = eq.Domain(s.names, frozenset(s.counts))

    def groups() -> Any:  # the cheaper first: most answers use every symbol they write, seen at the first points
        yield zip(s.points, values, strict=True)
        yield ((pt, at(pt)) for pt in domain.small(eq.N_SMALL, seed("uses/small")))
        if expr.has(*eq.BRANCHING):
            yield ((pt, at(pt)) for pt in domain.points(K_DRAWN, seed("uses/branches"), cover=expr,
                                                         kinds=eq.BRANCHING))
    unused, compared = set(written), set()
    for group in groups():
        for pt, v in group:
            if not unused:
                return unused
            if v is None:
                continue
            for name in sorted(unused):
                moved = at({**pt, name: pt[name] * 3 + (1 if name in s.counts else Fraction(1, 3))})
                if moved is None or not mpmath.almosteq(moved, v, rel_eps=mpmath.mpf(10) ** -20):
                    unused.discard(name)
                compared.add(name)
    return unused & compared


def _constant_factor(e: Expected, values: list[Any], at: Callable[[eq.Point], Any], nearly: bool) -> str | None:
    """The reference times a constant: a simple factor ("ratio:2"), another one ("ratio:other"), or one within 3
    figures yet not right ("constant_close": a constant slightly off, exact numbers or rounded ones that disagree
    where the small terms weigh, ``Setting.small``); None where the answer is no constant multiple of it. ``nearly``:
    whether the values are all within 3 figures of the reference's (the caller's ``all_near`` of "ref")."""
    s, near = e.setting, e.oracle
    with mpmath.workdps(eq.DIGITS):
        for k in () if nearly else eq.NICE_FACTORS:
            factor = mpmath.mpf(k.numerator) / k.denominator
            if tg.all_near(near, "ref", [None if v is None else v / factor for v in values]) is True:
                return f"ratio:{k}"
        a = s.anchor
        if not nearly and a is not None and values[a] not in (None, 0):
            ratios = [None if v is None else v / values[a] for v in values]
            if all(near.near("shape", i, r) is True for i, r in enumerate(ratios) if i != a):
                return "ratio:other"
        if nearly and _a_multiple(e, at, values):
            return "constant_close"
    return None


def _large_n_factor(limit: Sequence[str]) -> sp.Expr:
    """The (N-1)/N factor of each limit symbol, multiplied: what ``full_form`` puts on the large-N form."""
    return full_form(sp.Integer(1), limit)


def _over_limit_factors(s: Setting, values: list[Any], at: Callable[[eq.Point], Any]
                        ) -> tuple[list[Any], Callable[[eq.Point], Any]]:
    """The answer's values (``values``, at ``s.points``) divided by the (N-1)/N factor of each limit symbol, and the
    same as a function of any point: an answer in the exact form's shape, read as the large-N form it stands for
    (``full_form``'s inverse). The factor is never 0: limit symbols are counts, >= 2 (``questions.Formula``)."""
    f = eq.evaluator(_large_n_factor(s.limit), s.names)

    def over(v: Any, pt: eq.Point) -> Any:
        if v is None:
            return None
        with mpmath.workdps(eq.DIGITS):
            return v / f(pt)
    return [over(v, pt) for v, pt in zip(values, s.points, strict=True)], lambda pt: over(at(pt), pt)


def _right_unrounded(e: Expected, p: Parsed) -> bool:
    """Whether the answer, floor(f) or ceiling(f), is right without it (f is): the formula rounded to a whole
    number, where the question asks for the formula itself. (A floor inside a formula is a part of it.)"""
    inner = p.expr.args[0]
    return diagnose(e, Parsed(inner, to_text(inner), p.approximate)).status is Status.CORRECT


def _a_multiple(e: Expected, at: Callable[[eq.Point], Any], values: list[Any]) -> bool:
    """Whether an answer within 3 figures of the reference at every point is the reference times one constant:
    it keeps the reference's shape (its values over the anchor's, the "shape" targets of ``ratio:other``) and
    stays within 3 figures at the small points too, where a lower-order term would weigh (call inside
    ``workdps``)."""
    s, a = e.setting, e.setting.anchor
    if a is None or values[a] in (None, 0) or not s.small:
        return False
    same_shape = all(e.oracle.near("shape", i, None if v is None else v / values[a]) is True
                     for i, v in enumerate(values) if i != a)
    return same_shape and tg.all_near(e.oracle, "small", [at(pt) for pt in s.small]) is True


def _rounded_right(e: Expected, at_points: bool | None, at: Callable[[eq.Point], Any],
                   small: str = "small") -> bool | None:
    """A formula with rounded decimals: within 3 significant figures at the points and at the small ones."""
    if at_points is False or not e.setting.small:
        return at_points
    at_small = e.oracle.accepts(small, [at(pt) for pt in e.setting.small])
    return at_small if at_points is True or at_small is False else None


def check(tag: str, reference: Any, names: Sequence[str], counts: Sequence[str], answer: Any,
          accept: Sequence[Accept] = (), slips: Sequence[Slip] = (), limit: Sequence[str] = (),
          grading_seed: str | None = None, exact_form: Any = None) -> Verdict:
    """The grader's verdict on one formula answer: the diagnosis at the public points, and credit only where
    the answer also agrees at the grader's own points (``grader_points``)."""
    p = read(answer, names)
    if isinstance(p, Invalid):
        return invalid(p, **context(names))
    e, _ = expected(tag, tuple(names), tuple(counts), reference, tuple(limit), tuple(accept), tuple(slips),
                    exact_form)
    v = diagnose(e, p)
    if v.score <= 0:
        return v
    ref = parse_known(names, reference).expr
    if v.status is Status.PARTIAL:  # the accepted alternative it matched
        j = next(j for j, (c, m) in enumerate(e.setting.accepts) if (c, m) == (v.score, v.message))
        ref = parse_known(names, accept[j].answer).expr
    elif v.data.get("form") == "exact":
        ref = exact_of(names, ref, limit, exact_form)
    # the points covering the answer's branches cost more to find: only for an answer right at the others
    for more in (False, True):
        points = _grader_points(tag, tuple(names), tuple(counts), ref, p.expr, grading_seed, more)
        if not _agrees(ref, p, names, points):
            return wrong("elsewhere", **context(names))
    return v


def _drawn_seed(tag: str, grading_seed: str | None, what: str) -> int:
    """The submission's grading seed (grading/seeds.py) with the question; without one (tests, the release's
    checks), a seed of the question's own that no self-check data holds points of."""
    text = f"{grading_seed}/{tag}/{what}" if grading_seed is not None else f"{tag}/grader/{what}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _grader_points(tag: str, names: tuple[str, ...], counts: tuple[str, ...], ref: sp.Expr, answer: sp.Expr,
                   grading_seed: str | None, branches: bool | None = None) -> list[eq.Point]:
    """Points covering the reference's branches (``branches`` False), the answer's own (True), or both (None)."""
    domain = eq.Domain(names, frozenset(counts))
    points = [] if branches else domain.points(K_DRAWN, _drawn_seed(tag, grading_seed, "points"), cover=ref)
    if branches is not False and answer.has(*eq.BRANCHING, *eq.STEPS):  # where each branch of the answer's own
        # max/min/abs is the active one: a wrong one may be active at 1 point in 250 of the domain, or mostly at its
        # bottom
        points += domain.points(K_DRAWN, _drawn_seed(tag, grading_seed, "branches"), cover=answer,
                                kinds=eq.BRANCHING, candidates=ANSWER_CANDIDATES)
        points += domain.small(K_DRAWN, _drawn_seed(tag, grading_seed, "small"))
        if answer.atoms(*eq.BRANCHING, *eq.STEPS) - ref.atoms(*eq.BRANCHING, *eq.STEPS):
            # and, for a switch the reference lacks, far beyond the domain and off its grid, where one added to a
            # right answer may act (the reference's own switches are judged on its domain, as the self-check does)
            points += domain.wide(K_DRAWN, _drawn_seed(tag, grading_seed, "wide"))
    return points


def grader_points(q: Formula, grading_seed: str | None, answer: Any = None) -> list[eq.Point]:
    """The points beyond the public ones at which the grader asks an answer credited at those."""
    p = read(q.reference if answer is None else answer, q.names)
    expr = p.expr if isinstance(p, Parsed) else sp.Integer(0)
    return _grader_points(q.qid, q.names, tuple(q.counts.split()), parse_known(q.names, q.reference).expr, expr,
                          grading_seed)


def _agrees(ref: sp.Expr, p: Parsed, names: Sequence[str], points: list[eq.Point]) -> bool:
    """Whether the answer takes the value of ``ref`` at every point where ``ref`` has one (to 3 figures for a
    formula with rounded decimals, else exactly)."""
    want, got = eq.evaluator(ref, names), eq.evaluator(p.expr, names)
    for pt in points:
        iv = tg.around(want(pt), RTOL if p.approximate else EXACT)
        if iv is not None and got(pt) not in iv:
            return False
    return True


def encode(fp: dict, answer: Any) -> Any:
    """The answer as the record carries it: canonical text, or why it cannot be recorded."""
    return record.encode_scalar("formula", answer)


def hint(q: Formula) -> str:
    """The symbols the answer uses: no more than "should not depend on F" would tell."""
    e, _ = expected(q.qid, q.names, tuple(q.counts.split()), q.reference, tuple(q.limit.split()),
                    tuple(q.accept), tuple(q.slips), q.exact_form)
    used = [n for n in q.names if e.uses(n)]
    if not used:
        return "The answer is a plain number here: none of the symbols survives in it."
    return f"The answer is a formula in {and_list(used)} and no other symbol."


def judge(q: Formula, answer: Any, seed: str | None = None) -> Verdict:
    """``seed``: the submission's grading seed, from which the grader's own points are drawn."""
    return check(q.qid, q.reference, q.names, q.counts.split(), answer, q.accept, q.slips, q.limit.split(), seed,
                 q.exact_form)


# --- the self-check -------------------------------------------------------------------------------

def fingerprint(tag: str, names: Sequence[str], counts: Sequence[str], reference: Any,
                accept: Sequence[Accept] = (), slips: Sequence[Slip] = (), limit: Sequence[str] = (),
                exact_form: Any = None) -> dict:
    e, t = expected(tag, tuple(names), tuple(counts), reference, tuple(limit), tuple(accept), tuple(slips),
                    exact_form)
    s = e.setting
    ref_names = [n for n in names if e.uses(n)]
    beside = [n for n in names if e.uses_exact(n)]  # only where the question has an exact form that holds more
    return {"symbols": list(names), "counts": list(counts), "limit": list(limit),
            "at": [{k: str(v) for k, v in p.items()} for p in s.points], "anchor": s.anchor,
            "accept": [list(a) for a in s.accepts], "hints": list(s.hints), "branches": s.branches,
            "small": [{k: str(v) for k, v in p.items()} for p in s.small],
            "uses": sorted(tg.digest(tag, "uses", n) for n in ref_names),
            "targets": {key: tg.printed(tag, key, ivs) for key, ivs in t.items()},
            **({"exact_uses": sorted(tg.digest(tag, "exact_uses", n) for n in beside)} if beside else {}),
            **({"counted": True} if s.counted else {})}


def make_print(q: Formula) -> dict:
    return fingerprint(q.qid, q.names, q.counts.split(), q.reference, q.accept, q.slips, q.limit.split(),
                       q.exact_form)


def from_print(fp: dict, tag: str) -> Expected:
    from fractions import Fraction

    points = tuple({k: Fraction(v) for k, v in pt.items()} for pt in fp["at"])
    small = tuple({k: Fraction(v) for k, v in pt.items()} for pt in fp.get("small", ()))
    setting = Setting(tuple(fp["symbols"]), tuple(fp["counts"]), tuple(fp.get("limit", ())), points,
                      fp["anchor"], tuple((c, m) for c, m in fp["accept"]), tuple(fp["hints"]), fp["branches"], small,
                      "full" in fp["targets"], bool(fp.get("counted")))
    uses, beside = frozenset(fp["uses"]), frozenset(fp.get("exact_uses", ()))
    return Expected(setting, tg.Printed(tag, fp["targets"]), lambda n: tg.digest(tag, "uses", n) in uses,
                    lambda n: tg.digest(tag, "exact_uses", n) in beside)


def selfcheck(fp: dict, tag: str, answer: Any) -> Verdict:
    names = tuple(fp["symbols"])
    p = read(answer, names)
    if isinstance(p, Invalid):
        return invalid(p, **context(names))
    e = from_print(fp, tag)
    v = diagnose(e, p)
    checked = [*e.setting.points, *(e.setting.small if p.approximate else ())]  # where its values were compared
    if v.score > 0 and eq.unexercised(p.expr, names, checked):
        # a branch of the answer's own is never the active one here: the grader tests it, the self-check cannot
        return Verdict(Status.INCORRECT, 0.0, "edge", phrase("edge:branch"))
    return v
