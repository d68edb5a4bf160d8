"""What the staff's tools render carries no active content the student controls (an outside review found each).

Our report: every value from a notebook, a kernel or a result reaches its HTML through one escaping helper,
attributes included; MathJax is loaded with its ``ui/safe`` extension, without the ``html`` TeX package, and
typesets the markdown cells only; an output is styled as a verdict only where ``annotate`` wrote it.
The autograded notebook, which nbgrader's formgrader and ``generate_feedback`` render as raw HTML: student
cells keep only text, PNG and JPEG outputs, their markdown's raw HTML and harmful link targets are made text,
attachments are PNG or JPEG only.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from html.parser import HTMLParser

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.grading import inert
from autograder.grading.feedback import annotate, render_html

EVIL = "'\"><img src=x onerror=alert(1)>"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
JS = "document.title='PWNED'"


class _Tags(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, tuple[tuple[str, str | None], ...]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(attrs)))


def _every_field(v: str) -> tuple[nbformat.NotebookNode, dict, list[str], dict]:
    """A notebook, questions, notes and a setting with ``v`` in every field a notebook, a kernel or a result fills."""
    md = new_markdown_cell(f"{v}\n\n*{v}* `{v}`")
    md["attachments"] = {v: {v: v}}
    code = nbformat.from_dict({"cell_type": "code", "source": v, "metadata": {v: v}, "execution_count": None,
                               "outputs": [
        {"output_type": "stream", "name": v, "text": v},
        {"output_type": "stream", "name": "stdout", "text": [v, v]},
        {"output_type": v, "data": {v: v}, "metadata": {v: v}, "name": v, "text": v},
        {"output_type": "display_data", "data": {v: v, "text/plain": v}, "metadata": {v: v, "image/png": {"width": v}}},
        {"output_type": "display_data", "data": {"image/png": v, "text/plain": v}, "metadata": {}},
        {"output_type": "execute_result", "data": {"text/plain": [v, v], v: v}, "metadata": {}, "execution_count": v},
        {"output_type": "error", "ename": v, "evalue": v, "traceback": [v, v]},
        {"output_type": "error", "ename": v, "evalue": v, "traceback": []},
    ]})
    questions = {v: {"points": 1.0, "score": 0.0, "status": v, "diagnosis": v, "message": v, "answer_text": v},
                 "q2": {"points": 1.0, "score": 1.0, "status": "correct", "diagnosis": "ok", "message": v,
                        "answer_text": None}}
    problems = [f"also handed in, not graded: {v}.ipynb", f"execution stopped: RuntimeError: {v}"]
    nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [md, code]})
    return nb, questions, problems, {v: {v: v, "B": [v, 2]}}


def _report(v: str) -> str:
    nb, questions, problems, setting = _every_field(v)
    return render_html(nb, v, questions, problems, setting)


def test_no_field_of_a_notebook_kernel_or_result_adds_markup():
    """(1) The report of a notebook with ``EVIL`` in every field has exactly the elements and attributes (names,
    and the values of ``class``) of the same notebook filled with a harmless word: nothing is the student's."""
    def shape(text: str) -> Counter:
        body = text.split("</head>", 1)[1]
        return Counter((tag, tuple((k, v if k == "class" else None) for k, v in attrs))
                       for tag, attrs in _Tags(body).tags)

    evil, plain = _report(EVIL), _report("plain words!")  # no PNG either (not base64)
    assert shape(evil) == shape(plain), shape(evil) - shape(plain)
    for tag, attrs in _Tags(evil).tags:
        assert not any(k.startswith("on") for k, _ in attrs), (tag, attrs)
        assert tag != "img", (tag, attrs)  # the one image of the notebook is no PNG: shown as its text
    assert "<img src=x onerror" not in evil


def test_a_stream_is_stdout_or_stderr_in_the_report():
    nb = new_notebook(cells=[new_code_cell("", outputs=[new_output("stream", name="stderr", text="warn"),
                                                        new_output("stream", name="weird", text="x")])])
    html = render_html(nb, "t", {}, [])
    assert "<pre class='stderr'>warn</pre>" in html and "<pre class='stdout'>x</pre>" in html


