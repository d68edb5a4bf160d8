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

import re
from collections.abc import Iterator

import pytest

from autograder import kinds
from autograder.questions import Number, Question
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


def test_no_question_accepts_the_size_in_a_models_name():
    leaks = name_size_leaks()
    assert not leaks, (f"{len(leaks)} question(s) accept the size in a model's name as its count: ask for "
                       "more figures (and say so in the prompt) and add a hinted slip at that size:\n"
                       + "\n".join(leaks))


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
