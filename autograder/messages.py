"""Diagnosis codes to sentences: the only place student-facing wording lives.

A code is ``head`` or ``head:argument`` (``ratio:2``, ``extra_symbol:F``, ``unit:1000``). Checkers
produce codes; this module phrases them, so the self-check in the student's notebook and the
grader's feedback say the same thing in the same words. No sentence may contain the reference.
"""

from __future__ import annotations

from fractions import Fraction

from . import bounds
from .formula import Invalid

_INVALID = {
    "empty": "No answer yet: replace the placeholder with your answer.",
    "syntax": "This is not a formula I can read ({detail}). Write it as in Python: * between factors, ** for "
              "powers, and close every (.",
    "implicit_multiplication": "Write the multiplication out: '{fix}', not '{detail}'.",
    "caret_power": "Use ** for powers (B**2), not ^.",
    "unicode_operator": "Use the keyboard operators + - * / instead of '{detail}'.",
    "relation": "Give an expression, not an equation or comparison: drop the '=' or '<'.",
    "unknown_name": "Unknown name '{detail}'. Use only these symbols: {names}.",
    "unknown_function": "'{detail}' is not a function a formula may use. Allowed: sqrt, log, exp, "
                        "max, min, abs, floor, ceiling.",
    "function_without_call": "'{detail}' is a function: call it with parentheses, e.g. {detail}(B).",
    "arity": "'{detail}' got the wrong number of arguments: check the commas, as in sqrt(B), log(B, 2), max(B, D).",
    "forbidden": "A formula may not contain {detail}. Use only numbers, symbols, + - * / ** and calls such as "
                 "sqrt(B).",
    "too_long": "The answer is too long to check ({detail}). Simplify it first.",
    "too_large": "The answer contains a number too large to check ({detail}). Simplify it, or write it with "
                 "smaller numbers and exponents.",
    "not_finite": "The answer is infinite or undefined: check for a division by zero or an overflow.",
    "complex": "The answer is a complex number; a size or a time is real and positive: check the signs under "
               "square roots and logarithms.",
    "wrong_type": "Expected {expected}, got a value of type {detail}.",
    "not_a_number": "Expected a number such as 1.5e-3, or a number with a unit such as '1.5 ms'.",
    "separator": "Write the number without separators between its digits: 1,024 is 1024 in some countries and "
                 "1.024 in others. Type 1024 or 1.024.",
    "unknown_unit": "Unknown unit '{detail}'. For this question use {unit_examples}.",
    "unit_dimension": "'{detail}' is not the right kind of unit: the question asks for {dimension}.",
    "unknown_option": "Choose one of: {options}.",
    "too_expensive": "Checking this answer took more than {limit}, the most one answer may take: simplify it "
                     "(drop terms that add nothing) and try again.",
    "no_record": "No answer was recorded for this question: {detail}",
}

_WRONG = {
    "ratio": "Off by a factor of {factor}: {comparison}.",
    "sign": "The sign is wrong.",
    "not_real": "The answer is not a real number at typical values of {names}.",
    "extra_symbol": "Your answer depends on {detail}, but the answer should not.",
    "missing_symbol": "The answer depends on {detail}; yours does not.",
    "lower_terms": "The leading term is right, but the lower-order terms differ: count exactly.",
    "partly": "Your answer agrees with the expected one in only part of the range of {names}: "
              "check which term dominates where (a max or min?).",
    "not_equivalent": "Not equivalent to the expected formula, and not off by a simple factor: recheck each "
                      "term (which quantities enter it, and whether they multiply or add).",
    "unit": "This looks like the answer in {guess}; the question asks for {unit}. Give the number in "
            "{unit}, or write the unit, e.g. '{example}'.",
    "close": "Close, but the question accepts {tolerance}.",
    "edge": "At the very edge of what is accepted ({tolerance}): the self-check cannot tell on which side. "
            "Give the value with one more significant figure.",
    "magnitude": "Off by about a factor of {factor}: check the units and the powers of ten.",
    "not_equal": "Not the expected value, nor a simple multiple of it: recheck which quantities you "
                 "combined (bytes or FLOPs, per chip or in total).",
    "wrong_elements": "{bad} of the {length} elements of the returned array are wrong; the first is element {index} "
                      "({finding}). Check the rule that computes each element from the inputs.",
    "wrong_option": "Not the right choice: compare the numbers you computed with what each option implies.",
}

