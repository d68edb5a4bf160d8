"""Hypothesis strategies shared by the engine tests.

``positive_expressions`` builds formulas that are positive wherever their symbols are: sums,
products, quotients, small integer powers, square roots, max and min of positive parts, with
positive constants. Those are the formulas the course asks for (sizes, times, rates), and on
them a rewrite must never change the verdict.
"""

from __future__ import annotations

import sympy as sp
from hypothesis import strategies as st

from course.symbols import symbol

COURSE_NAMES = ("B", "D", "F", "N")

# Characters and fragments a formula is made of, plus the ones that break parsers.
_TOKENS = (list("BDFN0123456789+-*/(). eE,_") + ["**", "^", "=", "<", "[0]", ".__class__", "'", '"', "\\",
           "sqrt(", "Max(", "min(", "log(", "exp(", "floor(", "lambda", "__import__", "1e999", "9**9**9",
           "×", "−", "\x00", "\n", "\t", "pi", "oo", "zoo", "I", "E", "S"])


def symbol_names() -> st.SearchStrategy[tuple[str, ...]]:
    """A non-empty subset of the course symbols, in a fixed order."""
    return st.sets(st.sampled_from(COURSE_NAMES), min_size=1).map(lambda s: tuple(sorted(s)))


def positive_constants() -> st.SearchStrategy[sp.Expr]:
    integers = st.integers(1, 12).map(sp.Integer)
    fractions = st.tuples(st.integers(1, 12), st.integers(1, 12)).map(lambda pq: sp.Rational(*pq))
    return st.one_of(integers, fractions)


def positive_expressions(names: tuple[str, ...] = COURSE_NAMES, max_leaves: int = 6) -> st.SearchStrategy[sp.Expr]:
    """Random sympy expressions over the course's positive symbols ``names``, positive on their domain."""
    leaves = st.one_of(st.sampled_from([symbol(n) for n in names]), positive_constants())

    def extend(inner: st.SearchStrategy[sp.Expr]) -> st.SearchStrategy[sp.Expr]:
        pair = st.tuples(inner, inner)
        return st.one_of(
            pair.map(lambda ab: ab[0] + ab[1]),
            pair.map(lambda ab: ab[0] * ab[1]),
            pair.map(lambda ab: ab[0] / ab[1]),
            st.tuples(inner, st.sampled_from([-2, -1, 2, 3])).map(lambda ak: ak[0] ** ak[1]),
            inner.map(sp.sqrt),
            pair.map(lambda ab: sp.Max(*ab)),
            pair.map(lambda ab: sp.Min(*ab)),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def formula_text() -> st.SearchStrategy[str]:
    """Arbitrary text, mostly made of formula-like characters and fragments."""
    tokens = st.lists(st.sampled_from(_TOKENS), max_size=30).map("".join)
    return st.one_of(tokens, tokens, st.text(max_size=60))
