"""The feedback report in a browser, with MathJax 3 typesetting it: TeX in the student's markdown, in a test
cell's error message (the score table) and in a handed-in file's name (the grader's notes) makes no link and
no style (before: ``\\href{javascript:...}`` was a live link, and ``\\style{position:fixed...}``
laid it over the whole page, so that one click anywhere ran the script).

The report loads MathJax from a CDN, which this machine may not reach: the test serves a local copy of
MathJax 3 in its place, from ``SCALING_COURSE_MATHJAX`` (the ``es5`` folder of npm's ``mathjax`` package) or a
``node_modules`` where npm put one, and is skipped where there is none.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.browser import lab as ui  # noqa: F401 (skips the module where browser tests are switched off)
from tests.browser.lab import ROOT, Lab

if TYPE_CHECKING:
    from playwright.sync_api import Page

MATHJAX_VARIABLE = "SCALING_COURSE_MATHJAX"


def _local_mathjax() -> Path | None:
    candidates = [os.environ.get(MATHJAX_VARIABLE, ""), ROOT / "node_modules/mathjax/es5",
                  "/usr/lib/node_modules/mathjax/es5", "/usr/local/lib/node_modules/mathjax/es5"]
    return next((Path(c) for c in candidates if c and (Path(c) / "tex-mml-chtml.js").is_file()), None)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """No JupyterLab here: the report is a file. The fixtures every browser test shares ask for one."""
    log = tmp_path_factory.mktemp("report") / "server.log"
    log.write_text("no server: the report is opened as a file\n")
    yield Lab(url="", log=log)


HREF = r"$\href{javascript:alert('href')}{\text{click to see my work}}$"
OVERLAY = (r"$\style{position:fixed;top:0;left:0;width:100%;height:100%;display:block}"
           r"{\href{javascript:alert('overlay')}{\text{.}}}$")
MORE = [r"$\require{html}\href{javascript:alert('require')}{x}$", r"$\class{x}{\cssId{y}{\href{data:text/html,x}{d}}}$",
        r"$\mmlToken{mi}[href='javascript:alert(1)']{z}$"]


def _report(folder: Path) -> Path:
    from autograder.grading.feedback import render_html

    nb = new_notebook(cells=[new_markdown_cell(f"Honest math: $E = mc^2$ and $$\\sum_i x_i$$\n\n{HREF}\n\n{OVERLAY}\n\n"
                                               + "\n\n".join(MORE)),
                             new_code_cell("x = 1")])
    questions = {"ch01-e1": {"points": 1.0, "score": 0.0, "status": "invalid",
                             "message": f"No answer: the test cell stopped with RuntimeError: {HREF}"}}
    problems = [f"also handed in, not graded: {HREF}.ipynb", f"execution stopped: RuntimeError: {OVERLAY}"]
    path = folder / "report.html"
    path.write_text(render_html(nb, "ch01_rooflines — s", questions, problems), encoding="utf-8")
    return path


def test_tex_in_the_report_makes_no_link_and_no_style(page: Page, tmp_path: Path) -> None:
    from autograder.grading.feedback import MATHJAX_URL

    local = _local_mathjax()
    if local is None:
        pytest.skip(f"no MathJax 3 to serve offline: set {MATHJAX_VARIABLE} to the es5 folder of npm's mathjax")
    base = MATHJAX_URL.rsplit("/", 1)[0] + "/"
    page.route(base + "**", lambda route: route.fulfill(
        path=str(local / route.request.url.removeprefix(base).split("?")[0]), content_type="application/javascript"))
    alerts: list[str] = []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.goto(_report(tmp_path).as_uri())
    page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
    page.evaluate("MathJax.startup.promise")
    page.wait_for_timeout(300)
    typeset = page.eval_on_selector_all(".markdown mjx-container", "els => els.length")
    assert typeset >= 2 + len(MORE), typeset  # MathJax ran, on the student's markdown (a safe config, not none)
    found = {
        "typeset outside the markdown": page.eval_on_selector_all(  # the table and the notes are left as text
            "#scaling-course-summary mjx-container, main > .code mjx-container", "els => els.length"),
        "script links": page.evaluate("""() => [...document.querySelectorAll('[href], [*|href]')].map(
            e => e.getAttribute('href') || e.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || '')
            .filter(h => /^\\s*(javascript|vbscript|data):/i.test(h))"""),
        "fixed elements": page.evaluate("""() => [...document.querySelectorAll('body *')].filter(
            e => getComputedStyle(e).position === 'fixed').map(e => e.outerHTML.slice(0, 200))"""),
        "classes, ids, styles": page.evaluate("""() => [...document.querySelectorAll('mjx-container *')].filter(
            e => e.id === 'y' || e.classList.contains('x') || /position/.test(e.getAttribute('style') || ''))
            .map(e => e.outerHTML.slice(0, 200))"""),
    }
    page.mouse.click(700, 500)
    page.wait_for_timeout(500)
    found["alerts after one click"] = alerts
    assert {what: got for what, got in found.items() if got} == {}
