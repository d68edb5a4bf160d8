"""Safe parsing of formula answers: student text or a sympy object, never ``eval``.

``sympify``, ``parse_expr`` and ``S()`` execute arbitrary Python, and ``9**9**9`` hangs even with no
names in it, so student text only ever goes through ``ast.parse`` and an allow-list of node types;
the sympy expression is then built by hand from the tree. Sizes are capped before anything is
computed. A declared name always maps to the course's positive symbol of that name, never to
sympy's object of the same name (``N``, ``E``, ``I`` and ``S`` are all taken in sympy).

``parse_formula`` never raises on student input: it returns ``Parsed`` or ``Invalid``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache

import sympy as sp
from sympy.printing.str import StrPrinter

from .record import plain_number
from .symbols import symbol

MAX_CHARS = 2000
MAX_NODES = 400
MAX_ABS_LITERAL = sp.Integer(10) ** 40
MAX_ABS_EXPONENT = 64
MAX_EXPONENT_DENOMINATOR = 64
MAX_ABS_EXP_ARGUMENT = float(sp.log(MAX_ABS_LITERAL))  # 92.1: exp of more is more than any literal

# Functions a formula may call. Both spellings of max/min are accepted because students write
# Python's and sympy prints its own.
FUNCTIONS = {
    "sqrt": (sp.sqrt, 1, 1),
    "log": (sp.log, 1, 2),
    "log2": (lambda x: sp.log(x, 2), 1, 1),
    "log10": (lambda x: sp.log(x, 10), 1, 1),
    "exp": (lambda x: _exp(x), 1, 1),
    "Max": (sp.Max, 1, 16),
    "max": (sp.Max, 1, 16),
    "Min": (sp.Min, 1, 16),
    "min": (sp.Min, 1, 16),
    "Abs": (sp.Abs, 1, 1),
    "abs": (sp.Abs, 1, 1),
    "ceiling": (lambda x: _rounded(sp.ceiling, x), 1, 1),
    "ceil": (lambda x: _rounded(sp.ceiling, x), 1, 1),
    "floor": (lambda x: _rounded(sp.floor, x), 1, 1),
}
CONSTANTS = {"pi": sp.pi}

# The caps above bound what is built, not sympy's work while it builds: at every power and product
# it asks whether a sum is positive or finite, and the cost of those questions grows exponentially
# with nesting ("(B+" * 8 + "B" + ")**-2" * 8 takes minutes; 7 levels, under a second). Operations
# nested deeper than this are refused before anything is built; the course's answers need at most 8.
MAX_DEPTH = 12

# The allow-list. Attribute access (``x.__class__``), subscripts, comprehensions, lambdas,
# strings and keyword arguments are absent on purpose: they are how sandbox escapes start.
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call,
            ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)


@dataclass(frozen=True)
class Parsed:
    expr: sp.Expr
    text: str  # canonical text (sympy's printing), re-parsable by this module
    # The text has a rounded decimal in it (1.97e14, 0.333; see ``rounded``): its coefficients are
    # somebody's rounding, so it is compared to 3 significant figures. A formula in whole numbers,
    # fractions and simple decimals (2.0, 0.5) is exact.
    approximate: bool = False


@dataclass(frozen=True)
class Invalid:
    code: str  # "empty", "syntax", "unknown_name", "forbidden", "too_long", "too_large", "wrong_type", ...
    detail: str = ""  # the offending name, token or type
    offset: int | None = None  # 0-based character offset in the text, where known
    text: str = ""  # the text as the student gave it


# The reasons record.encode_scalar writes into an answer record when it cannot record an answer.
RECORD_CODES = frozenset({"empty", "wrong_type", "too_large", "relation", "not_finite"})


class _Printer(StrPrinter):
    """sympy's text, except for the constants it prints as bare names: E and I may be declared
    symbols, so exp(1) and the imaginary unit must not read back as them."""

    def _print_Exp1(self, expr: sp.Expr) -> str:
        return "exp(1)"

    def _print_ImaginaryUnit(self, expr: sp.Expr) -> str:
        return "sqrt(-1)"

    def _print_Infinity(self, expr: sp.Expr) -> str:
        return "(1/0)"

    _print_ComplexInfinity = _print_NaN = _print_Infinity

    def _print_NegativeInfinity(self, expr: sp.Expr) -> str:
        return "(-1/0)"


def to_text(expr: sp.Basic) -> str:
    """Text for a sympy expression that this module parses back to the same expression."""
    return _Printer().doprint(expr)


class _Reject(Exception):
    def __init__(self, code: str, detail: str = "", node: ast.AST | None = None, end: bool = False):
        super().__init__(code)
        self.code, self.detail = code, detail
        # ast offsets count UTF-8 bytes; parse_formula turns them into characters
        self.offset = getattr(node, "col_offset", None)
        if end:
            self.offset = getattr(node, "end_col_offset", None)  # just after it


def answer_to_text(answer: object) -> str | Invalid:
    """Turn what a student assigned into formula text, or say why it cannot be one."""
    try:
        return _to_text(answer)
    except Exception as e:  # a hostile subclass whose methods raise
        return Invalid("wrong_type", f"{type(answer).__name__} ({type(e).__name__})")


def _to_text(answer: object) -> str | Invalid:
    if answer is None or answer is Ellipsis or answer is NotImplemented:
        return Invalid("empty")
    if isinstance(answer, dict) and answer.keys() == {"invalid", "detail"}:  # see record.encode_scalar
        code = answer["invalid"]
        if not (type(code) is str and code in RECORD_CODES):  # a forged "ratio:2" or "partly" is no diagnosis
            return Invalid("wrong_type", "dict")
        return Invalid(code, str(answer["detail"])[:100])
    if isinstance(answer, bool):
        return Invalid("wrong_type", "bool")
    if isinstance(answer, str):
        return str.__str__(answer)  # a plain str, whatever a subclass overrides
    number = plain_number(answer)  # a number of any library: numpy, JAX, sympy, Fraction, Decimal
    if isinstance(number, float):  # not repr(): numpy 2 prints np.float64(2.5); nan and inf are no names
        return float.__repr__(number) if math.isfinite(number) else Invalid("not_finite")
    if isinstance(number, int | Fraction):
        if max(abs(number.numerator), number.denominator).bit_length() > 1000:  # far above any literal the
            return Invalid("too_large", "a number above 1e40")  # parser accepts; too long to print
        return int.__repr__(number.numerator) + ("" if number.denominator == 1 else f"/{number.denominator}")
    if isinstance(answer, sp.Basic):
        if isinstance(answer, sp.Rel) or not isinstance(answer, sp.Expr):  # equations, logic, sets
            return Invalid("relation")
        try:
            return to_text(answer)
        except Exception as e:  # a hostile subclass can make printing fail
            return Invalid("wrong_type", f"unprintable sympy object ({type(e).__name__})")
    return Invalid("wrong_type", type(answer).__name__)


def parse_formula(answer: object, names: Iterable[str]) -> Parsed | Invalid:
    """Parse a student's formula over the declared symbol ``names``."""
    text = answer_to_text(answer)
    if isinstance(text, Invalid):
        return text
    return _parse_text(text, frozenset(names))


