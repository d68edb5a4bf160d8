"""Rewrites of a reference are accepted and perturbations of it are rejected, with the diagnosis
that names the slip: on sympy expressions and on the text a student types (``kinds.formula.check``)."""

from __future__ import annotations

from fractions import Fraction

import sympy as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autograder import equivalence as eq
from autograder.formula import Invalid, parse_formula, to_text
from autograder.kinds import formula
from autograder.verdict import Status
from course.symbols import B, N, symbol
from tests.badinput.common import timed
from tests.strategies import COURSE_NAMES, positive_expressions, symbol_names

COUNTS = eq.Domain(COURSE_NAMES, frozenset({"N"}))
FACTORS = [Fraction(2), Fraction(1, 2), Fraction(8), Fraction(1, 4), Fraction(1000), Fraction(3, 2), Fraction(-1)]
REWRITERS = {"expand": sp.expand, "factor": sp.factor, "cancel": sp.cancel, "together": sp.together,
             "powsimp": sp.powsimp, "scaled": lambda e: sp.Mul(3, e, evaluate=False) / 3}



@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(sorted(REWRITERS)))
def test_generated_rewrites_are_equal(data, how):
    names = data.draw(symbol_names())
    expr = data.draw(positive_expressions(names, max_leaves=5))
    rewritten = REWRITERS[how](expr)
    got = formula.check("ch99-t0-rewrite", expr, names, (), rewritten)
    assert got.ok, (expr, rewritten, got)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(FACTORS[:5]))
def test_generated_constant_factor_is_a_ratio(data, k):
    names = data.draw(symbol_names())
    expr = data.draw(positive_expressions(names, max_leaves=5))
    got = formula.check("ch99-t0-factor", expr, names, (), sp.Rational(k.numerator, k.denominator) * expr)
    assert (got.ok, got.diagnosis) == (False, f"ratio:{k}"), expr


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32))
def test_counts_are_integers_from_two(seed):
    points = COUNTS.points(20, seed)
    assert all(p["N"].denominator == 1 and p["N"] >= 2 for p in points)
    assert all(p["B"] > 0 for p in points)
    at = eq.evaluator(B / (N - 1) + 1 / (N - 1) ** 2, COUNTS.names)
    assert all(at(p) is not None and at(p) > 0 for p in points)


# --- the same, on the text a student types ----------------------------------------------------------

def commuted(expr: sp.Expr, draw) -> str:
    """Text for ``expr`` with the terms of every sum, the factors of every product and the arguments
    of every max and min in a drawn order: what a student writes who orders them differently."""
    if isinstance(expr, sp.Add | sp.Mul | sp.Max | sp.Min):
        parts = [commuted(a, draw) for a in draw(st.permutations(expr.args))]
        if isinstance(expr, sp.Add):
            return "(" + " + ".join(parts) + ")"
        if isinstance(expr, sp.Mul):
            return "(" + "*".join(parts) + ")"
        return f"{type(expr).__name__}({', '.join(parts)})"
    if isinstance(expr, sp.Pow):
        return f"({commuted(expr.base, draw)})**({to_text(expr.exp)})"
    return f"({to_text(expr)})"


def readable(text: str, names: tuple[str, ...]) -> str:
    """``text`` if the parser reads it; a rewrite can outgrow the parser's caps (an expanded 12**27)."""
    got = parse_formula(text, names)
    if isinstance(got, Invalid):
        assert got.code in ("too_long", "too_large"), (text, got)
        assume(False)
    return text


def verdict(expr: sp.Expr, names: tuple[str, ...], answer: str):
    return timed(formula.check, "ch99-t0-text", expr, names, (), answer)


TEXT_REWRITES = {
    "expanded": lambda e, s: to_text(sp.expand(e)),
    "factored": lambda e, s: to_text(sp.factor(e)),
    "cancelled": lambda e, s: to_text(sp.cancel(e)),
    "times and over a symbol": lambda e, s: f"{s}*({to_text(e)})/{s}",
    "plus and minus a symbol": lambda e, s: f"({to_text(e)}) + {s} - {s}",
    "halved twice": lambda e, s: f"2*(({to_text(e)})/2)",
}


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(sorted(TEXT_REWRITES)))
def test_rewritten_text_is_correct(data, how):
    names = data.draw(symbol_names())
    expr = data.draw(positive_expressions(names, max_leaves=5))
    s = data.draw(st.sampled_from(names))
    answer = readable(TEXT_REWRITES[how](expr, s), names)
    v = verdict(expr, names, answer)
    assert (v.status, v.score) == (Status.CORRECT, 1.0), (expr, answer, v)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_reordered_text_is_correct(data):
    names = data.draw(symbol_names())
    expr = data.draw(positive_expressions(names, max_leaves=6))
    answer = readable(commuted(expr, data.draw), names)
    v = verdict(expr, names, answer)
    assert (v.status, v.score) == (Status.CORRECT, 1.0), (expr, answer, v)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(FACTORS))
def test_text_off_by_a_constant_factor_is_a_ratio(data, k):
    names = data.draw(symbol_names())
    expr = data.draw(positive_expressions(names, max_leaves=5))
    answer = readable(f"({k})*{commuted(expr, data.draw)}", names)
    v = verdict(expr, names, answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, f"ratio:{k}"), (expr, answer, v)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(["({t})*{s}", "({t})/{s}", "({t}) + {s}", "{s}**2*({t})"]))
def test_text_with_an_added_symbol_names_it(data, template):
    used = data.draw(st.sets(st.sampled_from(COURSE_NAMES), min_size=1, max_size=len(COURSE_NAMES) - 1))
    expr = data.draw(positive_expressions(tuple(sorted(used)), max_leaves=5))
    s = data.draw(st.sampled_from(sorted(set(COURSE_NAMES) - eq.free_names(expr))))
    answer = readable(template.format(t=to_text(expr), s=s), COURSE_NAMES)
    v = verdict(expr, COURSE_NAMES, answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, f"extra_symbol:{s}"), (expr, answer, v)


EXPONENTS = [-3, -2, -1, sp.Rational(-1, 2), sp.Rational(1, 2), 1, sp.Rational(3, 2), 2, 3]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_text_with_a_changed_exponent_is_wrong(data):
    """c * B**a * D**b ...: one exponent changed (the symbol kept) is no factor, adds or drops no
    symbol and changes the leading term: its ratio to the reference changes with that symbol alone
    ("ratio_symbols"), or, with one symbol only, it is not equivalent."""
    names = data.draw(symbol_names())
    powers = {n: data.draw(st.sampled_from(EXPONENTS)) for n in names}
    changed = data.draw(st.sampled_from(names))
    new = data.draw(st.sampled_from([e for e in EXPONENTS if e != powers[changed]]))
    c = data.draw(st.sampled_from([1, 2, sp.Rational(1, 2), 6]))
    reference = c * sp.Mul(*(symbol(n) ** e for n, e in powers.items()))
    answer = "*".join([f"({c})"] + [f"{n}**({new if n == changed else e})" for n, e in powers.items()])
    v = verdict(reference, names, answer)
    assert (v.status, v.score) == (Status.INCORRECT, 0.0), (reference, answer, v)
    assert v.diagnosis == (f"ratio_symbols:{changed}" if len(names) > 1 else "not_equivalent"), (reference, answer, v)
