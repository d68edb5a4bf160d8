"""Bounded judging: the stated cost one answer may take to judge, in the grader and in the self-check.

The parsers cap what an answer may contain, but not every cost within the caps: a right formula plus a
padding term that adds zero (``0*Max(...)`` of sixteen arguments) costs half a second instead of a
millisecond, and varying the padding defeats the grader's memo. So judging an answer runs under two
interval timers, one on CPU time and one on wall time. Their handler raises ``TooExpensive``, a
``BaseException``: an ``except Exception`` deep in the judging code (one that guards against hostile
objects, say) cannot swallow it and run on, as it could a ``TimeoutError`` from ``signal.alarm``.

Nothing can catch the bound for good: until the block has ended, it runs out again every ``REFIRE_SECONDS``
(a bare ``except:``, as mpmath has on the judging path, would otherwise swallow the one exception and run
on). Python cannot raise out of a ``__del__``, a weakref callback or a garbage collector's callback: a bound that
runs out in one of those is reported as "unraisable" and dropped. The block's own hook on unraisable
exceptions sees it dropped and sets the bound to run out again at once, so that it stops the block all the same.

Signals reach only the main thread of a POSIX process; elsewhere (a self-check run from a thread, or on
Windows) the block runs without a bound.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# Measured over every question's reference, rewrites and slips: most answers cost milliseconds to judge.
# The slowest honest ones are wrong arrays returned by a function answer, each element judged as a
# number of its own: 3 s of CPU at most (ch04-cx3's flash attention, 928 wrong elements, on 2 shared
# cores), in the grader and in the self-check alike. The bound leaves three times that,
# for a slower machine (a student's laptop, a shared grader); the wall bound twice the
# CPU bound, for a grader whose workers share its cores. A right formula padded to cost the most the
# parsers let through costs 0.5 s; a function answer whose every returned formula is so padded, 2 s.
ANSWER_CPU_SECONDS = 10.0
ANSWER_WALL_SECONDS = 20.0
# All of one notebook's answers (wall time): at most 2.7 s for an honest notebook (the slowest honest
# answer to every question of the slowest chapter), 6 to 10 s for a chapter of padded formulas. Past it, the
# answers not yet judged are "too expensive" too, so that expensive answers cannot multiply the cost of
# a notebook: one costs at most this, where it could cost its answers times the bound on one answer.
NOTEBOOK_SECONDS = 20.0

# After a bound has run out: how soon it runs out again, should that exception not have ended the block. Far longer
# than an exception takes to leave it, so that a second one does not land in the first one's way out.
REFIRE_SECONDS = 1.0

_SIGNALS = ((signal.ITIMER_PROF, signal.SIGPROF), (signal.ITIMER_REAL, signal.SIGALRM)) \
    if hasattr(signal, "setitimer") else ()


class TooExpensive(BaseException):
    """Judging an answer ran past its bound."""


def available() -> bool:
    """Can this thread bound a block? (Only the main thread of a POSIX process takes signals.)"""
    return bool(_SIGNALS) and threading.current_thread() is threading.main_thread()


@contextmanager
def bounded(cpu: float | None = None, wall: float | None = None) -> Iterator[bool]:
    """Raise ``TooExpensive`` in the block once it has used ``cpu`` seconds of CPU (the whole process's,
    its threads included) or ``wall`` seconds, by default the bounds on one answer; yields whether a bound
    is in force. The handlers and timers in place before (a profiler's, a test's alarm) are restored
    after, the timers less the time spent."""
    cpu = ANSWER_CPU_SECONDS if cpu is None else cpu
    wall = ANSWER_WALL_SECONDS if wall is None else wall
    if not available():
        yield False
        return
    armed = [True]

    def expired(signum: int, frame: object) -> None:
        if armed[0]:  # the block has not ended
            signal.setitimer(signal.ITIMER_PROF, 0)  # from now on one timer, the wall's, runs out again
            signal.setitimer(signal.ITIMER_REAL, REFIRE_SECONDS)
            raise TooExpensive

    hook = sys.unraisablehook

    def dropped(unraisable: sys.UnraisableHookArgs) -> None:
        if hook_live[0] and issubclass(unraisable.exc_type, TooExpensive):
            armed[0] = True  # where Python could not raise it: again, as soon as it can
            signal.setitimer(signal.ITIMER_REAL, 1e-3)
        else:
            hook(unraisable)

    hook_live = [True]
    sys.unraisablehook = dropped
    started = {signal.ITIMER_PROF: time.process_time(), signal.ITIMER_REAL: time.monotonic()}
    before = {sig: signal.signal(sig, expired) for _, sig in _SIGNALS}
    timers = {which: signal.setitimer(which, max(limit, 1e-3))
              for (which, _), limit in zip(_SIGNALS, (cpu, wall), strict=True)}
    try:
        yield True
    finally:
        hook_live[0] = False
        try:
            _restore(armed, before, timers, started)
        except TooExpensive:  # the bound ran out as the block ended; the next is REFIRE_SECONDS away
            _restore(armed, before, timers, started)
        if sys.unraisablehook is dropped:
            sys.unraisablehook = hook


def _restore(armed: list[bool], before: dict, timers: dict, started: dict) -> None:
    armed[0] = False
    for which in timers:
        signal.setitimer(which, 0)
    for sig, handler in before.items():
        if handler is not None:  # None: set outside Python, and not restorable; ours, disarmed, does nothing
            signal.signal(sig, handler)
    now = {signal.ITIMER_PROF: time.process_time(), signal.ITIMER_REAL: time.monotonic()}
    for which, (delay, interval) in timers.items():
        if delay > 0:
            signal.setitimer(which, max(delay - (now[which] - started[which]), 1e-3), interval)