@lru_cache(maxsize=2048)
def _parse_text(text: str, allowed: frozenset[str]) -> Parsed | Invalid:
    """``parse_formula`` of a plain str (``answer_to_text`` gives no other), kept: each judge reads the answer, and
    the references and slips it is held against, again, and sympy's building of a formula (a Max above all) is
    most of a verdict's cost. Both results are frozen."""
    if len(text) > MAX_CHARS:
        return Invalid("too_long", f"{len(text):,} characters, where {MAX_CHARS:,} at most are read", text=text[:80])
    stripped = text.strip()
    if not stripped:
        return Invalid("empty", text=text)
    hint = _spelling_hint(stripped, _TYPOS)
    if hint:
        return hint
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as e:
        offset = (e.offset - 1) if e.offset else None
        relation = _spelling_hint(stripped, _RELATIONS)  # B = 2*D; after parsing, so Max(B, key=1) is not one
        if relation:
            return relation
        implicit = re.search(r"(\d|\))\s*([A-Za-z_(])", stripped)
        if implicit:
            return Invalid("implicit_multiplication", implicit.group(0), implicit.start(), stripped)
        return Invalid("syntax", e.msg, offset, stripped)
    except (ValueError, RecursionError, MemoryError) as e:  # NUL bytes, absurd nesting
        return Invalid("syntax", type(e).__name__, None, stripped)
    try:
        if _depth(tree.body) > MAX_DEPTH:
            raise _Reject("too_long", f"operations nested more than {MAX_DEPTH} deep")
        for count, node in enumerate(ast.walk(tree), 1):
            if count > MAX_NODES:
                raise _Reject("too_long", f"more than {MAX_NODES} terms")
            if isinstance(node, ast.Compare):
                return _spelling_hint(stripped, _RELATIONS) or Invalid("forbidden", _describe(node), None, stripped)
            if not isinstance(node, _ALLOWED):
                raise _Reject("forbidden", _describe(node), node)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and _unknown(node.func.id, allowed):
                # named before its arguments are looked at: Piecewise((B, B > D), (D, True)) is a Piecewise,
                # whatever a tuple or a comparison inside it would be
                raise _Reject("unknown_function", node.func.id, node)
        expr = _build(tree.body, allowed)
        if expr.has(sp.zoo, sp.oo, -sp.oo, sp.nan):
            raise _Reject("not_finite")
        if expr.has(sp.I):
            raise _Reject("complex")
        _check_size(expr)
        # A whole number is read as the same number written as a decimal (243 as 243.0): whether a formula is
        # approximate depends on a literal's value, never on its spelling.
        approximate = any(isinstance(n, ast.Constant) and type(n.value) in (int, float) and rounded(n.value)
                          for n in ast.walk(tree))
        return Parsed(expr, to_text(expr), approximate)
    except _Reject as r:
        offset = None if r.offset is None else len(stripped.encode()[:r.offset].decode(errors="ignore"))
        if r.code == "implicit_multiplication":
            return _juncture(stripped, offset, r.detail)
        return Invalid(r.code, r.detail, offset, stripped)
    except (RecursionError, MemoryError, OverflowError, ZeroDivisionError, ValueError, TypeError) as e:
        return Invalid("too_large", type(e).__name__, None, stripped)


