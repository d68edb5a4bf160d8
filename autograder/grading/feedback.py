"""Feedback: the graded notebook annotated with verdicts, and the student's HTML report.

Each test cell's outputs are replaced by the grader's verdict (score, diagnosis, the student's own
answer), and its hidden lines are removed, so neither the autograded notebook that nbgrader's own
``generate_feedback`` reads nor our HTML shows hidden test code. Neither can show a reference
answer: verdict messages never contain one, and a test (tests/grading) searches the HTML for them.

Everything here is linear in what the student wrote, or bounded: nbconvert's markdown renders some text
in quadratic time (its math rules rescan to the end of the cell from every ``\\begin{x}`` or ``\\\\[``:
200,000 characters cost minutes), so a markdown cell is rendered only up to ``MARKDOWN_CHARS``, each
within ``CELL_SECONDS`` (where a timer can be set: a worker's main thread), and all of a report's
markdown within ``REPORT_SECONDS``; past any of them the cell is shown as plain text, saying so. A cell's
text in the report is cut at ``SHOWN_CHARS`` (the autograded notebook keeps it whole).

What the staff's tools render carries nothing active that the student controls (docs/security.md, item 8):
every value from a notebook, a kernel or a result enters the report through ``_e`` (attributes included,
and a class is one of a fixed set); MathJax loads ``ui/safe``, without the ``html`` TeX package, and
typesets the markdown cells only; an output is styled as a verdict only where ``annotate`` marked it. The
autograded notebook, which nbgrader's formgrader and ``generate_feedback`` render as raw HTML, is written as
``inert.inert`` makes it.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections import OrderedDict
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from nbformat import NotebookNode
from nbformat.v4 import new_output

from ..bounds import TooExpensive, bounded
from ..variants import describe
from ..verdict import Status
from .inert import BASE64

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# Honest markdown cells of the course hold up to 4,000 characters, a chapter's 40,000 in all, and render in
# milliseconds; 10,000 characters of the worst text known render in about a second.
MARKDOWN_CHARS = 10_000
CELL_SECONDS = 2.0
REPORT_SECONDS = 10.0
SHOWN_CHARS = 50_000


def strip_hidden(source: str) -> str:
    """``source`` without its hidden tests: from each ``### BEGIN HIDDEN TESTS`` to the first
    ``### END HIDDEN TESTS`` after it (and the newline that ends it); a begin that no end follows stays.
    One pass over the text (a pattern with ``.*?`` rescans to the end from every begin marker)."""
    out, at = [], 0
    while (begin := source.find(HIDDEN_BEGIN, at)) >= 0:
        end = source.find(HIDDEN_END, begin + len(HIDDEN_BEGIN))
        if end < 0:
            break  # no end after this begin, nor after any later one
        out.append(source[at:begin])
        at = end + len(HIDDEN_END)
        at += source.startswith("\n", at)
    out.append(source[at:])
    return "".join(out)


def verdict_text(q: dict[str, Any]) -> str:
    head = f"[{q['score']:g} / {q['points']:g}] {q['status']}: {q['message']}"
    if q.get("answer_text"):
        head += f"\nYour answer: {q['answer_text']}"
    return head + "\n"


# The cell metadata by which ``annotate`` marks its verdict (the cell's first output) for the report: a stream
# output has no metadata of its own in nbformat's schema. Test cells are the master's, and a student's own
# cells lose their metadata in sanitize, so neither the student nor the kernel can set it.
MARK = "scaling_course"


def annotate(nb: NotebookNode, questions: dict[str, dict[str, Any]]) -> NotebookNode:
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code":
            cell.source = strip_hidden(cell.source)
        if gid in questions and cell.cell_type == "code":
            plots = [o for o in cell.get("outputs", []) if o.get("output_type") == "display_data"
                     and "image/png" in o.get("data", {})]
            cell.outputs = [new_output("stream", name="stdout", text=verdict_text(questions[gid])), *plots]
            cell.metadata[MARK] = {"verdict": 0}  # the index of the verdict among the cell's outputs
    return nb


def _is_verdict(cell: dict[str, Any], index: int) -> bool:
    mark = cell.get("metadata", {}).get(MARK) if isinstance(cell.get("metadata"), dict) else None
    return isinstance(mark, dict) and mark.get("verdict") == index


# The report is built here rather than with nbconvert's HTML templates: those cost about 0.6 s a
# notebook (syntax highlighting, then sanitizing every cell), as much as running a short notebook,
# and by default pass a student's raw HTML through. Here everything the student wrote or printed is
# escaped: markdown is rendered with raw HTML escaped and harmful link targets refused, rich outputs
# other than images are shown as their plain text, and the only script is MathJax's.
_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60em; margin: 1em auto; padding: 0 1em; color: #222 }
pre { background: #f6f6f6; padding: .5em; overflow-x: auto; white-space: pre-wrap; margin: .2em 0 }
.cell { margin: .8em 0 } .code pre.source { border-left: 3px solid #6a8fd0 }
pre.verdict { background: #eef5ff } pre.error { background: #fdecec }
img { max-width: 100% } table { border-collapse: collapse } td, th { border: 1px solid #999; padding: 4px }
tr.correct td:nth-child(2) { background: #e6f4e6 } tr.incorrect td:nth-child(2), tr.invalid td:nth-child(2)
{ background: #fbe9e9 } tr.partial td:nth-child(2) { background: #fff6dd }
"""
# MathJax typesets the student's markdown only (``processHtmlClass``; the score table, the notes and the code
# cells are in ``ignoreHtmlClass``, where a message quotes a kernel's or a file's name), with its ``ui/safe``
# extension letting no URL, class, id or style through, and without the ``html`` TeX package (\href, \style,
# \class, \cssId), which is neither autoloaded nor ``\require``d.
NO_MATH, MATH = "nomath", "markdown"
MATHJAX_CONFIG = {
    "loader": {"load": ["ui/safe"]},
    "tex": {"inlineMath": [["$", "$"]], "packages": {"[-]": ["html"]}, "autoload": {"html": []},
            "require": {"allow": {"html": False}}},
    "options": {"ignoreHtmlClass": NO_MATH, "processHtmlClass": MATH,
                "safeOptions": {"allow": {"URLs": "none", "classes": "none", "cssIDs": "none", "styles": "none"},
                                "safeProtocols": {"http": False, "https": False, "file": False,
                                                  "javascript": False, "data": False}}},
}
MATHJAX_URL = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"
_MATHJAX = (f"<script>window.MathJax = {json.dumps(MATHJAX_CONFIG)};</script>"  # read when MathJax loads
            f"<script src='{MATHJAX_URL}' async></script>")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@cache