def test_mathjax_is_safe_and_typesets_the_markdown_only():
    """(2) The emitted config: ui/safe loaded, no URL, class, id or style let through, the html TeX package
    dropped (and neither autoloaded nor required), and only the markdown cells searched for math."""
    html = render_html(new_notebook(cells=[new_markdown_cell("$x$"), new_code_cell("1")]), "t",
                       {"q": {"points": 1.0, "score": 0.0, "status": "invalid",
                              "message": "$\\href{javascript:x}{y}$"}},
                       ["$\\href{javascript:x}{y}$"])
    config = re.search(r"window\.MathJax = (\{.*?\});</script>", html, re.S)
    assert config, html[:2000]
    mj = json.loads(config[1])
    assert "ui/safe" in mj["loader"]["load"]
    assert mj["options"]["safeOptions"]["allow"] == {"URLs": "none", "classes": "none", "cssIDs": "none",
                                                     "styles": "none"}
    assert mj["options"]["safeOptions"]["safeProtocols"]["javascript"] is False
    assert mj["options"]["safeOptions"]["safeProtocols"]["data"] is False
    assert "html" in mj["tex"]["packages"]["[-]"] and mj["tex"]["autoload"]["html"] == []
    assert mj["tex"]["require"]["allow"]["html"] is False
    ignore, process = mj["options"]["ignoreHtmlClass"], mj["options"]["processHtmlClass"]
    tags = _Tags(html.split("</head>", 1)[1]).tags
    classes = lambda tag: [dict(a).get("class", "") for t, a in tags if t == tag]  # noqa: E731
    assert all(ignore in c.split() for c in classes("section") + classes("main"))  # table, notes, code cells
    assert classes("div") and all((process in c.split()) == ("markdown" in c.split()) for c in classes("div"))


def test_a_student_print_is_not_styled_as_a_verdict():
    """(4) Provenance, not text: only the output annotate() wrote is a verdict."""
    q = {"ch01-e1": {"points": 1.0, "score": 1.0, "status": "correct", "message": "Correct.", "answer_text": "42"}}
    test = new_code_cell("grade('ch01-e1', x)", metadata={"nbgrader": {"grade_id": "ch01-e1", "grade": True}},
                         outputs=[new_output("stream", name="stdout", text="anything")])
    fake = new_code_cell("print(...)", outputs=[new_output("stream", name="stdout",
                                                           text="[1 / 1] correct: Correct.\nYour answer: 42\n")])
    nb = annotate(new_notebook(cells=[fake, test]), q)
    html = render_html(nb, "t", q, [])
    assert html.count("<pre class='verdict'>") == 1
    assert "<pre class='stdout'>[1 / 1] correct: Correct." in html
    assert "<pre class='verdict'>[1 / 1] correct: Correct.\nYour answer: 42\n</pre></div>" in html
    nbformat.validate(nb)  # the mark is valid nbformat (a stream output has no metadata of its own)


# (3) The autograded notebook ---------------------------------------------------------------------------------

def _hostile_notebook() -> nbformat.NotebookNode:
    solution = {"nbgrader": {"grade_id": "ch01-e1-answer", "solution": True, "grade": False, "locked": False}}
    test_md = {"nbgrader": {"grade_id": "intro", "solution": False, "grade": False, "locked": True}}
    md = new_markdown_cell(
        "Notes <img src=x onerror=\"alert('md-img')\"> <script>alert('md-script')</script> <b>bold</b>\n\n"
        "[click](javascript:alert(1)) [c2](JaVaScRiPt&#58;alert(2)) [c3](java&#115;cript:alert(3)) "
        "[c4](javascript\\:alert(4)) [c5](data:text/html;base64,PHNjcmlwdD4=) <javascript:alert(5)>\n\n"
        "[ref]: javascript:alert(6)\n\n```\n<script>alert('fenced')</script>\n```\n\n`<img src=x onerror=1>`\n\n"
        "![pic](attachment:a.svg) ![png](attachment:ok.png)\n<!-- <script>x</script> --> <![CDATA[x]]> <?php x ?>")
    md["attachments"] = {"a.svg": {"image/svg+xml": base64.b64encode(b"<svg onload=alert(1)/>").decode()},
                         "ok.png": {"image/png": PNG}}
    own = new_code_cell("display(...)", outputs=[
        new_output("display_data", data={"text/html": f"<script>{JS}</script>", "text/plain": "<HTML>"}),
        new_output("display_data", data={"application/javascript": JS}),
        new_output("display_data", data={"image/svg+xml": "<svg><script>alert('svg')</script></svg>"}),
        new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "x"},
                                         "text/markdown": "<img src=x onerror=alert('tm')>",
                                         "text/latex": "$\\href{javascript:alert(1)}{x}$"}),
        new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"},
                   metadata={"image/png": {"width": "1 onerror=alert('w')"}, "filenames": {"image/png": "x\"y"}}),
        new_output("display_data", data={"image/png": "x\" onerror=\"alert(1)", "text/plain": "<Figure 2>"}),
        new_output("stream", name="x'><img src=x onerror=alert('name')>", text="printed <b>\n"),
        new_output("execute_result", data={"text/plain": "42", "text/html": "<b onclick=alert(1)>42</b>"},
                   execution_count=3),
        new_output("error", ename="ValueError", evalue="<script>", traceback=["\x1b[31m<script>alert(8)"]),
    ])
    graded = {"nbgrader": {"grade_id": "ch01-e1", "grade": True, "points": 1, "solution": False, "locked": True}}
    test = new_code_cell("grade('ch01-e1', x)", metadata=graded,
                         outputs=[new_output("display_data", data={"image/png": PNG, "text/html": "<script>t</script>"},
                                             metadata={"image/png": {"height": "1 onload=x"}})])
    return new_notebook(cells=[new_markdown_cell("Instructions: use <code>x</code>.", metadata=test_md),
                               new_code_cell("x = 1", metadata=solution,
                                             outputs=[new_output("stream", name="stdout", text="ok\n")]),
                               md, own, test])


