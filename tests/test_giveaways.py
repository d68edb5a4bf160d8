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
from typing import Any

import pytest
import sympy as sp

from autograder import fingerprint, kinds
from autograder.kinds import formula
from autograder.kinds.number import BINARY_SIZES, NUMBER_FACTORS, mantissa, pin, simple_mantissas, time_factors
from autograder.numbers import Tolerance
from autograder.questions import Formula, Number, Question, chapter_names
from autograder.verdict import Status, Verdict
from tests.leak_checks import Dealt, as_formula, dealt, in_unit, numbers_in, pieces

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


# --- a slip's hint that hands over the rest of the answer ----------------------------------------------------

def _combined(slip: Any, piece: Any) -> tuple[Any, ...]:
    """What a student who reads ``piece`` in the hint of the ``slip`` they typed can make of the two in one step."""
    return (piece, slip * piece, slip / piece, piece / slip, slip + piece, slip - piece, piece - slip)


def hint_giveaways() -> list[str]:
    """Each slip's hint that states a piece of formula (``leak_checks.pieces``: over the question's symbols for a
    formula, numbers alone for a number) which, put together with the slip in one step, is the answer: "divide by the
    total number of ticks, M + S - 1" beside (S-1)/M (for a formula, the piece over the slip's numerator, or the
    slip's denominator under the piece, are one step too). Formulas are judged by the formula judge, numbers by their
    tolerance, at every choice of every setting. A function's or a program's answer is code: no piece of a hint
    combines with it."""
    out = []
    for d in dealt():
        q = d.question
        if not isinstance(q, Formula | Number) or (isinstance(q, Formula) and d.choice != "book"):
            continue
        names = q.names if isinstance(q, Formula) else ()
        for slip in q.slips:
            for piece in pieces(slip.hint, names) if slip.hint else ():
                if isinstance(q, Formula):
                    expr = as_formula(piece, names)
                    if expr is None:
                        continue
                    wrong = formula.parse_known(names, slip.answer).expr
                    top, bottom = sp.fraction(sp.together(wrong))  # "divide by ..." in place of its denominator
                    told = [c for c in (*_combined(wrong, expr), top / expr, expr / bottom)
                            if formula.judge(q, c).status is Status.CORRECT]
                else:
                    try:
                        value = float(sp.sympify(piece))
                    except (sp.SympifyError, TypeError, ValueError, ZeroDivisionError):
                        continue
                    told = [c for c in _combined(float(slip.answer), value) if value
                            and q.tolerance.accepts(q.reference, c)]
                if told:
                    out.append(f"{q.qid} [{d.choice}]: the hint {slip.hint!r} of the slip {slip.answer!r} states "
                               f"{piece!r}, which makes it the answer")
    return sorted(set(out))


@pytest.mark.every_chapter
def test_no_slips_hint_hands_over_the_rest_of_the_answer():
    """A hint names the cause of a slip, never the piece that mends it: with the numerator right, "divide by
    M + S - 1" is the answer."""
    leaks = hint_giveaways()
    assert not leaks, (f"{len(leaks)} slip hint(s) state what turns the slip into the answer; say why the slip is "
                       "wrong without the expression:\n" + "\n".join(leaks))


@pytest.mark.parametrize(("text", "names", "found"), [
    ("divide by the total number of ticks, M + S - 1.", ("S", "M"), ["M + S - 1"]),
    ("the ring's (X-1)/X is the share (in B/s); each of 32 chips reads 1/32.", ("X", "B"), ["(X-1)/X", "1/32"]),
    ("LLaMA 3-8B's 2:4-sparse D-sized norm, a multiply-add", ("D",), [])])
def test_pieces_are_what_a_student_could_type(text, names, found):
    assert pieces(text, names) == found


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


@functools.cache
def _reachable() -> tuple[list[float], list[float]]:
    """(mantissa of g / k, g) for every guess g and nameable factor k, sorted by mantissa."""
    pairs = sorted((mantissa(g / float(k)), g) for g in UNWORKED for k in _NAMEABLE)
    return [m for m, _ in pairs], [g for _, g in pairs]


