"""The hint a student unlocks after a first wrong attempt at a question.

An author may write one (``Question.hint``); otherwise it is derived from the question's record: the
symbols a formula uses, the power of ten a number lies in, the collectives a program needs. Each
derived hint tells no more than the diagnoses of later wrong attempts would ("should not depend on
F", "off by about 10^3"), so a hint never prints the answer. It is computed at release time and
shipped, as plain text, with the self-check data.
"""

from __future__ import annotations

import math

import sympy as sp

from .programs import describe_counts
from .questions import Choice, Formula, Function, Number, Program, Question


def hint_for(q: Question) -> str:
    if q.hint:
        return q.hint
    if isinstance(q, Formula):
        used = sorted(s.name for s in sp.sympify(q.reference).free_symbols)
        if not used:
            return "The answer is a plain number here: none of the symbols survives in it."
        return f"The answer is a formula in {_names(used)} and no other symbol."
    if isinstance(q, Number) and float(q.reference) > 0:
        k = math.floor(math.log10(float(q.reference)))
        unit = f" {q.unit}" if q.unit else ""
        return f"The answer lies between 1e{k} and 1e{k + 1}{unit}."
    if isinstance(q, Program):
        needed = {k: v for k, v in q.spec.collectives.items() if v}
        if not needed:
            return ("The expected program needs no collective at all: with the right input shardings every "
                    "device computes its own block of the result.")
        return f"The expected program runs {describe_counts(needed)} and nothing else."
    if isinstance(q, Choice):
        return (f"Work out the consequence of each of the {len(q.options)} options with the numbers above, "
                "then reread the linked book section for the one that fits.")
    if isinstance(q, Function):
        return ("Call your function by hand on the first test case and compare with a calculation on "
                "paper; the message above names the case that fails.")
    return "Reread the linked book section, then check each step of your derivation and its units."


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