_TYPOS = (("^", "caret_power"), ("×", "unicode_operator"), ("·", "unicode_operator"),
          ("−", "unicode_operator"), ("÷", "unicode_operator"))
_RELATIONS = (("=", "relation"), ("<", "relation"), (">", "relation"))


def _spelling_hint(text: str, table: tuple[tuple[str, str], ...]) -> Invalid | None:
    for bad, code in table:
        if bad in text:
            return Invalid(code, bad, text.index(bad), text)
    return None


def _juncture(text: str, end: int | None, fallback: str) -> Invalid:
    """Where a product was written as a call: the character before the call's "(" and the "("."""
    start = text.find("(", end) if end is not None and "\n" not in text else -1  # ast offsets are per line
    k = start - 1
    while k > 0 and text[k].isspace():
        k -= 1
    if k < 0:
        return Invalid("implicit_multiplication", fallback, None, text)
    return Invalid("implicit_multiplication", text[k] + "(", k, text)


def _unknown(callee: str, allowed: frozenset[str]) -> bool:
    """Whether a called name is no function a formula may use, nor a symbol or a constant (which, called as in
    B(D+F), are a product written without its *)."""
    return callee not in FUNCTIONS and callee not in allowed and callee not in CONSTANTS


def _depth(node: ast.AST) -> int:
    """Operations (arithmetic and calls) nested inside each other, without recursion."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        n, above = stack.pop()
        here = above + isinstance(n, ast.BinOp | ast.UnaryOp | ast.Call)
        deepest = max(deepest, here)
        stack.extend((child, here) for child in ast.iter_child_nodes(n))
    return deepest


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return "attribute access (a dot after a name)"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "a string inside the formula"
    if isinstance(node, ast.Compare):
        return "a comparison"
    if isinstance(node, ast.Subscript):
        return "indexing with []"
    if isinstance(node, ast.keyword):
        return "a keyword argument"
    if isinstance(node, ast.BinOp | ast.operator):
        return f"the operator {type(node).__name__}"
    return type(node).__name__


def rounded(v: float | int) -> bool:
    """Whether a number in a formula may be somebody's rounding (1.97e14, 0.333, 3.14, 0.125), so that
    the formula is compared to 3 significant figures. A whole number is one where it reads as a rounding
    (``_rounded_whole``): 243 as 243.0 (the honest 3-figure rounding of 19700/81), 134000000 as 1.34e8. A decimal of
    at most two significant figures that is a whole number of quarters (2.0, 0.5, 1.5, 0.25, 0.0, 16.0, 1e9) is the
    simple number it reads as: nobody rounds to it, and a sympy expression holding 2.0 bytes per parameter is an
    exact count. Read as approximate, a formula would pass with a small term missing or too many."""
    if isinstance(v, int):
        return _rounded_whole(v)
    d = Decimal(repr(v)).normalize()
    if not d.is_finite() or d == 0:
        return not d.is_finite()
    digits, exponent = d.as_tuple().digits, d.as_tuple().exponent
    return len(digits) > 2 or (exponent < 0 and (4 * d) % 1 != 0)


def _rounded_whole(v: int) -> bool:
    """Whether a whole number in a formula reads as a rounding: 3 significant figures (243, 20500, 62500000000),
    or more that end in zeros (62540000000). A whole number of 1 or 2 figures (2, 12, 1000000: a count or a
    factor), one of many figures that does not end in a zero (62277025792, 1999: somebody's exact count) and a
    power of two (128, 4096: bytes and sizes) are exact.

    The price is the decimal spelling's: a formula holding an exact 768 or 86400 is compared to 3 figures, as one
    holding 768.0 always was, so a term under half a percent at every point goes unseen there. Digits alone cannot
    tell 243 (a rounding) from 768 (a count); every listed slip stays refused under this reading (the release
    judges each one), and a slip that only this reading let through would be refused at release."""
    n = abs(v)
    figures = str(n).rstrip("0")
    if len(figures) < 3 or n & (n - 1) == 0:
        return False
    return len(figures) == 3 or len(figures) < len(str(n))


def _literal(node: ast.Constant) -> sp.Expr:
    v = node.value
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Reject("forbidden", "a literal that is not a real number", node)
    if isinstance(v, int):
        if abs(v) > MAX_ABS_LITERAL:
            raise _Reject("too_large", "a number above 1e40", node)
        return sp.Integer(v)
    try:
        exact = Decimal(repr(v))  # repr is the shortest text that round-trips: 0.1 stays 1/10
    except InvalidOperation as e:
        raise _Reject("not_finite", "", node) from e
    if not exact.is_finite():
        raise _Reject("not_finite", "", node)
    if abs(exact) > Decimal(10) ** 40:
        raise _Reject("too_large", "a number above 1e40", node)
    return sp.Rational(str(exact))


def _build(node: ast.AST, allowed: frozenset[str]) -> sp.Expr:
    if isinstance(node, ast.Constant):
        return _literal(node)
    if isinstance(node, ast.Name):
        if node.id in allowed:
            return symbol(node.id)
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if node.id in FUNCTIONS:
            raise _Reject("function_without_call", node.id, node)
        raise _Reject("unknown_name", node.id, node)
    if isinstance(node, ast.UnaryOp):
        operand = _build(node.operand, allowed)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left = _build(node.left, allowed)
        right = _build(node.right, allowed)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            if right == 0:
                raise _Reject("not_finite", "division by zero", node)
            return left / right
        return _power(left, right, node)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id in allowed or node.func.id in CONSTANTS:
            # Python reads 2(B+D), (B)(D) and B(D+F) as calls; the student meant a product.
            raise _Reject("implicit_multiplication", ast.unparse(node.func)[-1:] + "(", node.func, end=True)
        if node.func.id not in FUNCTIONS:
            raise _Reject("unknown_function", node.func.id, node)
        if node.keywords:
            raise _Reject("forbidden", "a keyword argument", node)
        fn, lo, hi = FUNCTIONS[node.func.id]
        if not lo <= len(node.args) <= hi:
            raise _Reject("arity", node.func.id, node)
        return fn(*(_build(a, allowed) for a in node.args))
    raise _Reject("forbidden", _describe(node), node)


def _rounded(fn: type[sp.Function], x: sp.Expr) -> sp.Expr:
    # sympy computes every digit of floor(exp(exp(100))) and never returns: bound a number first.
    if x.is_number and not abs(x.evalf(15)) < MAX_ABS_LITERAL:
        raise _Reject("too_large", "a number above 1e40")
    return fn(x)


def _exp(x: sp.Expr) -> sp.Expr:
    # exp of a number beyond +-92 is beyond 1e+-40, which no literal may be; sympy computes every digit of
    # exp(-exp(1e30)) when it orders or prints a sum (10 s, the whole bound). Refused first, as 10**50 is.
    if x.is_number and not abs(x.evalf(15)) <= MAX_ABS_EXP_ARGUMENT:
        raise _Reject("too_large", "a power of e above 1e40 or below 1e-40")
    return sp.exp(x)


def _check_size(expr: sp.Expr) -> None:
    # 99**64 and (B**64)**64 pass the checks on each literal and power; their results must not
    # exceed them either, or the canonical text would not parse back.
    for a in sp.preorder_traversal(expr):
        if a.is_Rational and max(abs(a.p), a.q) > MAX_ABS_LITERAL:
            raise _Reject("too_large", "a number above 1e40")
        if a.is_Pow and a.exp.is_Rational and (abs(a.exp) > MAX_ABS_EXPONENT or a.exp.q > MAX_EXPONENT_DENOMINATOR):
            raise _Reject("too_large", "an exponent above 64")


def _power(base: sp.Expr, exponent: sp.Expr, node: ast.AST) -> sp.Expr:
    # A numeric exponent must be small: B**2, B**(1/2), 2**10. Checked before sympy computes anything,
    # so 9**9**9 is rejected instead of hanging. An exponent with symbols in it (((Z-1)/Z)**K) is kept
    # as a power: nothing is computed until evaluation, which bounds it (equivalence._pow).
    if not exponent.is_Number:
        # One level only: sympy's cost of building a tower B**B**B**2 grows steeply with its height.
        if exponent.has(sp.Pow) and any(not e.exp.is_Number for e in exponent.atoms(sp.Pow)):
            raise _Reject("too_long", "a power in the exponent of a power with symbols in its exponent", node)
        return sp.Pow(base, exponent)
    if abs(exponent) > MAX_ABS_EXPONENT or (
            exponent.is_Rational and exponent.q > MAX_EXPONENT_DENOMINATOR):
        raise _Reject("too_large", "an exponent above 64", node)
    if base.is_Number and abs(base) > MAX_ABS_LITERAL:
        raise _Reject("too_large", "a power of a number above 1e40", node)
    if base == 0 and exponent < 0:
        raise _Reject("not_finite", "division by zero", node)
    if base.is_Add and exponent.is_Integer and exponent not in (0, 1):
        # Left as written: sympy's evaluation of a power of a sum asks assumptions of every term, and for
        # nested sums of powers ((B+(B+1)**64)**64...) that search grows without bound (a minute and more).
        return sp.Pow(base, exponent, evaluate=False)
    return base**exponent