def _markdown_renderer() -> Any:
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class Renderer(IPythonRenderer):
        def image(self, text: str, url: str, title: str | None = None) -> str:
            """An image pasted into a markdown cell (``attachment:NAME``) is not shown: the report embeds no
            file the student attached (nbconvert would raise for one the cell does not carry), and says so."""
            if url.startswith("attachment:"):
                name = _e(url.removeprefix("attachment:"))
                return f"<em class='note'>[{name}: an image attached to the cell, not shown in this report]</em>"
            return super().image(text, url, title)

    return MarkdownWithMath(renderer=Renderer(escape=True, allow_harmful_protocols=False, exclude_anchor_links=True))


def _e(value: Any) -> str:
    """The one way a value from a notebook, a kernel or a result enters the report's HTML: as text, with both
    quotes escaped, so that in an attribute too it stays a value."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def _cut(text: str) -> str:
    """``text`` escaped for HTML, cut at ``SHOWN_CHARS`` with a note."""
    if len(text) <= SHOWN_CHARS:
        return _e(text)
    return (_e(text[:SHOWN_CHARS]) + f"\n… ({len(text) - SHOWN_CHARS:,} more characters not shown here; "
            "the autograded notebook has them all)")


def _as_text(text: str, why: str) -> str:
    return (f"<p class='note'>This markdown cell is shown as plain text ({why}).</p>"
            f"<pre class='source'>{_cut(text)}</pre>")


_rendered: OrderedDict[str, str] = OrderedDict()  # the assignment's own text repeats in every student's report
CACHED = 4096


class _Budget:
    """The seconds one report may spend rendering markdown, spent cell by cell (a text rendered before, for
    this report or another, costs nothing)."""

    def __init__(self, seconds: float):
        self.left = seconds

    def render(self, text: str) -> str:
        if text in _rendered:
            _rendered.move_to_end(text)
            return _rendered[text]
        if len(text) > MARKDOWN_CHARS:
            return _as_text(text, f"{len(text):,} characters, over the {MARKDOWN_CHARS:,} the report renders")
        if self.left <= 0:
            return _as_text(text, "the report's time for rendering markdown was spent")
        started = time.monotonic()
        limit = min(CELL_SECONDS, self.left)
        try:
            with bounded(cpu=limit, wall=limit):
                out = _markdown_renderer().render(text)
        except TooExpensive:
            out = _as_text(text, f"it took over {limit:g} s to render")
            if limit < CELL_SECONDS:
                return out  # cut short by this report's budget: another report may render it
        except Exception as e:  # text the renderer cannot take (nbconvert raises on some): the cell as text
            out = _as_text(text, f"it could not be rendered: {type(e).__name__}")
        finally:
            self.left -= time.monotonic() - started
        _rendered[text] = out
        if len(_rendered) > CACHED:
            _rendered.popitem(last=False)
        return out


@lru_cache(maxsize=4096)
def _code(text: str) -> str:
    return f"<pre class='source'>{_cut(text)}</pre>"


_PRE = frozenset({"", "stdout", "stderr", "verdict", "error"})  # the classes of an output, a fixed set


def _pre(text: Any, kind: str = "") -> str:
    text = "".join(map(str, text)) if isinstance(text, list) else str(text)
    return f"<pre class='{kind if kind in _PRE else ''}'>{_e(_ANSI.sub('', text))}</pre>"


def _output(out: dict[str, Any], verdict: bool = False) -> str:
    """One output; ``verdict``: the grader's verdict (``annotate`` marked it), styled as one."""
    kind = out.get("output_type")
    if kind == "stream":
        return _pre(out.get("text", ""), "verdict" if verdict else "stderr" if out.get("name") == "stderr"
                    else "stdout")
    if kind == "error":
        tb = out.get("traceback")
        return _pre("\n".join(map(str, tb)) if isinstance(tb, list) and tb else
                    f"{out.get('ename')}: {out.get('evalue')}", "error")
    data = out.get("data", {}) if isinstance(out.get("data"), dict) else {}
    png = data.get("image/png")
    if isinstance(png, str) and BASE64.fullmatch(png):  # base64 only: nothing that could leave the attribute
        return f"<img alt='plot' src='data:image/png;base64,{png.strip()}'>"
    if "text/plain" in data:
        return _pre(data["text/plain"])
    return ""


