"""Choice answers: one option out of a list.

Fair reading: an option is recognised whatever its case, spacing, hyphens or underscores
("AllReduce", "all reduce" and "all-reduce" are one option), and an option that is a number is
recognised by its value, whichever library holds it (150, 150.0, ``np.int64(150)`` or ``sp.Integer(150)``
for the option "150": ``record.number_of``). An option's text and an answer's text are read as a number
question reads them (``numbers.parse_number``): the option "1/4" is 0.25, ``Fraction(1, 4)``,
``sp.Rational(1, 4)``, "0.25" or "25%". Two options that would read the same are an authoring error,
caught when the record is made (``questions.Choice``). The numbers inside an option are read by value too:
"16x4.0" is the option "16x4" (``questions.option_key``).

A chip (or another course object) whose name is an option, exactly, is that option ("TPU v5p" for
``hw.TPU_V5P``); any other course object is refused by what it is. Every refusal names the options; a list or
tuple of several values where every option is a shape ("16x4") is
told to write it as text, with the first option as the example (the same whichever option is right).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .. import record
from ..formula import Invalid, answer_to_text
from ..numbers import ParsedNumber, parse_number
from ..questions import Choice, option_key
from ..record import course_object
from ..verdict import Verdict
from . import targets as tg
from .common import correct, invalid, wrong


def _as_number(text: str, unit: str = "") -> float | None:
    """The plain number ``text`` reads as ("150", "1/4", "25%"), or None where it reads as none; with the ``unit``
    of a choice whose options are amounts, the amount in that unit ("0.15 TB/s" is 150 in GB/s)."""
    p = parse_number(text, unit)
    return p.value if isinstance(p, ParsedNumber) else None


@lru_cache(maxsize=1024)
def _option_value(option: str) -> float | None:
    return _as_number(option)


_SHAPE = re.compile(r"[0-9]+(?:x[0-9]+)+")  # an option key such as a mesh's "16x4"


def context(options: Sequence[str]) -> dict[str, Any]:
    """The options, for every refusal's sentence (``messages.phrase_invalid`` ends each with them); where every
    option is a shape, the first option, as the example of how to write a tuple such as (16, 4): the same
    whichever option is right."""
    shape = options[0] if options and all(_SHAPE.fullmatch(option_key(o)) for o in options) else ""
    return {"options": ", ".join(repr(o) for o in options), "expected": "one of the option names", "shape": shape}


def _yes_no(options: Sequence[str], answer: Any) -> str | None:
    """The option "yes" or "no" a truth value names (True, numpy's True), where those are the options."""
    if type(answer).__name__ not in ("bool", "bool_"):
        return None
    word = "yes" if bool(answer) else "no"
    return next((o for o in options if option_key(o) == word), None)


def parse(options: Sequence[str], answer: Any, unit: str = "") -> str | Invalid:
    if (said := _yes_no(options, answer)) is not None:
        return said
    if answer is None or answer is Ellipsis or isinstance(answer, dict):
        # "empty", or the reason a record's marker carries: a recorded None is {"invalid": "empty", ...}
        reason = answer_to_text(answer)
        return reason if isinstance(reason, Invalid) else Invalid("wrong_type", "dict")
    number = record.number_of(answer)  # an option that is a number, given as a number of any library
    if isinstance(number, complex):
        return Invalid("wrong_type", "complex")
    if number is not None:
        text = answer_to_text(number)
        try:
            value = float(number)
        except OverflowError:
            value = math.inf
        by_value = [o for o in options if _option_value(o) is not None and _option_value(o) == value]
        if by_value:
            return by_value[0]
        return Invalid("unknown_option", text[:40] if isinstance(text, str) else "")
    if not isinstance(answer, str):
        return Invalid("wrong_type", type(answer).__name__)
    text = answer_to_text(answer)  # a plain str, whatever a subclass overrides
    if isinstance(text, Invalid):
        return text
    by_spelling = {option_key(o): o for o in options}
    found = by_spelling.get(option_key(text))
    if found is None and (value := _as_number(text, unit)) is not None:
        found = next((o for o in options if _option_value(o) == value), None)
    return found or _in_common_words(options, text) or Invalid("unknown_option", text[:40])


# Words a student adds to an option or leaves out of it, which say nothing of which option it is: the noun a level
# names ("leaf switches"), an article, a chip maker's word ("v5p" for "TPU v5p").
_FILLER = re.compile(r"^(?:the|a|an|by|it)\s+|\s+(?:levels?|switch(?:es)?|tier|layer|an error|an exception)$")
# Other words for a collective's name and its axis: "psum over Y", "all-reduce on Y" or "all-reduce (Y)" for
# "all-reduce over Y".
_REWORDED = ((re.compile(r"\bpsum[\s_-]*scatter\b", re.IGNORECASE), "reduce-scatter"),  # JAX's names of collectives
             (re.compile(r"\bppermute\b", re.IGNORECASE), "collective-permute"),
             (re.compile(r"\bpsum\b", re.IGNORECASE), "all-reduce"),
             (re.compile(r"\s+(?:on|along|across)\s+", re.IGNORECASE), " over "),
             (re.compile(r"\s*\(\s*(\w+)\s*\)\s*$"), r" over \1"))
_SEPARATORS = re.compile(r"[\s_-]+")  # between words: one space, before the filler words are read
_MAKERS = re.compile(r"^(?:tpu|nvidia|google)[\s\-_]*", re.IGNORECASE)
# Usual other forms of the one-word options, and the options (by key) each may name, one way only: "bandwidth" is
# the option "memory" beside "compute", but "memory" is not the option "bandwidth" beside "latency".
_ALIASES = {"comm": {"communication", "comms"}, "comms": {"communication"}, "communication": {"comms"},
            "communications": {"communication", "comms"}, "network": {"communication", "comms"},
            "bandwidth": {"memory"}, "memorybandwidth": {"memory"}, "hbmbandwidth": {"memory", "hbm"},
            "mem": {"memory"}, "computation": {"compute"}, "arithmetic": {"compute"}, "math": {"compute", "flops"},
            "flops": {"compute"}, "compute": {"flops"}, "flop": {"flops", "compute"},
            "unchanged": {"same"}, "nochange": {"same"}, "staysthesame": {"same"}, "thesame": {"same"},
            "no": {"never"}, "allreducescatter": {"reducescatter"},  # XLA's name of a reduce-scatter's fusion
            "hbm": {"memory"}, "ici": {"comms", "communication", "network"},
            "tp": {"tensor"}, "tensorparallelism": {"tensor"}, "tensorparallel": {"tensor"},
            "nocollective": {"none"}, "nocollectives": {"none"}, "nothing": {"none"}, "nocommunication": {"none"},
            "moredifficult": {"harder"}, "lessdifficult": {"easier"},
            "icibandwidth": {"comms", "communication", "ici"}}
# Where no option is the alias's first reading: "bandwidth-bound" beside "compute-bound" is "comms-bound".
_OTHER_READINGS = {"bandwidth": {"comms", "communication"}}
# Among the bounds of a step (its options name one beside FLOPs or compute), memory is HBM; beside VMEM or the host
# it could be any of them.
_BOUND_OPTIONS = {"flops", "compute", "ici", "comms", "communication"}
_AS_A_BOUND = {"memory": {"hbm"}, "hbmreads": {"hbm"}, "memoryreads": {"hbm"}}  # not "bandwidth": ICI's is one too
# A small number in words, for options that are numbers ("two" for "2", "a quarter" for "1/4").
_NUMBER_WORDS = {"one": 1.0, "two": 2.0, "three": 3.0, "four": 4.0, "five": 5.0, "six": 6.0, "seven": 7.0,
                 "eight": 8.0, "nine": 9.0, "ten": 10.0, "half": 0.5, "ahalf": 0.5, "onehalf": 0.5, "quarter": 0.25,
                 "aquarter": 0.25, "onequarter": 0.25, "onefourth": 0.25, "third": 1 / 3, "athird": 1 / 3,
                 "onethird": 1 / 3}
_THEN = re.compile(r"\s*(?:\+|/|,|\bthen\b|->|>)\s*", re.IGNORECASE)
_JOINED = re.compile(r"\s*(?:\+|&|/|,|-|\band\b|\bwith\b)\s*", re.IGNORECASE)


# A parallelism plan's part: a strategy with its degree (dp4, tp8, zero3) or alone (zero). A plan is a product of its
# parts, so "mp2-dp4" is the plan "dp4-mp2"; a sequence ("pcie-ici") is not read in another order.
_PLAN_PART = re.compile(r"(?:dp|mp|tp|pp|ep|sp|fsdp|zero)[0-9]*", re.IGNORECASE)


def _unordered_parts(option: str) -> list[str]:
    """The parts of an option that names several things in no order: joined by "+" ("fsdp+tp"), or a parallelism
    plan joined by "-" ("dp4-mp2"); else none."""
    if "+" in option:
        return option.split("+")
    parts = option.split("-")
    return parts if len(parts) > 1 and all(_PLAN_PART.fullmatch(p.strip()) for p in parts) else []


def _in_common_words(options: Sequence[str], text: str) -> str | None:
    """The one option ``text`` names in other common words (None where it names none, or several): a joined pair in
    another order or with another joiner ("tp+fsdp", "fsdp and tp" for "fsdp+tp"), the option with filler words
    (``_FILLER``, ``_MAKERS``), a usual other form of a one-word option (``_ALIASES``)."""
    def one(found: list[str]) -> str | None:
        return found[0] if len(set(found)) == 1 else None

    parts = sorted(option_key(p) for p in _JOINED.split(text.strip()) if p)
    joined = one([o for o in options if sorted(option_key(p) for p in _unordered_parts(o)) == parts])
    if joined:
        return joined
    spaced = _SEPARATORS.sub(" ", text.strip().lower())  # "leaf-switch" and "psum_scatter" as written with spaces
    bare = _MAKERS.sub("", _FILLER.sub("", spaced).strip())
    reworded = bare
    for pattern, words in _REWORDED:
        reworded = pattern.sub(words, reworded)
    for said in (bare, reworded):
        plain = one([o for o in options if option_key(_MAKERS.sub("", o)) == option_key(said)])
        if plain:
            return plain
    # a sequence of two ("pcie-ici") in its order, with another joiner ("PCIe then ICI", "pcie+ici", "PCIe/ICI")
    steps = [option_key(p) for p in _THEN.split(text.strip()) if p]
    ordered = one([o for o in options if "+" not in o and len(o.split("-")) == 2 == len(steps)
                   and [option_key(p) for p in o.split("-")] == steps])
    if ordered:
        return ordered
    bound = any(option_key(o) in _BOUND_OPTIONS for o in options)
    listed = "," in bare  # "all-reduce, scatter" lists two things: no alias of one word reads it
    for aliases in (_ALIASES, _OTHER_READINGS, _AS_A_BOUND if bound else {}):
        named = set() if listed else aliases.get(option_key(bare), set())
        found = [o for o in options if option_key(o) in named]
        if found:
            return one(found)
    grid = _grid(options, bare)
    if grid:
        return grid
    value = _NUMBER_WORDS.get(option_key(text), _as_number(text))
    by_value = one([o for o in options if value is not None and _option_value(o) is not None
                    and math.isclose(_option_value(o), value)])
    # a number that is the one number of exactly one option that sets values to it: "4096" for "D=F=4096" (not "4"
    # for "4-byte-words", which says nothing of why)
    return by_value or one([o for o in options if value is not None and "=" in o and _numbers_in(o) == {value}])


_CHIPS = re.compile(r"([0-9]+)\s*(?:chips?|devices?|gpus?|tpus?)?")


def _grid(options: Sequence[str], text: str) -> str | None:
    """The one shape option (a slice "4x2") that ``text`` names by its number of chips ("8 chips"). Never a shape
    the other way round: in a mesh "FSDP ways x tensor-parallel ways", 4x16 is another plan than 16x4."""
    keys = {o: option_key(o) for o in options}
    if not keys or not all(_SHAPE.fullmatch(k) for k in keys.values()):
        return None
    count = _CHIPS.fullmatch(text.strip().lower())
    if count is None:
        return None
    found = [o for o, k in keys.items() if math.prod(int(n) for n in k.split("x")) == int(count.group(1))]
    return found[0] if len(found) == 1 else None


def _numbers_in(option: str) -> set[float]:
    return {float(n) for n in re.findall(r"(?<![\w.])[0-9]+(?:\.[0-9]+)?(?![\w.])", option)}


def diagnose(options: Sequence[str], is_right: Any, hint_of: Any, answer: Any, unit: str = "") -> Verdict:
    ctx = context(options)
    p = parse(options, answer, unit)
    if isinstance(p, Invalid):
        return invalid(p, **ctx)
    if is_right(p):
        return correct()
    return wrong("wrong_option", [hint_of(p)], **ctx)


def encode(fp: dict, answer: Any) -> Any:
    """The record of a choice (``record.encode_scalar``). A course object that is named by an option exactly (the
    chip ``hw.TPU_V5P`` for the option 'TPU v5p') is that option, as a number of any library is the option it
    reads as; any other course object is refused by what it is, with the fix."""
    if (said := _yes_no(fp.get("options", ()), answer)) is not None:
        return said
    obj = course_object(answer)
    if obj is not None:
        name = None if obj.startswith("the setting") else getattr(answer, "name", None)  # a setting's are values
        if isinstance(name, str) and name in fp.get("options", ()):
            return str.__str__(name)
        return {"invalid": "wrong_type", "detail": f"{obj} itself: give the option's name, as text"}
    return record.encode_scalar("choice", answer)


def hint(q: Choice) -> str:
    return (f"Work out the consequence of each of the {len(q.options)} options with the numbers above, "
            "then reread the linked book section for the one that fits.")


def judge(q: Choice, answer: Any) -> Verdict:
    hints = {s.answer: s.hint for s in q.slips if s.hint}
    return diagnose(q.options, q.reference.__eq__, lambda o: hints.get(o, ""), answer, q.unit)


def make_print(q: Choice) -> dict:
    return {"options": list(q.options), "answer": tg.digest(q.qid, q.reference),
            "hints": {tg.digest(q.qid, s.answer): s.hint for s in q.slips if s.hint},
            **({"unit": q.unit} if q.unit else {})}


def selfcheck(fp: dict, tag: str, answer: Any) -> Verdict:
    return diagnose(fp["options"], lambda o: tg.digest(tag, o) == fp["answer"],
                    lambda o: fp["hints"].get(tg.digest(tag, o), ""), answer, fp.get("unit", ""))
