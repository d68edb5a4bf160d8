"""One module per answer kind, and the one table that chooses between them.

Each kind module holds, in one place, how its answers are judged against the reference by the grader
(``judge``), how the self-check data is made at release (``make_print``) and how the self-check
judges against that data (``selfcheck``). Where both judges diagnose, they share one ``diagnose``
that asks its questions of an oracle: exact in the grader, from hashes in the self-check.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..questions import Question
from ..verdict import Status, Verdict
from . import choice, formula, function, number, program

KINDS: dict[str, ModuleType] = {"formula": formula, "number": number, "choice": choice,
                                "function": function, "program": program}


def judge(q: Question, answer: Any) -> Verdict:
    """The grader's verdict on one recorded answer."""
    return KINDS[q.kind].judge(q, answer)


def make_print(q: Question) -> dict[str, Any]:
    """The self-check data of one question (no answer in plain text)."""
    from ..hints import hint_for

    base = {"kind": q.kind, "points": q.points, "prompt": q.prompt, "url": q.url, "hint": hint_for(q)}
    return base | KINDS[q.kind].make_print(q)


def selfcheck(fp: dict[str, Any], qid: str, answer: Any) -> Verdict:
    """The self-check's verdict on an answer, from the question's self-check data."""
    kind = KINDS.get(fp.get("kind", ""))
    if kind is None:
        return Verdict(Status.INVALID, 0.0, "unknown_kind",
                       f"This course version cannot check {fp.get('kind')!r} answers.")
    return kind.selfcheck(fp, qid, answer)
