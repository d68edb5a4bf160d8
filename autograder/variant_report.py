"""``scaling-course variant``: one student's values and reference answers, for office hours.

Dealt as the release and the grader deal them (the records, under the course's variant plan in
``nbgrader_config.py``), so what it prints is what the student's notebook shows and what they are
graded against. The answers are the references of the student's own records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .course_config import variant_plan
from .questions import Question, chapter_names, load_chapter
from .variants import dealt, settings_block


def _answer(q: Question) -> Any:
    if q.kind == "number":
        return float(q.reference)
    if q.kind == "choice":
        return q.reference
    if q.kind == "formula":
        return str(q.reference)
    return None  # a function or a program: its answer is code, in the records' model


def student_answers(course_dir: Path, assignment: str, student: str) -> dict[str, Any]:
    """``{"assignment", "student", "enabled", "setting", "parameters", "answers"}``: ``setting`` by setting
    name, ``parameters`` by question id (empty for a question every student shares), ``answers`` a number,
    an option or a formula's text for each question that has one."""
    if assignment not in chapter_names():
        raise KeyError(f"no chapter {assignment!r}; chapters: {', '.join(chapter_names())}")
    plan = variant_plan(course_dir, assignment)
    book = load_chapter(assignment)
    released = {"chapter": assignment, "variants": {**plan.to_json(), **settings_block(book.settings, plan.allowed)}}
    setting = dealt(released, student)
    chapter = book.variant(setting)
    parameters = {}
    for q in chapter.questions:
        s = chapter.setting_of(q.qid)
        parameters[q.qid] = dict(setting[s.name]) if s is not None else {}
    answers = {q.qid: a for q in chapter.questions if (a := _answer(q)) is not None}
    return {"assignment": assignment, "student": student, "enabled": plan.enabled, "setting": setting,
            "parameters": parameters, "answers": answers}