def _cell(cell: dict[str, Any], budget: _Budget) -> str:
    """One cell of the report. Whatever in it the report cannot show is left out with a note: a cell is the
    student's, and the report (like the grade) never depends on every cell being one it can show."""
    try:
        return _cell_html(cell, budget)
    except Exception as e:
        return f"<div class='cell'><p class='note'>This cell cannot be shown here ({_e(type(e).__name__)}).</p></div>"


def _cell_html(cell: dict[str, Any], budget: _Budget) -> str:
    if cell.get("cell_type") == "markdown":
        return f"<div class='cell {MATH}'>{budget.render(str(cell.get('source', '')))}</div>"
    if cell.get("cell_type") != "code":
        return ""
    outputs = "".join(_output(o, _is_verdict(cell, i)) for i, o in enumerate(cell.get("outputs", []))
                      if isinstance(o, dict))
    return f"<div class='cell code'>{_code(str(cell.get('source', '')))}{outputs}</div>"


SUMMARY = "<section id='scaling-course-summary'"  # the report's first section: the scores, rewritten by the parent


def _hand_score(q: dict[str, Any], hand: dict[str, Any] | None) -> str:
    """A question's score cell: the automatic score, or the one a person gave (the gradebook's), marked so."""
    if not hand:
        return f"{q['score']:g} / {q['points']:g}"
    review = "; the course staff will review it" if hand.get("review") else ""
    return (f"{float(hand['score']):g} / {q['points']:g} <em>graded by hand</em> (automatic: {q['score']:g}"
            f"{review})")


def late_words(seconds: float) -> str:
    """How late, in the unit a person reads it in."""
    hours = seconds / 3600
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} hours" if hours >= 1 else f"{seconds:.0f} s"


