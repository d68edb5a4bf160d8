"""Copied values: wrong numbers that are right at a classmate's values, named for the staff.

Variants deal each student their own values (variants.py), so a number typed from a classmate's notebook is wrong
at the student's own. It is wrong in a telling way: it is the reference at the classmate's values. ``copies.py``
finds cells written alike; a number copied by hand, or read off a classmate's screen, is found here:

    judge   -> in the judging process, each wrong answer to a number question of a setting is read once and held
               against that question's reference at every other choice of the setting's values, the book's and
               the student's own left out (the book's is public and said to the student: ``kinds.at_book``);
               the choices it is right at are kept with the verdict (``right_elsewhere``) and stored with the
               result, never shown to the student
    report  -> after every run, from every stored result of the assignment whose submission is still there (as
               grades.csv counts them): a student is named beside the classmates whose values make at least
               MIN_ANSWERS of the student's wrong answers right, of MIN_SETTINGS settings or more, where those
               values differ from the student's own (``report``)

One answer right at other values happens by chance: a slip of a factor of 2 at a batch of 40M is the answer at a
batch of 20M, and in a class of hundreds some classmate holds those values. So do the answers of one setting
together: they share its inputs, and one input misread (the book's sequence length for the dealt one) makes each of
them right at another choice. Answers of two settings or more, at the values one classmate holds, are rarer; a
notebook whose wrong answers follow a classmate's values across settings is worth a look.
Like ``copies``, a hint for a person, never a verdict: no grade, gradebook entry or feedback changes, and the
classmates named are those who hold the values (the one copied from is among them, or the values came from
elsewhere).

The cost: a wrong answer is read once and compared with each other choice's reference (a float comparison; the
number's full judge only where that comparison accepts it); the records of a setting's choices are built once per
judging process (1,033 choices in the course, 0 to 90 ms a setting).
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from . import STATE
from .console import printable
from .feedback import write_atomic
from .results import handed_in_results

if TYPE_CHECKING:
    from pathlib import Path

    from ..variants import Setting
    from .pipeline import Assignment

KEY = "right_at"  # in a verdict's data, and a stored question's entry: {"setting": name, "values": [labels, ...]}
MIN_ANSWERS = 2  # wrong answers right at one classmate's values, at least: one is often chance
# ... of this many settings at least: a setting's answers share its inputs, so one misread input (the book's
# sequence length for the dealt one, a chip's row for another's) makes each of them right at another choice.
MIN_SETTINGS = 2
SHOWN = 10  # students named in the summary, and classmates in a line; the file has every one
ANSWERS_SHOWN = 4  # answers named in a line
KEPT = 8  # choices kept per answer: a number right at more is one that says little (a ratio the values leave alone)

_built: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}  # setting -> [(labels, {qid: record})]


def _choices(s: Setting) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every choice of the setting's values with its records, the book's left out; built once per process."""
    if s.name not in _built:
        book = s.labels(s.book)
        built = [(s.labels(c), {q.qid: q for q in s.records(c)}) for c in s.combos()]
        _built[s.name] = [(labels, qs) for labels, qs in built if labels != book]
    return _built[s.name]


