"""What a question's own texts give away: no text of a record states an answer the student should derive.

Two classes of leak, checked over every chapter and every choice of every setting (a student may be
dealt any of them):

- The size in a model's name. "LLaMA 3-70B" is not its parameter count (70,552,387,584): a question that
  asks for a count computed from the config must refuse the name's round number, whatever tolerance it
  has, unless that round number is the very answer the question asks for (a question that says to take the
  nominal 70e9 parameters).
- Numbers in messages. A hint, a slip's hint or an accepted alternative's message that states a number
  another question of the chapter accepts (at the book's values or at any variant's) answers that
  question for whoever reads the message: the chip's "~240" in a roofline hint is the critical batch of
  two later questions.

Not counted, because they tell nothing: small whole numbers and whole powers of two (counts of axes,
hops and heads, shapes and sizes coincide with some answer everywhere: ``tests/leak_checks.a_size``), a
number the question's own prompt already states (a given restated), and the hint the engine derives for a
number question (the power of ten of its own answer).
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Iterator
from fractions import Fraction
from types import SimpleNamespace

import pytest

from autograder import fingerprint, kinds
from autograder.numbers import Tolerance
from autograder.questions import Number, Question, chapter_names
from autograder.verdict import Status, Verdict
from tests.leak_checks import Dealt, dealt, in_unit, numbers_in

# A size in a model's name: "LLaMA 3-70B", "LLaMA-2 13B", "Course-31B", "Megatron-LM's 314B run".
MODEL_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)B\b")


# --- the size in a model's name ------------------------------------------------------------------------

def name_size_leaks() -> list[str]:
    out = []
    for d in dealt():
        q = d.question
        if not isinstance(q, Number):
            continue
        reference = float(q.reference)
        for m in MODEL_SIZE.finditer(q.prompt):
            nominal = float(m.group(1)) * 1e9
            if abs(reference / nominal - 1) < 1e-9:
                continue  # the question asks for the nominal size itself ("use the nominal 70e9")
            if q.tolerance.accepts(reference, nominal):
                out.append(f"{q.qid} [{d.choice}]: accepts {m.group(0)} = {nominal:.6g} for {reference:.6g} "
                           f"({q.tolerance.describe()}) | {q.prompt}")
    return out


@pytest.mark.every_chapter
def test_no_question_accepts_the_size_in_a_models_name():
    leaks = name_size_leaks()
    assert not leaks, (f"{len(leaks)} question(s) accept the size in a model's name as its count: ask for "
                       "more figures (and say so in the prompt) and add a hinted slip at that size:\n"
                       + "\n".join(leaks))


@pytest.mark.every_chapter
def test_the_name_gets_a_hint_saying_it_is_the_name():
    """Where a count question names a sized model, the name's size is a slip whose hint says what it is."""
    missing = []
    for d in dealt():
        q = d.question
        if not isinstance(q, Number) or "parameter" not in q.prompt.lower():
            continue
        for m in MODEL_SIZE.finditer(q.prompt):
            nominal = float(m.group(1)) * 1e9
            if abs(float(q.reference) / nominal - 1) > 0.02:
                continue  # not a count of this model's parameters
            if not any(s.hint and abs(float(s.answer) / nominal - 1) < 1e-9 for s in q.slips):
                missing.append(f"{q.qid} [{d.choice}]: no hinted slip at {nominal:.6g}")
    assert not missing, "\n".join(missing)


# --- numbers in messages -------------------------------------------------------------------------------

def messages(q: Question) -> Iterator[tuple[str, str]]:
    """(where, text) of every message a student may read about ``q`` besides its prompt."""
    if q.hint:
        yield "hint", q.hint
    elif q.kind != "number":  # a number's derived hint names only the power of ten of its own answer
        yield "derived hint", kinds.hint(q)
    for i, s in enumerate(q.slips):
        if s.hint:
            yield f"slip {i}", s.hint
    for i, a in enumerate(q.accept):
        yield f"accept {i}", a.message


