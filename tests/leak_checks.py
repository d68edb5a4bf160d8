"""Reading answers out of text, for the tests that prove no text a student reads states one
(``tests/test_giveaways.py``: the records' own messages; ``tests/test_library_rule.py``: what the
``course`` library says in its docstrings, its printed reports and its pictures).

- ``dealt()``: every question at the book's values and at every other choice of its setting.
- ``numbers_in(text)``: the numbers of running text with the unit word after each ("373 us", "~240").
- ``in_unit``: such a number in a question's unit, or None where the word is a unit of another dimension.
- ``fragments(text)``: the pieces of text that read as formulas ("V / W_bidi", "2 V / W_bidi"),
  rewritten in the parser's syntax ("2*V/W_bidi"), and ``as_formula`` to read one over a question's
  symbols (``in_names``: a subscripted name the question does not declare, W_bidi, is read as its
  letter, W).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import sympy as sp

from autograder.formula import Parsed, parse_formula
from autograder.numbers import UNITS, ParsedNumber, parse_number
from autograder.questions import Question, chapter_names, load_chapter

SMALL_COUNT = 64  # whole numbers up to this are counts that coincide with some answer everywhere


def a_size(value: float) -> bool:
    """A small count, or a whole power of two: the shapes, sizes and counts texts state (8192, 32768,
    2048 sequences) are powers of two, and so are many answers, so such a number in a text is a size
    restated, not an answer given away."""
    return value == int(value) and (abs(value) <= SMALL_COUNT or (value > 0 and int(value) & (int(value) - 1) == 0))


@dataclass(frozen=True)
class Dealt:
    chapter: str
    choice: str  # "book", or the setting's name and labels
    question: Question


@functools.cache
def dealt() -> tuple[Dealt, ...]:
    """Every question at the book's values and at every other choice of its setting."""
    out: list[Dealt] = []
    for name in chapter_names():
        chapter = load_chapter(name)
        out += [Dealt(name, "book", q) for q in chapter.questions]
        for s in chapter.settings:
            for combo in s.combos()[1:]:
                labels = s.labels(combo)
                out += [Dealt(name, f"{s.name} {labels}", q) for q in s.questions(labels)]
    return tuple(out)


# --- numbers ---------------------------------------------------------------------------------------------

# A number in running text and the word after it ("51.2 TB/s", "373 us", "~240", "64e9 B", "1,024").
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
                    r"(?:\s?([A-Za-zµμ%]+(?:/[A-Za-z]+)?))?")


SHAPE = re.compile(r"\[[\d,\s]*\]")


def numbers_in(text: str) -> Iterator[tuple[str, str | None, float]]:
    """(number as written, the word after it, value) for each number of ``text`` that is not a size
    (``a_size``); an array's shape ("bf16[4,128,8192]") states sizes too, and is left out."""
    for m in NUMBER.finditer(SHAPE.sub("[]", text)):
        try:
            value = float(m.group(1).replace(",", ""))
        except (ValueError, OverflowError):
            continue
        if a_size(value):
            continue
        yield m.group(1).replace(",", ""), m.group(2), value


@functools.lru_cache(maxsize=65536)
def in_unit(number: str, word: str | None, unit: str) -> float | None:
    """The number in ``unit``; None where the word after it is a unit of another dimension ("51.2 TB/s" is
    no number of days). A word that is no unit ("240 tokens") leaves the number plain."""
    if word and word in UNITS:
        p = parse_number(f"{number} {word}", unit)
        return p.value if isinstance(p, ParsedNumber) else None
    return float(number)


# --- formulas --------------------------------------------------------------------------------------------

@functools.cache
def declared_names() -> tuple[str, ...]:
    """Every symbol name a formula question declares, longest first (for the tokenizer)."""
    names = {n for d in dealt() if d.question.kind == "formula" for n in d.question.names}
    return tuple(sorted(names, key=lambda n: (-len(n), n)))


@functools.cache
def _run() -> re.Pattern[str]:
    names = "|".join(map(re.escape, declared_names()))
    token = (rf"(?:(?<![\w.])(?:{names}|[A-Z](?:_[A-Za-z0-9]+)?)(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?"
             r"|[-+*/^()]| )")
    return re.compile(rf"(?:{token})+")


def fragments(text: str) -> list[str]:
    """The runs of ``text`` made only of symbol names, numbers, operators, brackets and spaces that hold a
    name and a product or quotient, in the parser's syntax (implicit products made explicit, ^ as **)."""
    out = []
    name = r"(?:[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)?)"
    for m in _run().finditer(text.replace("\n", " ")):
        frag = m.group(0).strip(" +-*/^")
        while frag.count("(") != frag.count(")") and frag:  # a bracket of the prose around it
            frag = frag[1:].strip(" +-*/^") if frag.count("(") > frag.count(")") else frag[:-1].strip(" +-*/^")
        if not re.search(r"[*/]", frag) or not re.search(rf"(?<![\w.]){name}", frag):
            continue
        frag = frag.replace("^", "**")
        for _ in range(3):  # implicit products: "2 V", "V W", "2(N-1)", ") V"
            frag = re.sub(rf"(\d|{name}|\))\s+(?=\(|{name}|\d)", r"\1*", frag)
            frag = re.sub(rf"(\d|\))\s*(?=\(|(?!e[-+]?\d){name})", r"\1*", frag)  # not 450e9
        out.append(frag)
    return out


def in_names(fragment: str, names: tuple[str, ...]) -> str:
    """The fragment with each subscripted name a question does not declare read as its letter, where the
    question declares that letter (the docstring's W_bidi is the question's W)."""
    declared = set(names)

    def letter(m: re.Match[str]) -> str:
        n = m.group(0)
        base = n.split("_", 1)[0]
        return base if n not in declared and "_" in n and base in declared else n

    return re.sub(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)?", letter, fragment)


def as_formula(fragment: str, names: tuple[str, ...]) -> sp.Expr | None:
    """The fragment over a question's symbols (``in_names``); None where it does not parse over them."""
    parsed = parse_formula(in_names(fragment, names), names)
    return parsed.expr if isinstance(parsed, Parsed) else None


def pieces(text: str, names: tuple[str, ...]) -> list[str]:
    """The runs of ``text`` made only of ``names`` (a question's symbols), numbers, + - * / ** ( ) and spaces, trimmed
    of the prose's brackets and dangling operators, that are more than one symbol or one number: what a student
    could type as part of a formula ("M + S - 1", "(X-1)/X", "1/32"). Wider than ``fragments``: a sum counts too."""
    words = "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))
    token = (rf"(?:(?<![\w.])(?:{words})(?![\w])|" if words else "(?:") + \
        r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])|\*\*|[-+*/()]| )"
    out = []
    for m in re.finditer(rf"(?:{token})+", text.replace("\n", " ")):
        frag = m.group(0).strip(" +-*/")
        while frag.count("(") != frag.count(")") and frag:  # a bracket of the prose around it
            frag = frag[1:].strip(" +-*/") if frag.count("(") > frag.count(")") else frag[:-1].strip(" +-*/")
        if re.search(r"[-+*/]", frag):
            out.append(frag)
    return out