def _leading(q: Number) -> list[float]:
    """The guesses some nameable factor, times a power of ten, carries into (or within 1% of) the accepted values; and,
    in a question in bytes, every binary size ("1 GiB", typed as a unit)."""
    sizes = list(BINARY_SIZES) if getattr(q, "unit", "") == "B" else []
    lo, hi = sorted(abs(x) for x in q.tolerance.bounds(float(q.reference)))
    lo, hi = lo / 1.01, hi * 1.01
    mantissas, guesses = _reachable()
    if lo <= 0 or hi / lo >= 10:
        return UNWORKED + sizes
    a, b = mantissa(lo), mantissa(lo) * hi / lo
    spans = [(a, b)] if b <= 10 else [(a, 10.0), (1.0, b / 10)]
    return sorted({guesses[i] for s, e in spans
                   for i in range(bisect.bisect_left(mantissas, s), bisect.bisect_right(mantissas, e))} | set(sizes))


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


# --- a wrong value that tells which kind of wrong it is -------------------------------------------------------------
#
# Where the answer is a simple number (``kinds.number.simple``), a factor is named only to an answer that carries the
# reference's figures (``pin``). That is not enough if the sentence or the code of a factor not named differs from
# that of any other wrong value: one call then tells whether guess / answer is a named factor, and a few guesses from
# the unworked set pin the answer (an outside review: 3 to 7 calls, ch01-e2 in 3: 1, 0.333, 0.5). So on a simple
# question every wrong value that is neither close (the granted band: docs/security.md), nor a declared slip (its
# hint), nor a pinned factor, nor a unit the student wrote, reads alike: the same sentence and the same code.

FAR = 0.3  # clear of the "close" band (25%)
NEAR_WORDED = 0.06  # clear of a declared slip's hint, or an accepted alternative (their reach is at most 5%)
OFF = (1.09, 1 / 1.09)  # a value off a named factor by this much is a named factor away from nothing accepted


def _is_simple(q: Number) -> bool:
    return bool(fingerprint.make(q).get("simple"))


def _factors(q: Number) -> list[float]:
    """The positive factors a message may name (powers of ten beyond 1000 only at 10^6, 10^9 and 10^12: the others
    read as those do)."""
    return [float(k) for k in (*NUMBER_FACTORS, *time_factors(q.unit))
            if k > 0 and (abs(math.log10(k)) <= 3 or abs(math.log10(k)) in (6, 9, 12))]


def _clear(q: Number, value: float) -> bool:
    """Whether ``value`` is wrong, not close, and no declared slip's or accepted alternative's value."""
    lo, hi = sorted(abs(x) for x in q.tolerance.bounds(float(q.reference)))
    v = abs(value)
    if lo * (1 - FAR) <= v <= hi * (1 + FAR):
        return False
    worded = [float(s.answer) for s in q.slips if s.hint] + [float(a.answer) for a in q.accept]
    reach = max(NEAR_WORDED, 3 * q.tolerance.rtol)
    return not any(w == value or (w and abs(value / w - 1) < reach) for w in worded)


def _named_away(q: Number, value: float) -> bool:
    """Whether some named factor carries ``value`` to (about) an accepted value."""
    lo, hi = sorted(abs(x) for x in q.tolerance.bounds(float(q.reference)))
    ks = [float(k) for k in (*NUMBER_FACTORS, *time_factors(q.unit)) if k > 0]
    return any(lo / 1.02 <= abs(value) / k <= hi * 1.02 for k in ks)


def kinds_of_wrong(q: Number) -> tuple[list[float], list[float]]:
    """Wrong values of a simple question a named factor away from an accepted value that carries too few of the
    reference's figures to be told the factor (guesses of ``UNWORKED`` and accepted values off the pin, times each
    factor), and wrong values a named factor away from nothing accepted, at the same distances."""
    reference = float(q.reference)
    sign = -1.0 if reference < 0 else 1.0
    lo, hi = sorted(abs(x) for x in q.tolerance.bounds(reference))
    window = pin(reference, q.unit)
    inside = [float(f"{abs(reference):.2g}"), hi - (hi - lo) * 1e-3]  # the reference to 2 figures, or an end
    unpinned = [a for a in inside if lo <= a <= hi and (window is None or abs(a / abs(reference) - 1) > 1.01 * window)]
    named = {sign * a * k for a in unpinned[:1] for k in _factors(q)} | {sign * g for g in _leading(q)}
    named = {v for v in named if _clear(q, v) and _named_away(q, v)}
    other = {sign * abs(reference) * k * OFF[i % 2] for i, k in enumerate(_factors(q))} | {0.0}
    other = {v for v in other if _clear(q, v) and not _named_away(q, v)}
    return sorted(named), sorted(other)