def message_leaks() -> list[str]:
    by_chapter: dict[str, list[Dealt]] = {}
    for d in dealt():
        by_chapter.setdefault(d.chapter, []).append(d)
    out = []
    for items in by_chapter.values():
        answers = [(d, float(d.question.reference)) for d in items if isinstance(d.question, Number)
                   and float(d.question.reference) != 0]
        for d in items:
            q = d.question
            given = {v for _, _, v in numbers_in(q.prompt)}
            for where, text in messages(q):
                for number, unit, value in numbers_in(text):
                    if value in given:
                        continue
                    for other, reference in answers:
                        o = other.question
                        if o.qid == q.qid:
                            continue
                        x = in_unit(number, unit, o.unit)
                        if x is not None and o.tolerance.accepts(reference, x):
                            out.append(f"{q.qid} [{d.choice}] {where}: {text!r} states {number}"
                                       f"{' ' + unit if unit else ''}, the answer of {o.qid} [{other.choice}]")
                            break
    return sorted(set(out))


@pytest.mark.every_chapter
def test_no_message_states_another_questions_answer():
    leaks = message_leaks()
    assert not leaks, (f"{len(leaks)} hint(s) or message(s) state a number another question accepts; "
                       "say it without the number (name the question or the quantity):\n" + "\n".join(leaks))


@pytest.mark.parametrize(("text", "found"), [("compare 1/2 FLOP/byte with the chip's ~240.", [240.0]),
                                             ("the current text's spine has 51.2 TB/s.", [51.2]),
                                             ("a hop of 8 us; 1,200 chips; 8192 tokens", [1200.0])])
def test_numbers_in_reads_running_text(text, found):
    assert [v for _, _, v in numbers_in(text)] == found


def test_a_number_is_read_in_the_questions_unit():
    assert in_unit("51.2", "TB/s", "B/s") == 51.2e12 and in_unit("51.2", "TB/s", "days") is None
    assert in_unit("240", "tokens", "") == 240 and in_unit("373", "us", "s") == pytest.approx(373e-6)


# --- a guess that carries no work ------------------------------------------------------------------------
#
# A message that names an exact factor ("Off by a factor of 1/32") turns a guess typed without any work into the
# answer wherever the answer is itself a simple number (1/32, 0.25, 100): the student divides. The attacker here
# types a number from ``UNWORKED`` into the self-check (and the grader), reads the message, and derives a candidate
# from any exact factor it names; where it names a power of ten ("about a factor of 10^3"), a second call at the
# guess moved by it, and a candidate from that message too. No candidate may be right.

UNWORKED = sorted({1.0, 2.0, 3.0} | {10.0**k for k in range(-15, 16)} | {2.0**k for k in range(-10, 11)})
# The factors a message might name, as small whole numbers and their ratios, and the time units' (24 hours a day):
# a guess that none of them, times a power of ten, carries to an accepted value cannot be led there, and is skipped.
_SMALL = (1, 2, 3, 4, 5, 8, 16, 32, 64)
_NAMEABLE = sorted({Fraction(p, q) for p in _SMALL for q in _SMALL}
                   | {Fraction(s) for s in (24, 60, 3600, 86400, 604800, 31557600)}
                   | {Fraction(1, s) for s in (24, 60, 3600, 86400, 604800, 31557600)})
_FACTOR = re.compile(r"factor of (1e\d+|\d+(?:/\d+)?)\b(?!\^)")
_POWER = re.compile(r"factor of 10\^([-+]?\d+)")
STUDENTS = 3  # other choices of a setting played, besides the book's values


def _mantissa(x: float) -> float:
    return x / 10.0 ** math.floor(math.log10(x))


@functools.cache
def _reachable() -> tuple[list[float], list[float]]:
    """(mantissa of g / k, g) for every guess g and nameable factor k, sorted by mantissa."""
    pairs = sorted((_mantissa(g / float(k)), g) for g in UNWORKED for k in _NAMEABLE)
    return [m for m, _ in pairs], [g for _, g in pairs]


def _leading(q: Number) -> list[float]:
    """The guesses some nameable factor, times a power of ten, carries into (or within 1% of) the accepted values."""
    lo, hi = sorted(abs(x) for x in q.tolerance.bounds(float(q.reference)))
    lo, hi = lo / 1.01, hi * 1.01
    mantissas, guesses = _reachable()
    if lo <= 0 or hi / lo >= 10:
        return UNWORKED
    a, b = _mantissa(lo), _mantissa(lo) * hi / lo
    spans = [(a, b)] if b <= 10 else [(a, 10.0), (1.0, b / 10)]
    return sorted({guesses[i] for s, e in spans
                   for i in range(bisect.bisect_left(mantissas, s), bisect.bisect_right(mantissas, e))})


