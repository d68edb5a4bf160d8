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
        new_code_cell("check('ch01-e1', x)", outputs=[new_output("stream", name="stdout", text="[1 / 2] partial")],
                      metadata={"scaling_course": {"verdict": 0}}),  # as annotate() marks its verdict
    )
    assert f"src='data:image/png;base64,{PNG}'" in html
    assert "<h1>Rooflines</h1>" in html and "<em>knee</em>" in html and "$B = 240$" in html
    assert "<pre class='verdict'>[1 / 2] partial</pre>" in html
    assert "1 / 2</td>" in html  # the summary table


def test_a_forged_image_is_not_embedded():
    html = _report(new_code_cell("", outputs=[new_output("display_data", data={
        "image/png": "x' onerror='alert(1)", "text/plain": "<Figure>"})]))
    assert _active(html.split("</head>")[1]) == [] and "&lt;Figure&gt;" in html


def _timed(fn, *args):
    import time

    started = time.monotonic()
    out = fn(*args)
    return out, time.monotonic() - started


def test_a_long_markdown_cell_is_shown_as_text():
    """Markdown past ``MARKDOWN_CHARS`` is not rendered: nbconvert's math rules rescan to the end of the cell
    from every ``\\begin{x}`` or ``\\\\[`` (80,000 characters cost 16 s, 200,000 cost 136 s)."""
    html, seconds = _timed(_report, new_markdown_cell("<script>" + ("\\begin{x}" * 9000)[:80_000]))
    assert seconds < 2, seconds
    assert "shown as plain text" in html and "\\begin{x}\\begin{x}" in html and "&lt;script&gt;" in html


def test_markdown_rendering_is_bounded_per_cell_and_per_report(monkeypatch):
    """Under the cap, a cell may still be slow to render: each has a time bound (where a timer can be set:
    the main thread of a worker), and all of a report's markdown a budget, past which cells are shown as
    text. Here both are small, and so are the cells (about half a second each to render without them)."""
    from autograder.grading import feedback

    monkeypatch.setattr(feedback, "CELL_SECONDS", 0.3, raising=False)
    monkeypatch.setattr(feedback, "REPORT_SECONDS", 0.6, raising=False)
    cells = [new_markdown_cell(("\\\\[" * 3000)[:9000] + f"\n{i}") for i in range(6)]
    html, seconds = _timed(_report, *cells)
    assert seconds < 2.5, seconds
    assert html.count("shown as plain text") == 6
    out: dict = {}

    def in_a_thread() -> None:  # no timer there (a Dask worker's thread): the budget alone
        out["html"], out["seconds"] = _timed(_report, *[new_markdown_cell(c.source + " ") for c in cells])

    import threading

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join(30)
    assert out["seconds"] < 3.5 and out["html"].count("shown as plain text") >= 3, out["seconds"]
    honest = _report(new_markdown_cell("# Rooflines\nThe *knee* is at $B = 240$."))
    assert "<h1>Rooflines</h1>" in honest  # the budget is per report: the next one renders again


def test_hidden_tests_are_removed_in_linear_time():
    from autograder.grading.feedback import annotate

    marker = "### BEGIN HIDDEN TESTS\n"
    nb = new_notebook(cells=[new_code_cell((marker * 9000)[:199_000])])
    _, seconds = _timed(annotate, nb, {})
    assert seconds < 0.5, seconds
    cases = {"a\n### BEGIN HIDDEN TESTS\nsecret\n### END HIDDEN TESTS\nb": "a\nb",
             "### BEGIN HIDDEN TESTS\nx### END HIDDEN TESTS": "",
             "a ### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS\nx\n### END HIDDEN TESTS\n\nc": "a \nc",
             "a\n### BEGIN HIDDEN TESTS\nnever closed": "a\n### BEGIN HIDDEN TESTS\nnever closed",
             "1### BEGIN HIDDEN TESTS2### END HIDDEN TESTS3### BEGIN HIDDEN TESTS4": "13### BEGIN HIDDEN TESTS4"}
    for source, kept in cases.items():
        cell = new_code_cell(source)
        annotate(new_notebook(cells=[cell]), {})
        assert cell.source == kept, (source, cell.source)


def test_a_huge_code_cell_is_cut_in_the_report():
    html = _report(new_code_cell("x = 1  # " + "y" * 300_000))
    assert "not shown" in html and len(html) < 100_000


def test_a_pasted_image_is_a_placeholder_never_an_error():
    """JupyterLab writes an image pasted into a markdown cell as ``attachment:NAME``; nbconvert raises for one
    the cell does not carry. The report shows the text and says the image is not shown."""
    cell = new_markdown_cell("My sketch:\n\n![image.png](attachment:image.png)")
    html = _report(cell)
    assert "My sketch:" in html and "image.png: an image attached to the cell, not shown" in html
    cell["attachments"] = {"image.png": {"image/svg+xml": "PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"}}
    html = _report(cell)
    assert _active(html.split("</head>")[1]) == [] and "not shown" in html


def test_one_cell_the_report_cannot_show_never_costs_the_report(monkeypatch):
    """Whatever one cell makes the renderer raise, the other cells and the scores are still shown."""
    from autograder.grading import feedback

    class Broken:
        def render(self, text: str) -> str:
            if "boom" in text:
                raise ValueError("cannot")
            return f"<p>{text}</p>"

    monkeypatch.setattr(feedback, "_markdown_renderer", lambda: Broken())
    feedback._rendered.clear()
    nb = new_notebook(cells=[new_markdown_cell("before"), new_markdown_cell("boom here"), new_markdown_cell("after")])
    nb.cells.insert(1, {"cell_type": "code", "source": "x = 1", "outputs": 7})  # no notebook of nbformat's
    html = render_html(nb, "ch01", QUESTIONS, [])
    assert "<p>before</p>" in html and "<p>after</p>" in html and "1 / 2</td>" in html
    assert "boom here" in html and "could not be rendered: ValueError" in html
    assert "This cell cannot be shown here (TypeError)" in html
    feedback._rendered.clear()


NBGRADER_HEAD = "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\" />\n<title>ch01</title>\n</head>\n<body>\n"
PLANTED = "<div class='output_html'><section id='scaling-course-summary'>x</section></div>"


def test_a_summary_is_rewritten_only_in_our_own_report(tmp_path):
    """A report that ``nbgrader generate_feedback`` wrote renders a student's HTML outputs as they are, so the
    summary's marker can be planted there: such a report, and any file not ours, is left byte for byte."""
    from autograder.grading.feedback import rewrite_summary

    book = {"hand": {}, "late_penalty": 1.0, "seconds_late": 3600}
    result = {"questions": QUESTIONS, "problems": []}
    for text in (NBGRADER_HEAD + PLANTED + "</body></html>\n",
                 "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>t</title></head>\n<body><p>hi</p>"
                 + PLANTED + "</body></html>\n",
                 PLANTED):
        path = tmp_path / "report.html"
        path.write_bytes(text.encode())
        assert not rewrite_summary(path, result, book)
        assert path.read_bytes() == text.encode()
    ours = _report(new_code_cell("print(1)", outputs=[new_output("display_data", data={"text/html": PLANTED})]))
    path.write_text(ours)
    assert rewrite_summary(path, result, book)
    assert "after a late penalty of 1" in path.read_text() and path.read_text().count("<section") == 1
