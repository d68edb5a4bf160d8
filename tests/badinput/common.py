"""What every verdict on bad input must satisfy, shared by the bad-input properties."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from sympy.core.cache import clear_cache

from autograder import messages
from autograder.formula import Invalid
from autograder.messages import phrase, phrase_invalid
from autograder.verdict import Status, Verdict

# One call of a parser, a checker or the self-check. The parser caps what it builds (MAX_CHARS,
# MAX_NODES, MAX_DEPTH, literal and exponent sizes), so every call stays well below this; the
# margin is for a loaded machine.
LIMIT_S = 2.0
STOP_S = 5 * LIMIT_S  # a call still running then (wall clock) is stopped, so that a hang fails like any counterexample

# The words with which a sentence tells the student what to do ("too large to check" is no instruction).
INSTRUCTION = re.compile(r"\b(use|write|give|choose|expected|replace|simplify|call|check (for|the|which)|drop|"
                         r"must be|asks for|allowed)\b", re.IGNORECASE)

# A template field left unfilled, such as {names} or {unit_examples}.
PLACEHOLDER = re.compile(r"\{[a-z_]+\}")
INVALID_CODES = frozenset(messages._INVALID) - {"no_record"}  # no_record: the grader's, when a cell did not run


def timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, which must return within LIMIT_S of CPU time (a loaded machine stretches wall
    time alone), and is stopped at STOP_S of wall time."""
    name = getattr(call, "__name__", repr(call))

    def interrupt(signum: int, frame: object) -> None:
        raise AssertionError(f"{name} still running after {STOP_S} s")

    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if alarm:
        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, STOP_S)
    clear_cache()  # time it cold, as a student's first answer is, and the same on every replay
    start = time.process_time()
    try:
        result = call(*args, **kwargs)
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    elapsed = time.process_time() - start
    assert elapsed < LIMIT_S, f"{name} took {elapsed:.2f} s"
    return result


def stray_placeholders(message: str, inv: Invalid) -> list[str]:
    """Unfilled template fields in ``message``. The message may quote the student's text, in the
    detail ("'{' was never closed") and on the echo line under it; a field-like token that occurs in
    the student's own text is theirs, not a template's."""
    own = (inv.text, inv.detail)
    return [m.group() for m in PLACEHOLDER.finditer(message) if not any(m.group() in s for s in own)]


def assert_sound(v: Verdict) -> None:
    """A verdict of any status: a known status, a score that fits it, a code and a sentence."""
    assert isinstance(v, Verdict) and v.status in set(Status), v
    assert isinstance(v.score, float) and 0.0 <= v.score <= 1.0, v
    assert isinstance(v.diagnosis, str) and v.diagnosis, v
    assert isinstance(v.message, str) and v.message.strip(), v
    if v.status is Status.CORRECT:
        assert v.score == 1.0, v
    if v.status in (Status.INCORRECT, Status.INVALID):
        assert v.score == 0.0, v
    if v.status is Status.PARTIAL:
        assert 0.0 < v.score < 1.0, v


def assert_invalid(v: Verdict, inv: Invalid, **ctx: object) -> None:
    """``v`` reports the parser's rejection ``inv``: no credit, the parser's code, and the sentence for
    that code, which says what to type instead."""
    assert_sound(v)
    assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, inv.code), (v, inv)
    assert inv.code in INVALID_CODES, inv
    assert v.message == phrase_invalid(inv, **ctx), (v.message, inv)
    assert not stray_placeholders(v.message, inv), v.message
    # What the engine says in its own words, with the student's text left out of it.
    own_words = phrase(inv.code, **{**ctx, "detail": ""})
    assert INSTRUCTION.search(own_words), f"{inv.code}: {own_words!r} does not say what to type"


def assert_as_parsed(v: Verdict, got: object, **ctx: object) -> None:
    """``v`` is INVALID exactly when the parser rejected the answer (``got`` an Invalid)."""
    if isinstance(got, Invalid):
        assert_invalid(v, got, **ctx)
    else:
        assert_judged(v)


def assert_judged(v: Verdict) -> None:
    """``v`` judges an answer the parser read: right, partly right or wrong, never unreadable."""
    assert_sound(v)
    assert v.status is not Status.INVALID, v
    assert v.diagnosis not in INVALID_CODES, v
