"""Feedback: the graded notebook annotated with verdicts, and the student's HTML report.

Each test cell's outputs are replaced by the grader's verdict (score, diagnosis, the student's own
answer), and its hidden lines are removed, so neither the autograded notebook that nbgrader's own
``generate_feedback`` reads nor our HTML shows hidden test code. Neither can show a reference
answer: verdict messages never contain one, and a test (tests/grading) searches the HTML for them.
"""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import new_output

_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.S)


def verdict_text(q: dict[str, Any]) -> str:
    head = f"[{q['score']:g} / {q['points']:g}] {q['status']}: {q['message']}"
    if q.get("answer_text"):
        head += f"\nYour answer: {q['answer_text']}"
    return head + "\n"


def annotate(nb: NotebookNode, questions: dict[str, dict[str, Any]]) -> NotebookNode:
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code":
            cell.source = _HIDDEN.sub("", cell.source)
        if gid in questions and cell.cell_type == "code":
            plots = [o for o in cell.get("outputs", []) if o.get("output_type") == "display_data"
                     and "image/png" in o.get("data", {})]
            cell.outputs = [new_output("stream", name="stdout", text=verdict_text(questions[gid])), *plots]
    return nb


@cache
def _exporter():
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab")  # built once per worker: loading templates is slow


def render_html(nb: NotebookNode, title: str, questions: dict[str, dict[str, Any]], problems: list[str]) -> str:
    body, _ = _exporter().from_notebook_node(nb)
    total = sum(q["score"] for q in questions.values())
    maximum = sum(q["points"] for q in questions.values())
    rows = "".join(
        f"<tr class='{html.escape(q['status'])}'><td>{html.escape(qid)}</td><td>{q['score']:g} / {q['points']:g}</td>"
        f"<td>{html.escape(q['message'])}</td><td><code>{html.escape(q.get('answer_text') or '')}</code></td></tr>"
        for qid, q in questions.items())
    notes = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    summary = (f"<section id='scaling-course-summary' style='font-family:sans-serif;margin:1em'>"
               f"<h1>{html.escape(title)}: {total:g} / {maximum:g}</h1>"
               + (f"<p>Notes from the grader:</p><ul>{notes}</ul>" if notes else "")
               + "<table border='1' cellpadding='4' style='border-collapse:collapse'><tr><th>question</th>"
               "<th>score</th><th>feedback</th><th>your answer</th></tr>" + rows + "</table></section>")
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + summary, body, count=1)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
