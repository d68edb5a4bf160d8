"""The feedback report: the student's text and outputs are shown, never executed by a browser."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.grading.feedback import render_html

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
QUESTIONS = {"ch01-e1": {"points": 2.0, "score": 1.0, "status": "partial", "message": "Off by a <b>factor</b> of 2.",
                         "answer_text": "<img src=x onerror=alert(1)>"}}


def _report(*cells: nbformat.NotebookNode, problems: tuple[str, ...] = ()) -> str:
    return render_html(new_notebook(cells=list(cells)), "ch01 — <student>", QUESTIONS, list(problems))


class _Tags(HTMLParser):
    """Every element a browser would build from the report, with its attributes."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _active(html: str) -> list[str]:
    """What in the report could run code or load something: scripts, handlers, links, embeds."""
    found = []
    for tag, attrs in _Tags(html).tags:
        if tag in ("script", "iframe", "object", "embed", "svg", "style", "link", "base", "form", "meta"):
            found.append(f"<{tag} {attrs}>")
        found += [f"{tag} {k}={v}" for k, v in attrs.items() if k.startswith("on")]
        found += [f"{tag} {k}={v}" for k, v in attrs.items() if k not in ("href", "src", "alt", "class", "id")]
        found += [f"{tag} href={v}" for k, v in attrs.items() if k == "href" and not str(v).startswith(
            ("#", "https://", "http://"))]
        found += [f"{tag} src={v}" for k, v in attrs.items() if k == "src" and not str(v).startswith(
            "data:image/png;base64,")]
    return found


def test_student_markup_is_escaped():
    html = _report(
        new_markdown_cell("Hello <script>alert(1)</script> [link](javascript:alert(2)) <img src=x onerror=alert(3)>"),
        new_code_cell("print('<script>')", outputs=[
            new_output("stream", name="stdout", text="<script>alert(4)</script>"),
            new_output("display_data", data={"text/html": "<script>alert(5)</script>", "text/plain": "<HTML obj>"}),
            new_output("display_data", data={"application/javascript": "alert(6)"}),
            new_output("display_data", data={"image/svg+xml": "<svg onload=alert(7)></svg>"}),
            new_output("error", ename="ValueError", evalue="<b>", traceback=["\x1b[31m<script>alert(8)"]),
        ]),
        problems=("<script>alert(9)</script>",),
    )
    head, body = html.split("</head>")
    assert _active(body) == []
    assert [t for t, _ in _Tags(head).tags if t == "script"] == ["script", "script"]  # MathJax, ours
    assert "javascript:" not in html and "\x1b" not in html
    assert "&lt;HTML obj&gt;" in html  # a rich output falls back to its plain text
    assert "&lt;b&gt;factor&lt;/b&gt;" in html and "ch01 — &lt;student&gt;" in html


def test_plots_and_verdicts_are_kept():
    html = _report(
        new_markdown_cell("# Rooflines\nThe *knee* is at $B = 240$."),
        new_code_cell("plots.roofline()", outputs=[new_output("display_data", data={"image/png": PNG,
                                                                                     "text/plain": "<Figure>"})]),
        new_code_cell("check('ch01-e1', x)", outputs=[new_output("stream", name="stdout", text="[1 / 2] partial")]),
    )
    assert f"src='data:image/png;base64,{PNG}'" in html
    assert "<h1>Rooflines</h1>" in html and "<em>knee</em>" in html and "$B = 240$" in html
    assert "<pre class='verdict'>[1 / 2] partial</pre>" in html
    assert "1 / 2</td>" in html  # the summary table


def test_a_forged_image_is_not_embedded():
    html = _report(new_code_cell("", outputs=[new_output("display_data", data={
        "image/png": "x' onerror='alert(1)", "text/plain": "<Figure>"})]))
    assert _active(html.split("</head>")[1]) == [] and "&lt;Figure&gt;" in html
