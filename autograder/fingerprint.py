"""Self-check data: what a release notebook needs to say "off by a factor of 2" offline, without
containing the answer in plain text. Made at release (``make_chapter``), read by ``course.check``.

How each kind is fingerprinted, and judged against its fingerprint, lives in ``autograder/kinds``
beside the grader's own judging of that kind: both share one diagnosis.
"""

from __future__ import annotations

from typing import Any

from .kinds import make_print as make
from .kinds import selfcheck
from .questions import Chapter

FORMAT = 2  # of the chapter files in course/fingerprints/


def make_chapter(chapter: Chapter) -> dict[str, Any]:
    return {"chapter": chapter.name, "title": chapter.title, "format": FORMAT,
            "questions": {q.qid: make(q) for q in chapter.questions}}


__all__ = ["make", "make_chapter", "selfcheck"]
