"""The judging service: a class's repeated answers are judged once, with the same verdict, and judging
one answer, or one notebook's answers, has a stated bound."""

from __future__ import annotations

import contextlib
import gc
import random
import signal
import time
import weakref

import pytest

import autograder.checks
import autograder.kinds.formula as formula_kind
from autograder import bounds
from autograder.formula import to_text
from autograder.grading import judge
from autograder.questions import load_chapter

MATH, COMMS = "ch01-e4-t-math", "ch01-e4-t-comms"


def _request(answers: dict[str, object], course: str, chapter: str = "ch01_rooflines") -> dict:
    return {"chapter": chapter, "course_dir": course, "items": [{"qid": q, "answer": a} for q, a in answers.items()]}


@pytest.fixture
def course(tmp_path) -> str:
    """A course directory of the test's own: verdicts are remembered per course, so none that another
    test was given is reused here. It holds no solutions of its own: the installed ones are judged."""
    return str(tmp_path)


def test_a_repeated_answer_is_judged_once_with_the_same_verdict(course, asked):
    first = judge.handle(_request({MATH: "B*D*F/C", COMMS: "B*F/W_link"}, course))
    assert first[MATH]["status"] == "correct"
    assert first[COMMS]["diagnosis"] == "ratio:1/2"  # a factor of 2 short
    again = judge.handle(_request({MATH: "B*D*F/C", COMMS: "2*B*F/W_link"}, course))
    assert again[MATH] == first[MATH]
    assert again[COMMS]["status"] == "correct"  # a different answer is judged afresh
    assert asked == {(MATH, "B*D*F/C"): 1, (COMMS, "B*F/W_link"): 1, (COMMS, "2*B*F/W_link"): 1}


def test_verdicts_that_depend_on_load_are_not_remembered(monkeypatch, course, asked):
    """A "too expensive" verdict depends on the machine's load: the same answer sent again is judged again."""
    from autograder.verdict import Status, Verdict

    with monkeypatch.context() as m:
        m.setattr(autograder.checks, "judge", lambda q, a, *args, **kw: Verdict(
            Status.INVALID, 0.0, "too_expensive", "Checking this answer took too long."))
        first = judge.handle(_request({MATH: "B*D*F/C"}, course))
    assert first[MATH]["diagnosis"] == "too_expensive"
    again = judge.handle(_request({MATH: "B*D*F/C"}, course))
    assert again[MATH]["status"] == "correct"
    assert asked == {(MATH, "B*D*F/C"): 1}


# --- the bounds on judging (autograder/bounds.py) ----------------------------------------------------

SLOW_S = 20  # how long the simulated expensive judging runs when nothing stops it


def _swallowing(monkeypatch, step):
    """Judging of a formula that runs on for SLOW_S seconds and swallows every Exception on the way, as a
    broad ``except Exception`` deep in the judging code would a TimeoutError from ``signal.alarm``."""
    real = formula_kind.diagnose

    def slow(e, p):
        end = time.monotonic() + SLOW_S
        while time.monotonic() < end:
            try:
                step()
            except Exception:  # the swallowing: a TimeoutError would end here, and the loop go on
                continue
        return real(e, p)

    monkeypatch.setattr(formula_kind, "diagnose", slow)


def _spin():
    sum(i * i for i in range(10_000))


def _nap():
    time.sleep(0.01)


def _padded(q, seed: int) -> str:
    """The reference plus a term that adds zero but costs sympy about half a second to build: the max of
    sixteen differences of roots, whose signs it compares pairwise. The seed varies the padding, which
    defeats the memo."""
    rng = random.Random(seed)
    ref = to_text(formula_kind.parse_known(q.names, q.reference).expr)

    def term():
        a, b, c = (rng.choice(q.names) for _ in range(3))
        return f"{a}**(1/{rng.randint(2, 9)})-{b}*{c}**(1/{rng.randint(2, 9)})"
    return f"{ref} + 0*Max({','.join(term() for _ in range(16))})"


def _assert_no_timer_left(alarm_handler):
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is alarm_handler


@pytest.mark.parametrize("step", [_spin, _nap], ids=["cpu", "wall"])
def test_judging_that_swallows_exceptions_still_stops_at_the_bound(monkeypatch, course, step):
    """Before the bounds, the alarm's TimeoutError was an Exception: the loop above swallowed it and ran
    its full 20 s, and the answer was judged correct. (Bounds of 1 and 2 s here, to wait less.)"""
    judge.handle(_request({MATH: "2*B*D*F/C"}, course))  # the chapter loaded before the clock starts
    monkeypatch.setattr(bounds, "ANSWER_CPU_SECONDS", 1.0)
    monkeypatch.setattr(bounds, "ANSWER_WALL_SECONDS", 2.0)
    _swallowing(monkeypatch, step)
    handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    v = judge.handle(_request({MATH: "B*D*F/C"}, course))[MATH]
    elapsed = time.monotonic() - started
    assert (v["status"], v["diagnosis"]) == ("invalid", "too_expensive"), v
    assert "1 s of computing (2 s in all)" in v["message"]  # the bound, stated
    assert elapsed < bounds.ANSWER_WALL_SECONDS + 1.0
    _assert_no_timer_left(handler)


def _slow_del():
    class Dropped:
        def __del__(self):
            _busy(0.5)
    Dropped()  # dropped at once: its __del__ runs here


def _slow_finalizer():
    class Held:
        pass
    held = Held()
    weakref.finalize(held, _busy, 0.5)
    del held  # the finalizer runs as a weakref callback


def _slow_gc_callback():
    def callback(phase, info):
        if phase == "start":
            _busy(0.5)
    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)


