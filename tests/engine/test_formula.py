"""The safe formula parser: one table of hostile or mistyped answers per failure kind, then
round trips. ``parse_formula`` must never raise on what a student gives it (the properties on
generated input are in tests/badinput)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import sympy as sp

from autograder.formula import MAX_CHARS, Invalid, Parsed, parse_formula
from autograder.messages import phrase_invalid
from course.symbols import B, D, F, N, symbol

NAMES = ("B", "D", "F", "N")


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")

    __repr__ = __str__


class HostileStr(str):
    def strip(self, *args: object) -> str:
        raise RuntimeError("no")


class HostileFloat(float):
    def __repr__(self) -> str:
        raise RuntimeError("no")


INVALID = {
    "syntax": ["B +", "(B", "B)", "*B", "B D", ",", "if", "B**", "\x00", "(" * 300, "B +\n D"],
    "implicit_multiplication": ["2B", "2 B", "3.5D", "(B+D)F", "2(B+D)", "(B)(D)", "B(D+F)", "(B+D)(F)",
                                "sqrt(B)(D)", "2 (B)", "B*(D)(F)"],
    "caret_power": ["B^2", "2^10", "(B*D)^0.5", "B^D = F"],
    "unicode_operator": ["B×D", "B·D", "B−D", "B÷D"],
    "relation": ["B = D", "B == D", "B < D", "B >= 2*D", "2B = D", "B != D", "B =", sp.Eq(B, D), B < D, sp.true],
    "unknown_name": ["oo", "E", "zoo", "I", "S", "nan", "inf", "x", "Bd", "exec", "E**2", "2*pi*Q", "β*B"],
    "unknown_function": ["foo(B)", "__import__('os')", "eval('1')", "exec('1')", "getattr(B,'x')", "sin(B)",
                         "open('f')", "x(B)"],
    "function_without_call": ["max", "sqrt*B", "log"],
    "arity": ["Max()", "log(B,2,3)", "sqrt(B,D)", "exp()"],
    "forbidden": ["B.__class__", "B.__class__(1)", "B[0]", "lambda: B", "[x for x in (B,)]", "'B'", "b'B'",
                  "Max(B, key=1)", "B if D else F", "B and D", "not B", "(B, D)", "B % D", "B // D", "B @ D",
                  "(B:=1)", "1j", "True", "None", "...", "{B}", "{B: D}", "B in D", "f'{B}'", "B & D", "~B"],
    "too_large": ["9**9**9", "10**100", "2**65", "1" + "0" * 41, "1e41", "B**100", "B**(1/128)",
                  "((10**30)**2)**2", "99**64", "(B**64)**64", "(B**(1/64))**(1/64)", "floor(exp(exp(100)))",
                  "ceiling(exp(10**40))", 10**5000, "exp(exp(exp(40)))*B", "2*N*B + exp(-exp(1e30))",
                  "N/exp(exp(1e30))", "exp(93)",
                  "exp(-93)*B"],
    "too_long": ["B+" * 1001 + "B", "+".join(["B"] * 250), "1" * (MAX_CHARS + 1), "(" * 2001],
    "not_finite": ["1/0", "0**-1", "1e999", "-1e999", "log(0)", "B/(D-D)", "log(B,1)", sp.oo, -sp.oo, sp.zoo,
                   sp.nan],
    "complex": ["sqrt(-B)", "(-1)**0.5", "sqrt(-1)*B", sp.I * B, sp.sqrt(-B)],
    "empty": ["", "   ", "\n\t", None, Ellipsis],
    "wrong_type": [[B], {"a": 1}, True, False, Unprintable(), b"B", 1j, {B}, np.array([1.0, 2.0]),
                   # a forged record marker carries no diagnosis, nor any reason a record never writes
                   {"invalid": "ratio:0", "detail": ""}, {"invalid": "ratio", "detail": "2"},
                   {"invalid": "partly", "detail": ""}, {"invalid": 3, "detail": ""}],
}
# Small, but nested so deep that sympy would take minutes to build them: refused before building.
INVALID["too_long"] = [*INVALID["too_long"], "(B+" * 12 + "B" + ")**-2" * 12, "1/(B+" * 30 + "B" + ")" * 30,
                       "2**(2**B)", "B**B**B**2", "B**(D**F)"]  # one symbolic exponent, never a tower of them
CASES = [pytest.param(code, answer, id=f"{code}-{i}") for code, answers in INVALID.items()
         for i, answer in enumerate(answers)]


@pytest.mark.parametrize(("code", "answer"), CASES)
def test_invalid(code, answer):
    got = parse_formula(answer, NAMES)
    assert isinstance(got, Invalid), f"{answer!r} parsed as {got}"
    assert got.code == code, f"{answer!r}: {got}"
    sentence = phrase_invalid(got, names=", ".join(NAMES), expected="a formula").split("\n")[0]
    assert sentence and "{" not in sentence  # the lines below echo the answer, braces and all


@pytest.mark.parametrize(("answer", "detail"), [("oo", "oo"), ("E**2", "E"), ("2*pi*Q", "Q"), ("foo(B)", "foo"),
                                                ("__import__('os')", "__import__"), ("B^2", "^"),
                                                ("2(B+D)", "2("), ("(B)(D)", ")("), ("2B", "2B")])
def test_invalid_names_the_fault(answer, detail):
    got = parse_formula(answer, NAMES)
    assert isinstance(got, Invalid) and got.detail == detail


@pytest.mark.parametrize(("answer", "offset"), [("B + oo", 4), ("B^2", 1), ("B*(D)(F)", 4), ("2*B + D.real", 6),
                                                ("Max('β', key=1)", 9)])
def test_invalid_points_at_the_fault(answer, offset):
    """Offsets are characters (ast counts UTF-8 bytes), so the caret lands under the fault."""
    got = parse_formula(answer, NAMES)
    assert isinstance(got, Invalid) and got.offset == offset, got


@pytest.mark.parametrize(("answer", "fix"), [("2(B+D)", "'2*('"), ("(B)(D)", "')*('"), ("2B", "'2*B'")])
def test_implicit_multiplication_suggests_the_fix(answer, fix):
    got = parse_formula(answer, NAMES)
    assert fix in phrase_invalid(got, names="B, D", expected="a formula")


@pytest.mark.parametrize(("answer", "expected"), [(HostileStr("2*B"), 2 * B), (HostileFloat(0.5), sp.Rational(1, 2))],
                         ids=["str", "float"])
def test_hostile_subclasses_are_read_by_value(answer, expected):
    got = parse_formula(answer, NAMES)
    assert isinstance(got, Parsed) and got.expr == expected


def test_undeclared_course_symbol_is_unknown():
    assert parse_formula("B*D", ("B",)) == Invalid("unknown_name", "D", 2, "B*D")


def test_deep_nesting_is_refused_at_once_and_the_course_depth_still_builds():
    start = time.perf_counter()
    got = parse_formula("(B+" * 8 + "B" + ")**-2" * 8, NAMES)  # minutes of sympy if it were built
    assert isinstance(got, Invalid) and got.code == "too_long" and "nested" in got.detail
    assert time.perf_counter() - start < 1.0
    assert isinstance(parse_formula("(B+" * 6 + "B" + ")**-2" * 6, NAMES), Parsed)


def test_answers_parse_outside_the_main_thread():
    results = []
    worker = threading.Thread(target=lambda: results.append(parse_formula("2*B*D/(N-1)", NAMES)))
    worker.start()
    worker.join()
    assert results == [Parsed(2 * B * D / (N - 1), "2*B*D/(N - 1)")]


# --- what parses, and to what ---------------------------------------------------------------------

PARSES = [
    ("2*B*D*F", 2 * B * D * F),
    ("B**D", B**D),  # exponents may hold symbols: ((Z-1)/Z)**K is a course answer
    ("2**B", 2**B),
    ("B**(D/F)", B ** (D / F)),
    ("B**pi", B**sp.pi),
    ("((N-1)/N)**D", ((N - 1) / N) ** D),
    ("B*D/(N-1)", B * D / (N - 1)),
    (" 2 * B ", 2 * B),
    ("max(B, D)", sp.Max(B, D)),
    ("Min(B, D, F)", sp.Min(B, D, F)),
    ("B**0.5", sp.sqrt(B)),
    ("B**-1", 1 / B),
    ("log2(B)", sp.log(B, 2)),
    ("log10(B)", sp.log(B, 10)),
    ("log(B, 2)", sp.log(B) / sp.log(2)),
    ("abs(B-D)", sp.Abs(B - D)),
    ("ceil(B/D)", sp.ceiling(B / D)),
    ("floor(B/D)", sp.floor(B / D)),
    ("-B+2*D", 2 * D - B),
    ("+B", B),
    ("1.5*B", sp.Rational(3, 2) * B),
    ("pi*B**2", sp.pi * B**2),
    ("exp(1)", sp.E),
    ("2**64", sp.Integer(2) ** 64),
    ("floor(10**40/3)", sp.Integer(10**40) // 3),
    (np.float64(2.5), sp.Rational(5, 2)),  # numpy 2 prints np.float64(2.5): no text of that must be parsed
    (np.array(3.0), sp.Integer(3)),
    (7, sp.Integer(7)),
]


@pytest.mark.parametrize(("answer", "expected"), PARSES, ids=[repr(a) for a, _ in PARSES])
def test_parses_to(answer, expected):
    got = parse_formula(answer, NAMES)
    assert isinstance(got, Parsed), got
    assert sp.simplify(got.expr - expected) == 0, got


SYMPY_ANSWERS = [2 * B * D * F, sp.Max(B, D) / N, sp.sqrt(B * D), B ** sp.Rational(3, 2), sp.log(B, 2),
                 sp.ceiling(B / D), sp.Rational(1, 3) * B, sp.pi * B, sp.E * B, B / (N - 1) + F, sp.Min(B, D) ** 2,
                 sp.Integer(2) ** 100 / 3**40, B**-64]


@pytest.mark.parametrize("expr", SYMPY_ANSWERS, ids=str)
def test_sympy_answer_round_trips(expr):
    got = parse_formula(expr, NAMES)
    assert isinstance(got, Parsed), got
    assert got.expr == expr
    again = parse_formula(got.text, NAMES)
    assert isinstance(again, Parsed) and again.expr == expr


EXACT = [("0.1", sp.Rational(1, 10)), ("1.97e14", sp.Integer(197 * 10**12)),
         ("1/1.97e14", sp.Rational(1, 197 * 10**12)), ("2.5e-3", sp.Rational(1, 400)),
         ("0.3*B", sp.Rational(3, 10) * B), (0.1, sp.Rational(1, 10)),
         (1.97e14, sp.Integer(197 * 10**12))]


@pytest.mark.parametrize(("text", "exact"), EXACT)
def test_floats_become_exact_rationals(text, exact):
    got = parse_formula(text, NAMES)
    assert isinstance(got, Parsed) and got.expr == exact
    assert not got.expr.atoms(sp.Float)


def test_declared_names_are_the_course_symbols_even_where_sympy_has_a_meaning():
    names = ("N", "E", "I", "S", "B")
    got = parse_formula("N*E*I*S*B", names)
    assert isinstance(got, Parsed)
    assert got.expr.free_symbols == {symbol(n) for n in names}
    assert all(s.is_positive and s.assumptions0.get("positive") for s in got.expr.free_symbols)
    e = parse_formula("E", names).expr
    assert e is not sp.E and e == symbol("E") and e != sp.E
    assert parse_formula("I**2", names).expr == symbol("I") ** 2  # not -1
    assert parse_formula("sqrt(N**2)", names).expr == symbol("N")  # positive: no Abs


@pytest.mark.parametrize("answer", [sp.E * symbol("E"), "exp(1)*E", sp.exp(1)])
def test_exp1_is_not_read_back_as_a_declared_e(answer):
    got = parse_formula(answer, ("E",))
    again = parse_formula(got.text, ("E",))
    assert isinstance(again, Parsed) and again.expr == got.expr
    assert got.expr.has(sp.E)


def test_imaginary_unit_is_complex_even_where_i_is_declared():
    got = parse_formula(sp.I * B, ("B", "I"))
    assert isinstance(got, Invalid) and got.code == "complex"


def test_unassumed_sympy_symbols_map_to_the_positive_ones():
    got = parse_formula(sp.Symbol("B") * sp.Symbol("D"), NAMES)
    assert isinstance(got, Parsed) and got.expr == B * D


# --- a constant slightly off: the form is right, the coefficient is not ------------------------------

def _both_judges(reference: str, answer: object, names: tuple[str, ...], counts: tuple[str, ...] = ()):
    """The grader's verdict and the self-check's (from its data, through JSON as it ships) on one answer."""
    import json

    from autograder.kinds import formula

    tag = "ch99-t1-formula"
    graded = formula.check(tag, reference, names, counts, answer)
    fp = json.loads(json.dumps(formula.fingerprint(tag, names, counts, reference)))
    return graded, formula.selfcheck(fp, tag, answer)


NEARLY_A_MULTIPLE = [
    ("88310022144*T", "8.8e10*T", ("T",)),  # two figures of the coefficient: exact numbers, 0.35% low
    ("62540218368*T", "62277025792*T", ("T",)),  # a contribution left out of the coefficient: 0.4% low
    ("301*B*D + 301*D*F", "300*B*D + 300*D*F", NAMES),  # one constant, several terms
    ("2*B*D*F/(N - 1)", "1999*B*D*F/(1000*(N - 1))", NAMES),
]


@pytest.mark.parametrize(("reference", "answer", "names"), NEARLY_A_MULTIPLE)
def test_a_constant_slightly_off_is_not_called_lower_terms(reference, answer, names):
    """Within 3 figures of a multiple of the reference but not right: both judges say the form is right and the
    constant slightly off, never "lower-order terms" (a monomial has none), and neither prints the value."""
    from autograder.messages import phrase

    for v in _both_judges(reference, answer, names):
        assert not v.ok and v.diagnosis == "constant_close", v
        assert v.message == phrase("constant_close") and "lower-order" not in v.message
        assert "3 significant figures" in v.message and "{" not in v.message
        assert not any(ch.isdigit() and ch != "3" for ch in v.message), v.message


TRUE_LOWER_TERMS = [
    ("2*N", "2*N - 1", ("N",), ("N",)),
    ("3*D*F + D", "3*D*F", NAMES, ()),
    ("3*D*F + D", "3*D*F*1.001", NAMES, ()),
    ("B**2 + B", "B**2", NAMES, ()),
]


@pytest.mark.parametrize(("reference", "answer", "names", "counts"), TRUE_LOWER_TERMS)
def test_a_true_lower_order_difference_stays_lower_terms(reference, answer, names, counts):
    for v in _both_judges(reference, answer, names, counts):
        assert v.diagnosis == "lower_terms", v


@pytest.mark.parametrize(("answer", "fix"), [
    ("2BDF", "2*B*D*F"), ("6NPM", "6*N*P*M"), ("6*NPM", "6*N*P*M"), ("BDF", "B*D*F"), ("2BDF/16", "2*B*D*F/16"),
    ("2BTDF/NC", "2*B*T*D*F/(N*C)"), ("2NP", "2*N*P"), ("2M_XBD", "2*M_X*B*D"),
])
def test_symbols_written_together_are_told_to_be_multiplied(answer, fix):
    """How a product is written on paper: "2BDF" read as 2 and a unit BDF was told "drop 'BDF'", the whole formula
    but its 2, and "6*NPM" that NPM is no symbol. Letters that are the question's symbols, glued, are a product."""
    from autograder.kinds.formula import read

    got = read(answer, ["B", "D", "F", "N", "P", "M", "T", "C", "M_X", "G"])
    assert isinstance(got, Invalid) and got.code == "glued_symbols", got
    assert f"as '{fix}'" in phrase_invalid(got), phrase_invalid(got)


@pytest.mark.parametrize("answer", ["16 GB", "2 B/s", "4 bytes", "2 FLOPs", "8 FLOP"])
def test_a_unit_after_a_formula_is_still_a_unit(answer):
    from autograder.kinds.formula import read

    got = read(answer, ["B", "D", "F", "G", "O", "P", "L", "s"])
    assert isinstance(got, Invalid) and got.code == "unit_in_formula", got


def test_an_answer_too_long_says_its_length_and_the_limit():
    """"too long to check (1900003)" was a bare number."""
    from autograder.messages import phrase
    from autograder.numbers import parse_number

    for got, limit in ((parse_formula("B+" * 1500 + "B", NAMES), "2,000"), (parse_number("1" * 300, "s"), "200")):
        assert isinstance(got, Invalid) and got.code == "too_long", got
        assert f"characters, where {limit} at most are read" in phrase("too_long", detail=got.detail), got.detail
