"""Hypothesis strategies shared by the engine tests.

``positive_expressions`` builds formulas that are positive wherever their symbols are: sums,
products, quotients, small integer powers, square roots, max and min of positive parts, with
positive constants. Those are the formulas the course asks for (sizes, times, rates), and on
them a rewrite must never change the verdict.

``hostile_objects``, ``answer_text`` and ``near_limit_text`` feed the bad-input properties
(tests/badinput): any value a notebook variable may hold, any text a student may type, and text
at and just past the parser's caps.
"""

from __future__ import annotations

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from autograder.formula import MAX_ABS_EXPONENT, MAX_CHARS, MAX_NODES
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


# --- bad input: answers of any type, and text at the edges of what the parsers accept -------------

class HostileStr(str):
    """Text whose methods raise: the engine must read it by value, never through its methods."""

    def _no(self, *args: object, **kwargs: object) -> str:
        raise RuntimeError("no")

    strip = lower = upper = split = replace = encode = __str__ = __format__ = __getitem__ = _no

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(f"HostileStr({str.__repr__(self)})")  # type: ignore[attr-defined]


class HostileFloat(float):
    def _no(self, *args: object, **kwargs: object) -> str:
        raise RuntimeError("no")

    __repr__ = __str__ = __format__ = _no

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(f"HostileFloat({float.__repr__(self)})")  # type: ignore[attr-defined]


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")

    __repr__ = __str__

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text("Unprintable()")  # type: ignore[attr-defined]