def _bare_except():
    with contextlib.suppress(BaseException):  # as a library's bare except would (mpmath has some on the judging path)
        _busy(0.5)


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.parametrize("where", [_slow_del, _slow_finalizer, _slow_gc_callback, _bare_except],
                         ids=["del", "finalizer", "gc", "bare-except"])
def test_a_bound_that_is_swallowed_once_still_stops_the_block(where):
    """Python cannot raise out of a ``__del__``, a weakref callback or a garbage-collector callback: an
    exception there is reported and dropped (as it was, once, judging a padded formula, in sympy's caches); a
    bare ``except:`` drops it too. The bound was spent there, and the block ran on unbounded. It runs out again
    until it stops the block."""
    handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(bounds.TooExpensive), bounds.bounded(cpu=10.0, wall=0.1):
        where()  # the bound runs out in here, and is dropped
        _busy(SLOW_S)
    assert time.monotonic() - started < 5.0
    _assert_no_timer_left(handler)


def test_a_notebook_of_padded_answers_costs_at_most_its_budget(monkeypatch, course):
    """Each padded answer is right and costs about 0.3 s instead of a few milliseconds; a chapter's worth
    took 6 to 10 s before the budget. Past the budget (three padded answers' worth, as this machine judges them
    now, so that one chapter overruns it and the first answers fit on a loaded machine too), the answers left are
    too expensive too; the process then judges honest answers as before, under the default budget."""
    chapter = "ch04_transformers"
    qs = [q for q in load_chapter(chapter).questions if q.kind == "formula" and len(q.names) >= 2]
    assert len(qs) >= 15
    started = time.monotonic()
    alone = judge.handle(_request({qs[0].qid: _padded(qs[0], len(qs))}, course, chapter))
    one = time.monotonic() - started
    assert alone[qs[0].qid]["status"] == "correct", alone
    budget, defaults = 3 * one, (bounds.NOTEBOOK_SECONDS, bounds.ANSWER_CPU_SECONDS)
    monkeypatch.setattr(bounds, "NOTEBOOK_SECONDS", budget)
    monkeypatch.setattr(bounds, "ANSWER_CPU_SECONDS", 1.0)
    handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    out = judge.handle(_request({q.qid: _padded(q, i) for i, q in enumerate(qs)}, course, chapter))
    elapsed = time.monotonic() - started
    assert elapsed < budget + max(1.0, one)
    diagnoses = [out[q.qid]["diagnosis"] for q in qs]
    assert set(diagnoses) == {"correct", "too_expensive"}, diagnoses
    first = diagnoses.index("too_expensive")
    assert all(d == "too_expensive" for d in diagnoses[first:]), diagnoses  # the budget is spent: none after
    assert f"{bounds.NOTEBOOK_SECONDS:g} s" in out[qs[-1].qid]["message"]
    _assert_no_timer_left(handler)
    bounds.NOTEBOOK_SECONDS, bounds.ANSWER_CPU_SECONDS = defaults
    honest = judge.handle(_request({q.qid: str(q.reference) for q in qs}, course, chapter))
    assert all(v["status"] == "correct" for v in honest.values()), honest


def test_respaced_copies_of_an_answer_are_judged_once(course, asked):
    first = judge.handle(_request({MATH: "B*D*F/C"}, course))
    again = judge.handle(_request({MATH: " B*D*F/C\t "}, course))
    spaced = judge.handle(_request({MATH: "B * D * F / C"}, course))
    assert again == first and spaced[MATH]["status"] == "correct"
    assert asked == {(MATH, "B*D*F/C"): 1, (MATH, "B * D * F / C"): 1}


def test_off_the_main_thread_judging_runs_without_a_bound():
    """Only the main thread takes signals: elsewhere the block runs as it is, and no timer is set."""
    import threading

    seen = []

    def run():
        with bounds.bounded(0.01, 0.01) as bound:
            time.sleep(0.05)
            seen.append((bound, signal.getitimer(signal.ITIMER_REAL)))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [(False, (0.0, 0.0))]


def test_a_remembered_verdict_is_never_given_to_a_student_with_other_values(course):
    """Two students of one class give the same number for E3, right for the first one's chip: the second,
    dealt another chip, must not inherit the first one's "correct" from the memo (it is keyed by values)."""
    qid = "ch01-e3-critical-batch"
    chapter = load_chapter("ch01_rooflines")
    mine, theirs = {"ch01-e3": {"chip": "TPU v5p"}}, {"ch01-e3": {"chip": "TPU v6e"}}
    answer = chapter.variant(mine)[qid].reference
    first = judge.handle({**_request({qid: answer}, course), "setting": mine})
    second = judge.handle({**_request({qid: answer}, course), "setting": theirs})
    assert first[qid]["status"] == "correct"
    assert second[qid]["status"] != "correct", second[qid]


def test_drawing_the_cases_survives_a_judging_process_that_died(tmp_path, monkeypatch):
    """A judging process that dies while it draws a submission's cases (killed, out of memory) is replaced
    once, not reported as a broken grading run; one that answers, even with an error, is believed."""
    from autograder.grading.service import Service

    if judge._judge is not None:
        judge._judge.close()
    judge._judge = None
    real, calls = Service.request, []

    def dies_once(self, payload, timeout):
        calls.append(payload.get("draw"))
        if len(calls) == 1:
            self.close()  # what request() does when the process died before it replied
            return None
        return real(self, payload, timeout)

    monkeypatch.setattr(Service, "request", dies_once)
    assert judge.draw_cases("ch01_rooflines", tmp_path, "seed-a")
    assert calls == [True, True]
    judge._judge.close()
    judge._judge = None
