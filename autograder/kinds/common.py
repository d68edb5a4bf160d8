"""What every answer kind shares: building verdicts, and the hints of matching slips."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..formula import Invalid
from ..messages import in_words, phrase, phrase_invalid, with_hints
from ..verdict import Status, Verdict


def invalid(inv: Invalid, **ctx: Any) -> Verdict:
    return Verdict(Status.INVALID, 0.0, inv.code, phrase_invalid(inv, **ctx), {"detail": inv.detail})


def wrong(code: str, hints: Sequence[str] = (), **ctx: Any) -> Verdict:
    """A wrong answer; ``hints`` are those of the slips it matches exactly (none if it matches none)."""
    message = with_hints(phrase(code, **ctx), list(dict.fromkeys(h for h in hints if h)))
    return Verdict(Status.INCORRECT, 0.0, code, message)


# The diagnosis of a wrong value of a simple number question (kinds/number.py, ``simple``) that is neither close nor a
# factor said (to an answer that carries the reference's figures): one code and one sentence for every such value,
# for a code or sentence of its own for a factor not said would tell a guess that it is one (a student reads the
# verdict's code too). A declared slip's ratio, unit, magnitude or not_equal code is met by it.
WITHHELD = "withheld"
_WITHHELD_CODES = ("ratio", "unit", "magnitude", "not_equal", "inverted")
CLOSE_FACTOR = 0.25  # kinds/number.py's CLOSE (which imports this module)


def diagnosed_as(found: str, declared: str) -> bool:
    """Whether a verdict's code is a slip's declared one: the same, or one ``WITHHELD`` reads for, as it does at
    values where a factor, a power of ten or "nor a simple multiple" would give the answer away; or, there, "close"
    for a declared factor within 25% (3/4): a factor not said reads as any value that near does."""
    head, _, arg = declared.partition(":")
    if found == "close" and head == "ratio":
        try:
            return abs(float(Fraction(arg)) - 1) <= CLOSE_FACTOR
        except (ValueError, ZeroDivisionError):
            return False
    return found == declared or (found == WITHHELD and head in _WITHHELD_CODES)


def correct(**data: Any) -> Verdict:
    return Verdict(Status.CORRECT, 1.0, "correct", phrase("correct"), data)


def partial(credit: float, message: str) -> Verdict:
    return Verdict(Status.PARTIAL, credit, "partial", message)


def too_expensive(notebook: bool = False) -> Verdict:
    """Judging the answer ran past its bound (``autograder.bounds``), or, with ``notebook``, the notebook's
    answers used up theirs before this one. Invalid, as an unreadable answer is: simplify it and retry."""
    message = phrase("too_expensive:notebook" if notebook else "too_expensive")
    return Verdict(Status.INVALID, 0.0, "too_expensive", message)


def edge(**ctx: Any) -> Verdict:
    """The self-check cannot tell from its data whether the answer lies just inside or just outside
    the accepted range; it never ticks what the grader might refuse."""
    return Verdict(Status.INCORRECT, 0.0, "edge", phrase("edge", **ctx))


def and_list(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# How a record says that the answer is not a function where a function or a program is asked: nothing was called
# or traced (``record.encode_outputs``, ``kinds.program.encode``).
NOT_A_FUNCTION = "expected a function, got "


def not_a_function(got: str) -> Verdict:
    """The verdict on an answer that is no function where one is asked (``got``: what it is, in words): the
    placeholder's None is no answer yet; anything else is told to pass the function itself. Costs no attempt."""
    if got in ("nothing (None)", "NoneType"):
        return invalid(Invalid("empty"))
    got = in_words(got)  # a record made before ``record.describe`` names a type
    return Verdict(Status.INVALID, 0.0, "not_a_function", phrase("not_a_function", got=got))