def told_apart(items: list[Dealt]) -> list[str]:
    out = []
    for d in items:
        q = d.question
        if not float(q.reference) or not _is_simple(q):
            continue
        named, other = kinds_of_wrong(q)
        fp = fingerprint.make(q)
        for name, judge in (("grader", functools.partial(kinds.judge, q)),
                            ("self-check", functools.partial(fingerprint.selfcheck, fp, q.qid))):
            replies: dict[tuple[str, str], float] = {}
            for value in named + other:
                v = judge(value)
                replies.setdefault((v.diagnosis, v.message), value)
            if len(replies) > 1:
                said = "; ".join(f"{x:g} -> {code}: {message!r}" for (code, message), x in list(replies.items())[:4])
                out.append(f"{q.qid} [{d.choice}] {name}: {said}")
    return out


@pytest.mark.parametrize("chapter", chapter_names())
def test_a_simple_questions_wrong_values_read_alike(chapter):
    leaks = told_apart(_played().get(chapter, []))
    assert not leaks, (f"{len(leaks)} simple question(s) tell a value a named factor away from the answer from "
                       "another wrong value, by sentence or code (one call then says whether guess / answer is a "
                       "named factor):\n" + "\n".join(leaks[:20]))


def _reply(v: Verdict) -> tuple[str, str]:
    """What a student reads of a verdict: its code and its sentence (a declared slip's hint left aside: the attacker
    cannot foresee slips)."""
    return v.diagnosis, v.message.split(" Hint: ")[0]


def _granted(reply: tuple[str, str], ok: bool) -> tuple[str, str]:
    """What the self-check grants to say (docs/security.md): right, the "close" band as it is worded, else wrong."""
    return ("correct", "") if ok else reply if reply[0] == "close" else ("wrong", "")


def _model(q: Number):
    """The reply (right, and what a student reads) to guess g where the answer is c, in a question of q's unit and
    tolerance: what the attacker expects, shared by its searches of q."""
    return functools.cache(lambda g, c: (lambda v: (v.ok, _reply(v)))(
        kinds.number.check("attacker", c, q.unit, q.tolerance, g, typed=True)))


def search_calls(q: Number, judge, granted_only: bool, model=None) -> int | None:
    """Calls an attacker needs to find a simple answer: it guesses the simple numbers of the answer's decade (which
    the question's hint names), the unworked ones first, each time the first still consistent with every reply (a
    candidate is consistent where a question of the same unit and tolerance whose answer it is gives the same reply;
    a reply no candidate gives, such as a slip's, rules out only the guess). ``granted_only``: the replies as the
    self-check grants them to differ (``_granted``). None where no candidate is right."""
    reference = float(q.reference)
    sign = -1.0 if reference < 0 else 1.0
    k = math.floor(math.log10(abs(reference)))
    first = {mantissa(g) for g in UNWORKED if g > 0}
    ms = sorted({round(m, 9) for m in simple_mantissas(q.unit) if 1 <= m < 10}, key=lambda m: (m not in first, m))
    candidates = [sign * m * 10.0**k for m in ms]
    if not any(judge(c).ok for c in candidates):
        return None
    model = model or _model(q)
    calls = 0
    while candidates:
        g = candidates[0]
        v = judge(g)
        calls += 1
        if v.ok:
            return calls
        said = _granted(_reply(v), False) if granted_only else _reply(v)
        keep = [c for c in candidates[1:]
                if (_granted(model(g, c)[1], model(g, c)[0]) if granted_only else model(g, c)[1]) == said]
        candidates = keep or candidates[1:]
    return None


def faster_searches(items: list[Dealt]) -> list[str]:
    out = []
    for d in items:
        q = d.question
        if d.choice != "book" or not float(q.reference) or q.tolerance.is_range or not _is_simple(q):
            continue
        fp, model = fingerprint.make(q), _model(q)
        for name, judge in (("grader", functools.partial(kinds.judge, q)),
                            ("self-check", functools.partial(fingerprint.selfcheck, fp, q.qid))):
            granted = search_calls(q, judge, granted_only=True, model=model)
            found = search_calls(q, judge, granted_only=False, model=model)
            if granted is not None and found is not None and found < granted:
                out.append(f"{q.qid} {name}: {found} calls reading every reply, {granted} with right, close or wrong")
    return out


@pytest.mark.parametrize("chapter", chapter_names())
def test_reading_every_reply_finds_a_simple_answer_no_faster(chapter):
    """The replies to wrong values of a simple question tell no more than right, close or wrong: an attacker who
    reads every reply needs as many calls as one told only those."""
    faster = faster_searches(_played().get(chapter, []))
    assert not faster, f"{len(faster)} simple answer(s) found faster by reading the replies:\n" + "\n".join(faster)