def summary_html(title: str, questions: dict[str, dict[str, Any]], problems: list[str],
                 setting: dict[str, dict[str, Any]] | None = None, book: dict[str, Any] | None = None) -> str:
    """The report's scores: its total, the grader's notes, the student's values, a row per question. ``book``: what the
    gradebook adds to the automatic scores (``gradebook.settle``): scores given by hand, which replace the automatic
    ones and are marked "graded by hand", nbgrader's late penalty, taken from the total, and a note on the submission
    time where the gradebook holds none or an earlier hand-in's; the total is then the gradebook's, as ``nbgrader
    export`` gives it."""
    hand, penalty = (book or {}).get("hand") or {}, (book or {}).get("late_penalty")
    total = sum(float(hand[qid]["score"]) if qid in hand else q["score"] for qid, q in questions.items())
    total = max(total - (penalty or 0), 0)
    maximum = sum(q["points"] for q in questions.values())
    rows = "".join(
        f"<tr class='{_status(q['status'])}'><td>{_e(qid)}</td><td>{_hand_score(q, hand.get(qid))}</td>"
        f"<td>{_e(q['message'])}</td><td><code>{_e(q.get('answer_text') or '')}</code></td></tr>"
        for qid, q in questions.items())
    time = (book or {}).get("time")  # what the gradebook holds of the submission time, where it is worth a word
    notes = "".join(f"<li>{_e(p)}</li>" for p in [*problems, *([time] if time else [])])
    values = "".join(f"<li>{_e(name)}: {_e(describe(labels))}</li>"
                     for name, labels in (setting or {}).items())
    after = f" (after a late penalty of {penalty:g})" if penalty else ""
    late = late_words((book or {}).get("seconds_late") or 0)
    said = ((f"<p>Late submission: handed in {late} after the due date; the "
             f"course's late policy takes {penalty:g} points from the total.</p>" if penalty is not None else "")
            + ("<p>Scores marked <em>graded by hand</em> were given by the course staff and replace the automatic "
               "ones.</p>" if hand else ""))
    return (f"{SUMMARY} class='{NO_MATH}'>"
            f"<h1>{_e(title)}: {total:g} / {maximum:g}{after}</h1>" + said
            + (f"<p>Notes from the grader:</p><ul>{notes}</ul>" if notes else "")
            + (f"<p>Your setting (the values your answers were graded with):</p><ul>{values}</ul>"
               if values else "")
            + "<table><tr><th>question</th><th>score</th><th>feedback</th><th>your answer</th></tr>"
            + rows + "</table></section>")


def render_html(nb: NotebookNode, title: str, questions: dict[str, dict[str, Any]], problems: list[str],
                setting: dict[str, dict[str, Any]] | None = None) -> str:
    """The student's report: the score table first (after the student's values of the varied
    exercises, which the grade was judged with), then the annotated notebook."""
    summary = summary_html(title, questions, problems, setting)
    budget = _Budget(REPORT_SECONDS)
    cells = "\n".join(_cell(c, budget) for c in nb.cells)
    return (f"{_HEAD}{_e(title)}</title><style>{_STYLE}</style>{_MATHJAX}{_BODY}{summary}\n"
            f"<main class='{NO_MATH}'>{cells}</main></body></html>\n")


_HEAD, _BODY = "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>", "</head>\n<body>"  # how ours start


def report_path(course_dir: Path, result: dict[str, Any]) -> Path:
    """Where the report of ``result`` is (``nbgrader release_feedback`` sends it from there)."""
    return course_dir / "feedback" / result["student"] / result["assignment"] / f"{result['notebook']}.html"


def rewrite_summary(path: Path, result: dict[str, Any], book: dict[str, Any]) -> bool:
    """The scores of the report at ``path`` written again from the stored ``result`` and what the gradebook adds
    (``book``), its notebook left as the grader wrote it; whether there was such a report to rewrite (one that
    ``nbgrader generate_feedback`` put in its place is left alone: it reads the gradebook itself, and it shows a
    student's HTML outputs as they are, so the summary's marker may be there). The summary opens the body of our
    report, and everything in it is escaped (``_e``), so its end is the first ``</section>`` after it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    # Ours only: the file starts as ``render_html`` starts it, and the summary opens the body. A marker found
    # anywhere else may be a student's output that another renderer (nbgrader's) showed as it was.
    if not text.startswith(_HEAD) or (title_end := text.find("</title>", len(_HEAD))) < 0:
        return False
    body = text.find(_BODY, title_end)
    start = body + len(_BODY)
    if body < 0 or not text.startswith(SUMMARY, start) or (end := text.find("</section>", start)) < 0:
        return False
    summary = summary_html(html.unescape(text[len(_HEAD):title_end]), result["questions"],
                           result.get("problems") or [], result.get("setting"), book)
    write_atomic(path, text[:start] + summary + text[end + len("</section>"):])
    return True


_STATUSES = frozenset(map(str, Status))


def _status(status: Any) -> str:
    """A row's class: one of the statuses, or none."""
    return status if status in _STATUSES else ""


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