def right_elsewhere(s: Setting, qid: str, answer: Any, own: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The choices of ``s``'s values (labels), other than the book's and ``own`` (the student's), at which the number
    ``answer`` to ``qid`` is right. None of them where it is not a number."""
    from ..kinds import number
    from ..numbers import Invalid

    try:
        p = number.read(answer, next(q for q in s.questions() if q.qid == qid).unit)
        if isinstance(p, Invalid):
            return []
        out = []
        for labels, qs in _choices(s):
            q = qs[qid]
            if labels != own and q.tolerance.accepts(float(q.reference), p.value) and number.judge(q, answer).ok:
                out.append(labels)
        return out[:KEPT]
    except Exception:  # a note for the staff: nothing here may change a verdict or stop a notebook's judging
        return []


def _results(a: Assignment) -> list[dict[str, Any]]:
    """Every stored result of ``a`` with a setting, of a submission still handed in, as grades.csv counts them (a
    result the grader failed on counts: its numbers were judged)."""
    return [r for r in handed_in_results(a) if isinstance(r.get("setting"), dict)
            and isinstance(r.get("questions"), dict)]


def _right_at(result: dict[str, Any]) -> list[tuple[str, str, list[Any]]]:
    """(question, setting, the values it is right at) for each of a result's answers that ``right_elsewhere``
    found right at other values."""
    out = []
    for qid, q in result["questions"].items():
        found = q.get(KEY) if isinstance(q, dict) else None
        if isinstance(found, dict) and isinstance(found.get("setting"), str) and isinstance(found.get("values"), list):
            out.append((qid, found["setting"], [_same(v) for v in found["values"]]))
    return out


def _same(labels: Any) -> str:
    return json.dumps(labels, sort_keys=True, default=str)


Found = tuple[str, tuple[str, ...], tuple[str, ...]]  # (student, their answers right at the values, classmates)


def find(a: Assignment) -> list[Found]:
    """Each student whose wrong answers are right at a classmate's values (MIN_ANSWERS or more, of MIN_SETTINGS
    settings or more, none of them the student's own values), with those answers and the classmates who hold the
    values of the most of them."""
    results = _results(a)
    held = {r["student"]: {name: _same(v) for name, v in r["setting"].items()} for r in results}
    found = []
    for r in results:
        me, answers = r["student"], _right_at(r)
        if len(answers) < MIN_ANSWERS:
            continue
        by: dict[tuple[str, ...], list[str]] = {}
        for other, values in held.items():
            matched = [(qid, setting) for qid, setting, right in answers
                       if setting in values and values[setting] in right and values[setting] != held[me].get(setting)]
            if other != me and len(matched) >= MIN_ANSWERS and len({s for _, s in matched}) >= MIN_SETTINGS:
                by.setdefault(tuple(qid for qid, _ in matched), []).append(other)
        if by:  # the classmates whose values make the most of the answers right (the fewest such, of equals)
            matched, classmates = max(by.items(), key=lambda kv: (len(kv[0]), -len(kv[1])))
            found.append((me, matched, tuple(sorted(classmates))))
    return found


def path(a: Assignment) -> Path:
    return a.course_dir / STATE / "copies" / f"{a.name}-values.csv"


def write(a: Assignment, found: list[Found]) -> Path:
    """The staff's file: a row per student named (a header alone where none is), rewritten each run."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student", "answers_right_at_other_values", "classmates_holding_those_values"])
    for student, answers, classmates in found:
        w.writerow([student, "; ".join(answers), "; ".join(classmates)])
    write_atomic(path(a), buf.getvalue())
    return path(a)


def _listed(names: tuple[str, ...], shown: int = SHOWN) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(printable(s) for s in names[:shown]) + more


def report(a: Assignment) -> list[str]:
    """What the run's summary says of copied values: nothing where no student is named, else a header and a line
    per student. The file is written either way; nothing here may stop what was graded."""
    try:
        found = find(a)
        where = write(a, found).relative_to(a.course_dir)
    except Exception as e:
        return [f"Copied values of {a.name}: not checked ({type(e).__name__}: {printable(str(e))[:200]})"]
    if not found:
        return []
    more = f"; {len(found) - SHOWN} more there" if len(found) > SHOWN else ""
    return [f"Wrong numbers of {a.name} that are right at a classmate's values, not the student's own (a hint to "
            f"look at, not a verdict: no grade or feedback was changed; each student in {where}{more}):",
            *(f"  {printable(s)}: {len(answers)} answers ({_listed(answers, ANSWERS_SHOWN)}) right at the values of "
              f"{_listed(classmates)}" for s, answers, classmates in found[:SHOWN])]
