"""The student's side in a real browser: JupyterLab shows the self-check's diagnosis, and nbgrader's Validate
button works from the notebook toolbar.

The unit tests call check() and nbgrader directly; only a browser shows that the feedback reaches the page
a student reads and that the lab extension, the server extension and the course config fit together.
Debian's chromium drives a JupyterLab started from this environment with throw-away Jupyter directories, so
the user's own Jupyter state is never touched (tests/browser/lab.py, shared with the exchange's test, which
also skips this module when SCALING_COURSE_SKIP_BROWSER=1). Screenshots go to test-artifacts/, and on a
failure a screenshot of that moment and the server log as well.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import pytest

from autograder.demo import filled_notebook
from autograder.questions import load_chapter
from tests.browser import lab as ui
from tests.browser.lab import CHAPTER, ROOT, Lab

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = [pytest.mark.slow, pytest.mark.ch01]

# The book's values (the lab's kernel knows no student, so it computes with the book's setting).
T_1E12_H100, T_1E12_V6E = (load_chapter(CHAPTER)[q].reference for q in ("ch01-e1-h100-time", "ch01-e1-v6e-time"))
E1_CHECKS = ("ch01-e1-h100-time", "ch01-e1-v6e-time")  # exercise E1's test cells, in notebook order


def _prepare_work(work: Path) -> None:
    """The student's folder: the release notebook to type into, a reference-filled copy and an unanswered
    one to validate, and the course's nbgrader config, which the Validate handler reads from the server's
    cwd (per-cell timeout for JAX compiles, the pattern for XLA's stderr lines).

    The unanswered copy ends after exercise E1: the dialog's failure view needs only a few failing test
    cells, the whole release's failures are tests/test_notebooks.py's business, and every validation runs
    its notebook in a fresh kernel while the server waits, the costliest step of this file."""
    shutil.copytree(ROOT / "release" / CHAPTER, work)
    shutil.copy(ROOT / "nbgrader_config.py", work / "nbgrader_config.py")
    name = f"{CHAPTER}.ipynb"
    release_nb = nbformat.read(work / name, as_version=4)
    source_nb = nbformat.read(ROOT / "source" / CHAPTER / name, as_version=4)
    nbformat.write(filled_notebook(release_nb, source_nb), work / f"{CHAPTER}_reference.ipynb")
    ids = [ui.grade_id(c) for c in release_nb.cells]
    release_nb.cells = release_nb.cells[: ids.index(E1_CHECKS[-1]) + 1]
    nbformat.write(release_nb, work / f"{CHAPTER}_unanswered.ipynb")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("lab")
    work = home / "work"
    _prepare_work(work)
    with ui.running_lab(home, work, ui.jupyter_env(home)) as running:
        yield running


def test_self_check_feedback_in_the_page(page: Page, lab: Lab) -> None:
    panel = ui.open_notebook(page, lab, f"{CHAPTER}.ipynb")
    cells = panel.locator(".jp-CodeCell")
    setup = cells.nth(ui.code_index("setup"))
    answer = cells.nth(ui.code_index("ch01-e1-answer"))
    check = cells.nth(ui.code_index("ch01-e1-h100-time"))
    ui.expect(setup).to_contain_text("course.setup(")
    ui.expect(answer).to_contain_text("raise NotImplementedError()")
    ui.expect(check).to_contain_text('check("ch01-e1-h100-time", t_h100)')

    ui.run_cell(panel, setup)
    ui.expect(setup.locator(".jp-OutputArea")).to_contain_text("device(s)")

    # A factor-two slip: the self-check must name it without giving the answer away.
    ui.type_answer(page, answer, f"t_h100 = {2 * T_1E12_H100!r}\nt_v6e = {2 * T_1E12_V6E!r}")
    ui.run_cell(panel, answer)
    ui.expect(answer.locator(".jp-OutputArea")).to_have_text("")  # the answer cell itself ran cleanly
    ui.run_cell(panel, check)
    feedback = check.locator(".jp-OutputArea")
    ui.expect(feedback).to_contain_text("ch01-e1-h100-time: not right yet")
    ui.expect(feedback).to_contain_text("Off by a factor of 2")
    ui.expect(feedback).to_contain_text('A hint is unlocked: run course.hint("ch01-e1-h100-time")')
    ui.expect(feedback).not_to_contain_text("✓")
    ui.expect(feedback).not_to_contain_text("answers.py")  # the diagnosis alone, not the course's internals
    check.scroll_into_view_if_needed()
    ui.shot(page, "ch01-e1-wrong-answer.png")

    ui.type_answer(page, answer, f"t_h100 = {T_1E12_H100!r}\nt_v6e = {T_1E12_V6E!r}")
    ui.run_cell(panel, answer)
    ui.expect(answer.locator(".jp-OutputArea")).to_have_text("")
    ui.run_cell(panel, check)
    ui.expect(feedback).to_contain_text("✓ ch01-e1-h100-time: correct.")
    ui.expect(feedback).not_to_contain_text("not right yet")
    check.scroll_into_view_if_needed()
    ui.shot(page, "ch01-e1-right-answer.png")


def _validate(page: Page, panel: Locator) -> Locator:
    """Clicks the toolbar's Validate button (it saves, then asks the server) and returns the result text."""
    panel.locator(".validate-button").click()
    return ui.validation_message(page)


def test_validate_button(page: Page, lab: Lab) -> None:
    panel = ui.open_notebook(page, lab, f"{CHAPTER}_reference.ipynb")
    message = _validate(page, panel)
    ui.expect(message).to_have_class(re.compile(r"\bvalidation-success\b"))
    ui.expect(message).to_contain_text("Success! Your notebook passes all the tests.")
    ui.shot(page, "validate-reference.png")
    ui.close_dialog(page)

    panel = ui.open_notebook(page, lab, f"{CHAPTER}_unanswered.ipynb")
    message = _validate(page, panel)
    ui.expect(message).to_have_class(re.compile(r"\bvalidation-failed\b"))
    ui.expect(message).to_contain_text("The following cell failed:")
    ui.expect(message).to_contain_text('check("ch01-e1-h100-time", t_h100)')
    ui.expect(message).to_contain_text('check("ch01-e1-v6e-time", t_v6e)')
    ui.expect(message).not_to_contain_text("Success!")
    ui.shot(page, "validate-unanswered.png")
    ui.close_dialog(page)