# "too_expensive:notebook": an answer left unjudged because the notebook's answers used up its budget.
_NOTEBOOK_SPENT = ("Not checked: checking this notebook's answers took more than {seconds:g} s, the most one "
                   "notebook may take. Simplify the answers that are slow to check (drop terms that add nothing) "
                   "and try again.")


def phrase(code: str, **ctx: object) -> str:
    """The sentence for a diagnosis code. ``ctx`` supplies names, unit and options."""
    head, _, arg = code.partition(":")
    if head == "ratio":
        return _ratio_sentence(arg)
    if head == "too_expensive" and arg == "notebook":
        return _NOTEBOOK_SPENT.format(seconds=bounds.NOTEBOOK_SECONDS)
    fields = {"detail": arg or ctx.get("detail", ""), **ctx}
    template = _INVALID.get(head) or _WRONG.get(head)
    if template is None:
        return "Not the expected answer."
    if head == "implicit_multiplication":
        d = str(fields["detail"])
        fields["fix"] = d[:1] + "*" + d[1:].lstrip() if d else ""
    if head == "unit":
        fields.update(_unit_guess(arg, str(ctx.get("unit", ""))))
    if head == "too_expensive":
        fields["limit"] = f"{bounds.ANSWER_CPU_SECONDS:g} s of computing ({bounds.ANSWER_WALL_SECONDS:g} s in all)"
    if head == "magnitude":
        fields["factor"] = f"10^{arg}" if arg else "a power of ten"
    if head == "extra_symbol" or head == "missing_symbol":
        fields["detail"] = " and ".join(arg.split(","))
    return template.format_map(_Default(fields))


def phrase_invalid(inv: Invalid, **ctx: object) -> str:
    """Sentence for an unreadable answer, with a caret under the fault when the offset is known."""
    sentence = phrase(inv.code, detail=inv.detail, **ctx)
    if inv.offset is not None and inv.text and len(inv.text) <= 120 and inv.code not in ("empty",):
        sentence += f"\n    {inv.text}\n    {' ' * inv.offset}^"
    return sentence


def _ratio_sentence(arg: str) -> str:
    if arg in ("", "other"):
        return "Off by a constant factor: the right symbols, but a wrong coefficient."
    if arg == "-1":
        return _WRONG["sign"]
    try:
        k = Fraction(arg)
    except (ValueError, ZeroDivisionError):
        return "Off by a constant factor."
    if k < 0:
        return _WRONG["sign"] + " " + _ratio_sentence(str(-k))
    named = {Fraction(2): "twice the expected value", Fraction(1, 2): "half the expected value"}
    if k in named:
        comparison = "yours is " + named[k]
    elif k > 1:
        comparison = f"yours is {_num(k)} times the expected value"
    else:
        comparison = f"yours is {_num(k)} of the expected value"
    return _WRONG["ratio"].format(factor=_num(k), comparison=comparison)


def _num(k: Fraction) -> str:
    if k.denominator != 1:
        return f"{k.numerator}/{k.denominator}"
    n = k.numerator
    power_of_ten = n >= 10**4 and str(n).rstrip("0") == "1"
    return f"1e{len(str(n)) - 1}" if power_of_ten else str(n)


_TIME_NAMES = {1e-3: "ms", 1e-6: "us", 1e-9: "ns", 1e3: "ks", 1e-12: "ps"}


def _unit_guess(arg: str, unit: str) -> dict[str, str]:
    """Given the student's value is ``arg`` times the reference, name the unit they likely used."""
    try:
        factor = float(Fraction(arg))
    except (ValueError, ZeroDivisionError):
        factor = 1.0
    guess = f"units {arg} times smaller than {unit or 'expected'}"
    if unit == "s" and factor > 1:
        guess = {1e3: "milliseconds", 1e6: "microseconds", 1e9: "nanoseconds"}.get(factor, guess)
    elif unit == "s" and factor < 1:
        guess = {1e-3: "kiloseconds"}.get(factor, guess)
    elif unit in ("B", "B/s", "FLOP", "FLOP/s") and factor < 1:
        prefix = {1e-3: "k", 1e-6: "M", 1e-9: "G", 1e-12: "T", 1e-15: "P"}.get(factor)
        guess = f"{prefix}{unit}" if prefix else guess
    example_unit = {"s": "ms", "B": "GB", "B/s": "GB/s", "FLOP": "TFLOP", "FLOP/s": "TFLOP/s"}.get(unit, unit)
    return {"guess": guess, "example": f"1.5 {example_unit}"}


class _Default(dict):
    def __missing__(self, key: str) -> str:
        return "?"