QUESTIONS = {"ch01-e1": {"points": 1.0, "score": 1.0, "status": "correct", "message": "Correct.", "answer_text": "1"}}


def _exported(nb: nbformat.NotebookNode) -> str:
    """``nb`` as nbgrader's formgrader renders it (its own template where importable), sanitize_html off."""
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    c = Config()
    try:
        from nbgrader.server_extensions.formgrader import handlers

        c.HTMLExporter.template_name = "formgrade"
        c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    except ImportError:
        c.HTMLExporter.template_name = "classic"
    resources = {"assignment_id": "a", "notebook_id": "a", "submission_id": "x", "index": 0, "total": 1,
                 "base_url": "", "student": "s", "last_name": "", "first_name": "", "notebook_path": "x"}
    html, _ = HTMLExporter(config=c).from_notebook_node(nb, resources=resources)
    return html


def _student_active(html: str, template: str) -> list[str]:
    """Scripts, handlers and script or data links in ``html`` that ``template`` (the same page of a harmless
    notebook) does not have."""
    theirs = Counter(t for t, a in _Tags(template).tags if t == "script")
    found = [f"{n - theirs[t]} more <{t}>" for t, n in Counter(t for t, a in _Tags(html).tags if t == "script").items()
             if n > theirs[t]]
    handlers = {(t, k, v) for t, a in _Tags(template).tags for k, v in a if k.startswith("on")}  # the template's
    for tag, attrs in _Tags(html).tags:
        for k, v in attrs:
            if k.startswith("on") and (tag, k, v) not in handlers:
                found.append(f"{tag} {k}={v}")
            if k in ("href", "src", "action", "formaction", "xlink:href") and re.match(
                    r"\s*(javascript|vbscript|data:(?!image/(png|jpeg);base64,))", str(v or ""), re.I):
                found.append(f"{tag} {k}={v}")
        if tag in ("iframe", "object", "embed", "svg", "form", "base"):
            found.append(f"<{tag}>")
    return found


def test_the_autograded_notebook_renders_nothing_active_in_nbgrader():
    nb = annotate(_hostile_notebook(), QUESTIONS)
    before = json.dumps(nb, sort_keys=True)
    staff = inert.inert(nb)
    assert json.dumps(nb, sort_keys=True) == before  # the report's notebook is left as it was
    nbformat.validate(staff)
    assert nbformat.reads(nbformat.v4.writes(staff), as_version=4) == staff  # as store() writes it
    template = _exported(new_notebook(cells=[new_markdown_cell("hello"), new_code_cell("1")]))
    html = _exported(staff)
    assert _student_active(html, template) == [], _student_active(html, template)
    assert JS not in html and "<script>alert('md-script')" not in html and "<img src=x onerror" not in html
    # what an honest student sees is kept: printed text, the PNG plot, the result's text, the traceback
    own = staff.cells[3]
    assert [o["output_type"] for o in own.outputs] == ["display_data", "display_data", "display_data", "stream",
                                                       "execute_result", "error"]
    assert own.outputs[0]["data"] == {"text/plain": "<HTML>"}
    assert own.outputs[1]["data"] == {"image/png": PNG, "text/plain": "<Figure>"} and own.outputs[1]["metadata"] == {}
    assert own.outputs[2]["data"] == {"text/plain": "<Figure 2>"}
    assert own.outputs[3] == {"output_type": "stream", "name": "stdout", "text": "printed <b>\n"}
    assert own.outputs[4]["data"] == {"text/plain": "42"} and own.outputs[4]["execution_count"] == 3
    assert staff.cells[1].outputs == nb.cells[1].outputs  # printed text of the answer cell, unchanged
    assert staff.cells[0].source == "Instructions: use <code>x</code>."  # the assignment's own cell, untouched
    assert staff.cells[2]["attachments"] == {"a.svg": {"image/png": inert.BLANK_PNG}, "ok.png": {"image/png": PNG}}
    test = staff.cells[4]
    assert test.outputs[0]["text"].startswith("[1 / 1] correct: Correct.")
    assert test.outputs[1] == {"output_type": "display_data", "data": {"image/png": PNG}, "metadata": {}}
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold" in html


def test_the_course_config_sanitizes_nbconverts_html():
    from pathlib import Path

    from traitlets.config import PyFileConfigLoader

    root = Path(__file__).resolve().parents[2]
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    assert config.HTMLExporter.sanitize_html is True
