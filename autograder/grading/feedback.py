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
"""

from __future__ import annotations

import html
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


def annotate(nb: NotebookNode, questions: dict[str, dict[str, Any]]) -> NotebookNode:
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code":
            cell.source = strip_hidden(cell.source)
        if gid in questions and cell.cell_type == "code":
            plots = [o for o in cell.get("outputs", []) if o.get("output_type") == "display_data"
                     and "image/png" in o.get("data", {})]
            cell.outputs = [new_output("stream", name="stdout", text=verdict_text(questions[gid])), *plots]
    return nb


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
_MATHJAX = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$']]}};</script>"  # read when MathJax loads
            "<script src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js' async></script>")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


@cache
def _markdown_renderer() -> Any:
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class Renderer(IPythonRenderer):
        def image(self, text: str, url: str, title: str | None = None) -> str:
            """An image pasted into a markdown cell (``attachment:NAME``) is not shown: the report embeds no
            file the student attached (nbconvert would raise for one the cell does not carry), and says so."""
            if url.startswith("attachment:"):
                name = html.escape(url.removeprefix("attachment:"))
                return f"<em class='note'>[{name}: an image attached to the cell, not shown in this report]</em>"
            return super().image(text, url, title)

    return MarkdownWithMath(renderer=Renderer(escape=True, allow_harmful_protocols=False, exclude_anchor_links=True))


def _cut(text: str) -> str:
    """``text`` escaped for HTML, cut at ``SHOWN_CHARS`` with a note."""
    if len(text) <= SHOWN_CHARS:
        return html.escape(text)
    return (html.escape(text[:SHOWN_CHARS]) + f"\n… ({len(text) - SHOWN_CHARS:,} more characters not shown here; "
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


def _pre(text: Any, kind: str = "") -> str:
    text = "".join(text) if isinstance(text, list) else str(text)
    return f"<pre class='{kind}'>{html.escape(_ANSI.sub('', text))}</pre>"


def _output(out: dict[str, Any]) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        verdict = str(out.get("text", "")).startswith("[") and out.get("name") == "stdout"
        return _pre(out.get("text", ""), "verdict" if verdict else out.get("name", ""))
    if kind == "error":
        return _pre("\n".join(map(str, out.get("traceback", []))) or f"{out.get('ename')}: {out.get('evalue')}",
                    "error")
    data = out.get("data", {}) if isinstance(out.get("data"), dict) else {}
    png = data.get("image/png")
    if isinstance(png, str) and _BASE64.fullmatch(png):
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
        return f"<div class='cell'><p class='note'>This cell cannot be shown here ({type(e).__name__}).</p></div>"


def _cell_html(cell: dict[str, Any], budget: _Budget) -> str:
    if cell.get("cell_type") == "markdown":
        return f"<div class='cell markdown'>{budget.render(str(cell.get('source', '')))}</div>"
    if cell.get("cell_type") != "code":
        return ""
    outputs = "".join(_output(o) for o in cell.get("outputs", []) if isinstance(o, dict))
    return f"<div class='cell code'>{_code(str(cell.get('source', '')))}{outputs}</div>"


def render_html(nb: NotebookNode, title: str, questions: dict[str, dict[str, Any]], problems: list[str],
                setting: dict[str, dict[str, Any]] | None = None) -> str:
    """The student's report: the score table first (after the student's values of the varied
    exercises, which the grade was judged with), then the annotated notebook."""
    total = sum(q["score"] for q in questions.values())
    maximum = sum(q["points"] for q in questions.values())
    rows = "".join(
        f"<tr class='{html.escape(q['status'])}'><td>{html.escape(qid)}</td><td>{q['score']:g} / {q['points']:g}</td>"
        f"<td>{html.escape(q['message'])}</td><td><code>{html.escape(q.get('answer_text') or '')}</code></td></tr>"
        for qid, q in questions.items())
    notes = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    values = "".join(f"<li>{html.escape(name)}: {html.escape(describe(labels))}</li>"
                     for name, labels in (setting or {}).items())
    summary = (f"<section id='scaling-course-summary'>"
               f"<h1>{html.escape(title)}: {total:g} / {maximum:g}</h1>"
               + (f"<p>Notes from the grader:</p><ul>{notes}</ul>" if notes else "")
               + (f"<p>Your setting (the values your answers were graded with):</p><ul>{values}</ul>"
                  if values else "")
               + "<table><tr><th>question</th><th>score</th><th>feedback</th><th>your answer</th></tr>"
               + rows + "</table></section>")
    budget = _Budget(REPORT_SECONDS)
    cells = "\n".join(_cell(c, budget) for c in nb.cells)
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style>{_MATHJAX}</head>\n<body>{summary}\n<main>{cells}</main></body></html>\n")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