def _pointed(v: Verdict, value: float) -> float | None:
    """The value a verdict points to: the answer divided by the exact factor its code or its message names (a unit
    it names is one). A student reads both."""
    head, _, arg = v.diagnosis.partition(":")
    if head in ("ratio", "unit") and arg not in ("", "other", "binary"):
        try:
            return value / float(Fraction(arg))
        except (ValueError, ZeroDivisionError):
            pass
    if head == "unit" and arg not in ("", "binary") and "looks like the answer in" in v.message:  # names the unit
        return value / float(Fraction(arg))
    m = _FACTOR.search(v.message)
    if m is None:
        return -value if v.message.startswith("The sign is wrong") else None
    k = float(m.group(1)) if m.group(1).startswith("1e") else float(Fraction(m.group(1)))
    return value / k * (-1 if v.message.startswith("The sign is wrong") else 1)


def unworked_leaks(items: list[Dealt]) -> list[str]:
    out = []
    for d in items:
        q = d.question
        reference = float(q.reference)
        sign = -1.0 if reference < 0 else 1.0
        guesses = [sign * g for g in _leading(q)]
        if any(q.tolerance.accepts(reference, g) for g in guesses):
            continue  # the answer is itself a number typed without work: no message can give more away
        fp = fingerprint.make(q)
        right = functools.partial(kinds.judge, q)
        for judge in (right, functools.partial(fingerprint.selfcheck, fp, q.qid)):
            for guess in guesses:
                first = judge(guess)
                calls = [(guess, first)]
                power = _POWER.search(first.message) or re.fullmatch(r"magnitude:([-+]\d+)", first.diagnosis)
                if power:
                    second = guess / 10.0 ** int(power.group(1))
                    calls.append((second, judge(second)))
                    if calls[-1][1].ok:
                        out.append(f"{q.qid} [{d.choice}]: {guess:g} -> {first.message!r} -> {second:g} is right")
                        continue
                for value, v in calls:
                    candidate = _pointed(v, value)
                    if candidate is not None and right(candidate).ok:
                        out.append(f"{q.qid} [{d.choice}]: {value:g} -> {v.message!r} -> {candidate:g} is right")
    return sorted(set(out))


def _played() -> dict[str, list[Dealt]]:
    """The number questions of each chapter at the book's values and at a few students' choices."""
    by_chapter: dict[str, list[Dealt]] = {}
    seen: dict[str, int] = {}
    for d in dealt():
        if not isinstance(d.question, Number):
            continue
        n = seen.get(d.question.qid, 0)
        if d.choice == "book" or n < STUDENTS:
            by_chapter.setdefault(d.chapter, []).append(d)
            seen[d.question.qid] = n + (d.choice != "book")
    return by_chapter


@pytest.mark.parametrize("chapter", chapter_names())
def test_no_message_turns_an_unworked_guess_into_the_answer(chapter):
    items = _played().get(chapter, [])
    leaks = unworked_leaks(items)
    assert not leaks, (f"{len(leaks)} message(s) name a factor that turns a number typed without work into the "
                       "answer: where the answer is a simple number, say only that it is not equal:\n"
                       + "\n".join(leaks[:40]))


def test_the_attacker_reads_factors():
    """The attacker itself: it finds the answer where a factor is named (so the test above can fail)."""
    q = next(d.question for d in dealt() if isinstance(d.question, Number) and d.choice == "book"
             and float(d.question.reference) > 0)
    r = float(q.reference)
    v = Verdict(Status.INCORRECT, 0.0, "ratio:2", "Off by a factor of 2: yours is twice the expected value.")
    assert _pointed(v, 2 * r) == r and right_answer(q, _pointed(v, 2 * r))
    v = Verdict(Status.INCORRECT, 0.0, "ratio:1/32", "Off by a factor of 1/32: yours is 1/32 of the expected value.")
    assert _pointed(v, r / 32) == pytest.approx(r)
    v = Verdict(Status.INCORRECT, 0.0, "ratio:1000000",
                "Off by a factor of 1e6: yours is 1e6 times the expected value.")
    assert _pointed(v, r * 1e6) == pytest.approx(r)
    assert _POWER.search("Off by about a factor of 10^-3 (to within a factor of three)").group(1) == "-3"
    assert _FACTOR.search("Off by about a factor of 10^-3 (to within") is None
    assert 1.0 in _leading(SimpleNamespace(reference=1 / 32, tolerance=Tolerance.figures()))  # type: ignore[arg-type]


def right_answer(q: Number, value: float) -> bool:
    return kinds.judge(q, value).ok
