"""Self-check data: what a release notebook needs to say "off by a factor of 2" offline, without
containing the answer in plain text. Made at release (``make_chapter``), read by ``course.check``.

How each kind is fingerprinted, and judged against its fingerprint, lives in ``autograder/kinds``
beside the grader's own judging of that kind: both share one diagnosis.

A question built by a setting (``variants.py``) carries the data of every choice its students can be
dealt, each as what it changes in the book's (``variants.diff``), and the chapter carries the plan
the kernel deals from: the course id, whether variants are on, and each setting's choices.
"""

from __future__ import annotations

from typing import Any

from .course_config import VariantPlan
from .kinds import make_print as make
from .kinds import selfcheck
from .questions import Chapter
from .variants import diff, settings_block

FORMAT = 3  # of the chapter files in course/fingerprints/


def make_chapter(chapter: Chapter, plan: VariantPlan | None = None) -> dict[str, Any]:
    plan = plan or VariantPlan()
    questions = {q.qid: make(q) for q in chapter.questions}
    block = settings_block(chapter.settings, plan.allowed)
    for s in chapter.settings:
        changes: dict[str, list[dict[str, Any]]] = {qid: [] for qid in s.qids}
        for labels in block["settings"][s.name]["combos"]:
            for q in s.questions(labels):
                changes[q.qid].append(diff(questions[q.qid], make(q)))
        for qid, variants in changes.items():
            questions[qid] = {**questions[qid], "setting": s.name, "variants": variants}
    return {"chapter": chapter.name, "title": chapter.title, "format": FORMAT,
            "variants": {**plan.to_json(), **block}, "questions": questions}


__all__ = ["make", "make_chapter", "selfcheck"]