class PosingAsStr:
    """Claims to be a str to isinstance() (through __class__) and is not one."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text("PosingAsStr()")  # type: ignore[attr-defined]


class NoCompare:
    """Comparing, hashing or testing it raises."""

    def _no(self, *args: object) -> bool:
        raise RuntimeError("no")

    __eq__ = __ne__ = __lt__ = __bool__ = __hash__ = __len__ = _no  # type: ignore[assignment]

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text("NoCompare()")  # type: ignore[attr-defined]


# Codes a record may carry, codes it never does, and a few that are not codes at all.
_MARKER_CODES = ["empty", "wrong_type", "too_large", "relation", "not_finite", "syntax", "ratio", "ratio:2",
                 "partly", "correct", "unknown_option", "x", "", "Wrong", "{names}"]


def record_markers() -> st.SearchStrategy[dict]:
    """Dicts shaped like the marker a record writes for an answer it could not record, genuine or forged."""
    code = st.one_of(st.sampled_from(_MARKER_CODES), st.text(max_size=12), st.integers(), st.none())
    detail = st.one_of(st.text(max_size=40), st.integers(), st.none(), st.builds(Unprintable))
    return st.fixed_dictionaries({"invalid": code, "detail": detail})


def hostile_objects() -> st.SearchStrategy[object]:
    """Answers that are not plain text: every type a notebook variable may hold, some built to break code."""
    sympy_things = st.one_of(
        positive_expressions(COURSE_NAMES, max_leaves=4),
        st.sampled_from([sp.oo, -sp.oo, sp.zoo, sp.nan, sp.I * symbol("B"), sp.Eq(symbol("B"), 1), sp.true,
                         sp.Symbol("x"), sp.Symbol("B"), sp.Float(2.5), sp.Interval(0, 1), sp.E, sp.pi,
                         sp.Integer(10) ** 50, sp.sqrt(-symbol("B")), sp.Matrix([1, 2])]))
    numpy_things = st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).map(np.float64),
        st.integers(-(2**63), 2**63 - 1).map(np.int64),
        st.floats(width=32).map(lambda x: np.array(x, dtype=np.float32)),
        st.lists(st.floats(), max_size=3).map(np.array))
    hostile = st.one_of(st.text(max_size=20).map(HostileStr), st.floats().map(HostileFloat),
                        st.builds(Unprintable), st.builds(PosingAsStr), st.builds(NoCompare))
    plain = st.one_of(
        st.none(), st.just(Ellipsis), st.just(NotImplemented), st.booleans(),
        st.integers(), st.integers(-(10**400), 10**400), st.floats(allow_nan=True, allow_infinity=True),
        st.complex_numbers(), st.binary(max_size=20), st.fractions(), st.decimals(),
        st.lists(st.integers(), max_size=3), st.tuples(st.floats()), st.dictionaries(st.text(max_size=3),
                                                                                    st.integers(), max_size=2),
        st.sampled_from([int, str, object, len, lambda x: x, range(3), frozenset({1}), ValueError("x")]))
    return st.one_of(plain, st.from_type(object), record_markers(), sympy_things, numpy_things, hostile)


_UNIT_WORDS = ["s", "ms", "us", "µs", "ns", "min", "h", "B", "kB", "GB", "GiB", "TB/s", "FLOPs", "TFLOP/s",
               "FLOPS", "FLOPs/byte", "parsecs", "MS", "gb", "", " ", "ms ms"]


def number_text() -> st.SearchStrategy[str]:
    """Text that looks like a number, with or without a unit, valid or nearly so."""
    mantissa = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                         st.integers(-(10**30), 10**30).map(str),
                         st.sampled_from(["1e308", "1e309", "-1e999", "1e-400", "5e-324", ".5", "5.", "1.2.3",
                                          "--1", "+1", "1e", "0x10", "1_000", "1,5", "١٢٣", "nan", "inf"]))
    space = st.sampled_from(["", " ", "  ", "\t", "\u00a0"])
    return st.builds(lambda m, a, u, b: m + a + u + b, mantissa, space, st.sampled_from(_UNIT_WORDS), space)


def answer_text() -> st.SearchStrategy[str]:
    """Any text a student might type as an answer, to any kind of question."""
    words = st.sampled_from(["compute", "memory", "comms", " Memory ", "MEMORY", "", "none", "None", "..."])
    return st.one_of(formula_text(), number_text(), words, st.text(max_size=80))


def _nested(opening: str, middle: str, closing: str) -> st.SearchStrategy[str]:
    return st.integers(1, 70).map(lambda k: opening * k + middle + closing * k)


def near_limit_text() -> st.SearchStrategy[str]:
    """Formula text at and just past the parser's caps: length, node count, nesting, literal size, exponents."""
    term = st.sampled_from(["B", "B*D", "2*B**2", "sqrt(B)", "1/B", "max(B, D)", "(B+D)**2", "exp(B)"])
    sums = st.builds(lambda t, n: "+".join([t] * n), term, st.integers(1, MAX_CHARS // 2 + 2))
    padded = st.integers(MAX_CHARS - 3, MAX_CHARS + 3).map(lambda n: ("B+" * n)[:n].rstrip("+") or "B")
    spaced = st.integers(MAX_CHARS - 3, MAX_CHARS + 3).map(lambda n: "B" + " " * (n - 1))
    nodes = st.integers(MAX_NODES // 3 - 5, MAX_NODES // 3 + 5).map(lambda n: "+".join(["B"] * n))
    nested = st.one_of(_nested("(", "B", ")"), _nested("1/(B+", "B", ")"), _nested("(B+", "B", ")**2"),
                       _nested("(B+", "B", ")**-2"), _nested("(B+D*", "B", ")**-3"), _nested("sqrt(B+", "B", ")"),
                       _nested("log(B+", "B", ")"), _nested("exp(", "B", ")"), _nested("exp(-", "B", ")"),
                       _nested("floor(B/(D+", "B", "))"), _nested("Max(B,1/(D+", "B", "))"), _nested("-", "B", ""),
                       _nested("(B+", "1", ")**64"), _nested("B**", "2", ""))
    digits = st.integers(1, 60).map(lambda k: "1" + "0" * k)
    bases = st.sampled_from(["B", "2", "(B+D)", "(B*D)", "99", "1e40", "B**64"])
    powers = st.one_of(st.integers(MAX_ABS_EXPONENT - 3, MAX_ABS_EXPONENT + 3).map(str),
                       st.integers(1, 200).map(lambda q: f"(1/{q})"), st.just("-64"))
    exponents = st.builds(lambda b, k: f"{b}**{k}", bases, powers)
    arguments = st.integers(0, 20).map(lambda n: "Max(" + ", ".join(["B", "D"] * (n // 2) + ["F"] * (n % 2)) + ")")
    return st.one_of(sums, padded, spaced, nodes, digits, exponents, arguments, nested, nested, nested)
