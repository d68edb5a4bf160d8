"""A student's answer in whatever form the course accepts, turned into something a demo cell can use.

The README lets a formula be a sympy expression or text (``"2*B*D*F/C"``), and a number a float or
text with a unit (``"1.2 ms"``). The grader reads every form; the notebooks' demo and plot cells must
too, or a correct text answer would crash the picture drawn from it (``"...".subs`` does not exist).
These helpers go through the grader's own parsers, which never ``eval`` (docs/architecture.md), and
say in the course's words what cannot be read.

    expr = as_expr(my_answer, "B D F")             # sympy, over the course's positive symbols
    float(expr.subs({B: 64, D: 8192, F: 32768}))
    seconds = as_number(my_time, "s")              # "1.2 ms" -> 0.0012
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import sympy as sp

from .errors import OneLine

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UnreadableAnswer(OneLine, ValueError):
    """An answer a demo cell cannot read: the message says why, as the self-check would (in one line:
    ``errors.OneLine``)."""


def as_expr(answer: object, names: str | Iterable[str] | None = None) -> sp.Expr:
    """The formula ``answer`` (a sympy expression, text, or a number) as a sympy expression over the
    course's positive symbols, so that ``.subs`` and ``lambdify`` work whatever form it came in.

    ``names`` are the symbols the formula may use (a space-separated string or a list); by default
    every name in the answer that is not called as a function. Raises ``UnreadableAnswer`` with the
    self-check's explanation when the answer is not a formula."""
    from autograder.formula import Invalid, parse_formula
    from autograder.kinds import formula

    allowed = _names(answer) if names is None else (names.split() if isinstance(names, str) else list(names))
    parsed = parse_formula(answer, allowed)
    if isinstance(parsed, Invalid):
        raise UnreadableAnswer(_explain("a formula", parsed, **formula.context(allowed)))
    return parsed.expr


def as_number(answer: object, unit: str = "") -> float:
    """The number ``answer`` (a float or an int of any library, a Fraction, or text such as
    ``"1.2 ms"``) in ``unit`` ("" for a plain number), as a float. Raises ``UnreadableAnswer`` when it
    is not a number in that unit."""
    from autograder import numbers
    from autograder.formula import Invalid
    from autograder.kinds import number

    parsed = numbers.parse_number(answer, unit)
    if isinstance(parsed, Invalid):
        ctx = number.context(unit, numbers.Tolerance.figures().describe())  # the words a number question uses
        raise UnreadableAnswer(_explain(f"a number in {unit}" if unit else "a number", parsed, **ctx))
    return float(parsed.value)


def _names(answer: object) -> list[str]:
    """The names a formula uses: a sympy object's symbols, or the identifiers of text that are not
    followed by "(" (those are function calls such as ``sqrt(B)``)."""
    if isinstance(answer, sp.Basic):
        return sorted(str(s) for s in answer.free_symbols)
    if not isinstance(answer, str):
        return []
    from autograder import formula

    constants = getattr(formula, "CONSTANTS", {})  # pi stays the number, not a symbol called pi
    return sorted({m.group(0) for m in _IDENTIFIER.finditer(answer)
                   if not answer[m.end():].lstrip().startswith("(") and m.group(0) not in constants})


def _explain(what: str, invalid: object, **ctx: object) -> str:
    """The self-check's sentence; ``ctx`` is the answer kind's own context (``kinds.number.context``,
    ``kinds.formula.context``), which fills every field its sentences name."""
    from autograder.messages import phrase_invalid

    return f"This answer cannot be read as {what}. {phrase_invalid(invalid, **ctx)}"  # type: ignore[arg-type]
