"""The class loop through nbgrader's exchange, with the student's side in a real browser: the instructor
generates and releases Chapter 1 into an exchange folder; the student fetches it from JupyterLab's
Assignment List, answers one question rightly and one wrongly, validates and submits; the instructor
collects, grades with ``scaling-course grade`` and releases the feedback; the student fetches it and reads
both verdicts in the report.

The unit tests grade folders that a test wrote; only this loop shows that the course's config, nbgrader's
exchange and its lab and server extensions carry a submission from a student's lab to the grader and the
report back, under the student id the exchange gives it. The instructor and the student each have their
own Jupyter directories and nbgrader config naming the same course id and exchange root (docs/grading.md,
"The nbgrader exchange"). Screenshots of each step go to test-artifacts/ (exchange-*.png).
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import pytest
from nbgrader.utils import get_username

from autograder.variant_report import student_answers
from tests.browser import lab as ui
from tests.browser.lab import CHAPTER, ROOT, Lab

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = [pytest.mark.slow, pytest.mark.ch01]

COURSE_ID = "scaling-course"  # the course's nbgrader_config.py
# The exchange names a submission after the OS user who submits (JUPYTERHUB_USER for a hub's jovyan), and
# the grader deals the student's values from that name: the lab's kernel must compute with the same ones.
STUDENT = get_username()
RIGHT, WRONG = "ch01-e1-h100-time", "ch01-e1-v6e-time"
ANSWERS = student_answers(ROOT, CHAPTER, STUDENT)["answers"]
ANSWER_CELL = f"t_h100 = {ANSWERS[RIGHT]!r}\nt_v6e = {2 * ANSWERS[WRONG]!r}"  # the second one off by a factor of 2
EXCHANGE_MS = 60_000  # every Assignment List action runs an nbgrader app in the server, then lists again


def exchange_config(exchange: Path) -> str:
    """The course's nbgrader_config.py with the exchange root set: the course id it names is the one the
    exchange files assignments under, and its timeouts and stderr pattern are what Validate needs."""
    return (ROOT / "nbgrader_config.py").read_text() + f"\nc.Exchange.root = {str(exchange)!r}\n"


@dataclass(frozen=True)
class Instructor:
    """The teacher's side: a course directory, and an environment with Jupyter directories of its own."""

    course: Path
    env: dict[str, str]

    def run(self, *argv: str, timeout_s: float = 300) -> str:
        """Runs a command of this environment (nbgrader, scaling-course) in the course directory."""
        proc = subprocess.run(argv, cwd=self.course, env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(argv)} exited with {proc.returncode}:\n"
                        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exchange")


@pytest.fixture(scope="module")
def instructor(tmp_path_factory: pytest.TempPathFactory, exchange: Path) -> Instructor:
    """A course directory holding Chapter 1's source, generated and released into the exchange."""
    home = tmp_path_factory.mktemp("instructor")
    course = home / "course"
    shutil.copytree(ROOT / "source" / CHAPTER, course / "source" / CHAPTER)
    (course / "nbgrader_config.py").write_text(exchange_config(exchange))
    teacher = Instructor(course, ui.jupyter_env(home))
    teacher.run("nbgrader", "generate_assignment", CHAPTER)  # what `scaling-course release` ends with
    teacher.run("nbgrader", "release_assignment", CHAPTER)
    return teacher


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, instructor: Instructor, exchange: Path) -> Iterator[Lab]:
    """The student's JupyterLab: an empty home folder, the course's config in the user's Jupyter config
    directory, and the student id in the environment, so that the kernel deals what the grader will."""
    home = tmp_path_factory.mktemp("student")
    work = home / "work"
    work.mkdir()
    env = ui.jupyter_env(home)
    (home / "config" / "nbgrader_config.py").write_text(exchange_config(exchange))
    env["SCALING_COURSE_STUDENT"] = STUDENT
    with ui.running_lab(home, work, env) as running:
        yield running


def _open_assignment_list(page: Page) -> Locator:
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    page.locator(".lm-Menu-item", has_text="Assignment List").click()
    return page.locator("#nbgrader-assignment-list")


def _assignment(assignments: Locator, status: str) -> Locator:
    """The chapter's row in one of the list's three sections: released, fetched (downloaded), submitted."""
    return assignments.locator(f"#{status}_assignments_list > .list_item", has_text=CHAPTER)


def _notebooks(assignments: Locator) -> Locator:
    """The fetched assignment's notebook rows, unfolded (each list reload folds them)."""
    fetched = _assignment(assignments, "fetched")
    rows = fetched.locator(".assignment-notebooks")
    ui.expect(fetched.get_by_role("button", name="Submit")).to_be_enabled(timeout=EXCHANGE_MS)
    if not rows.is_visible():
        fetched.locator(".assignment-notebooks-link").click()
    ui.expect(rows).to_be_visible()
    return rows


def _answer(page: Page, panel: Locator, released: Path) -> None:
    """Runs the setup and E1's setting, answers E1 with one right and one wrong value, and self-checks;
    ``released``: the notebook the student fetched."""
    cells = panel.locator(".jp-CodeCell")
    setup, setting, answer, right, wrong = (cells.nth(ui.code_index(q, released)) for q in
                                            ("setup", "ch01-e1-setting", "ch01-e1-answer", RIGHT, WRONG))
    ui.run_cell(panel, setup)
    ui.expect(setup.locator(".jp-OutputArea")).to_contain_text("device(s)")
    ui.run_cell(panel, setting)
    ui.expect(setting.locator(".jp-OutputArea")).to_contain_text(f"(dealt to {STUDENT})")
    ui.type_answer(page, answer, ANSWER_CELL)
    ui.run_cell(panel, answer)
    ui.expect(answer.locator(".jp-OutputArea")).to_have_text("")
    ui.run_cell(panel, right)
    ui.expect(right.locator(".jp-OutputArea")).to_contain_text(f"✓ {RIGHT}: correct.")
    ui.run_cell(panel, wrong)
    ui.expect(wrong.locator(".jp-OutputArea")).to_contain_text(f"{WRONG}: not right yet")
    ui.expect(wrong.locator(".jp-OutputArea")).to_contain_text("Off by a factor of 2")
    wrong.scroll_into_view_if_needed()


def _collect_and_grade(teacher: Instructor) -> None:
    course = teacher.course
    teacher.run("nbgrader", "collect", CHAPTER)
    submitted = course / "submitted" / STUDENT / CHAPTER
    nb = nbformat.read(submitted / f"{CHAPTER}.ipynb", as_version=4)
    assert ANSWER_CELL in [c.source for c in nb.cells], "the submission lacks the answer typed in the lab"
    teacher.run("scaling-course", "grade", CHAPTER, "--jobs", "1", timeout_s=600)
    with open(course / "grades.csv", newline="") as f:
        (row,) = [r for r in csv.DictReader(f) if r["student"] == STUDENT]
    assert (float(row[RIGHT]), float(row[WRONG])) == (1.0, 0.0), row
    # release_feedback names each report by the submission's timestamp and secret, which the grader leaves
    # beside the report.
    teacher.run("nbgrader", "release_feedback", CHAPTER)


def _read_feedback(page: Page, assignments: Locator) -> None:
    submitted = _assignment(assignments, "submitted")
    submitted.get_by_role("button", name="Fetch Feedback").click()
    view = submitted.get_by_text("(view feedback)")
    ui.expect(view).to_be_visible(timeout=EXCHANGE_MS)
    ui.shot(page, "exchange-6-feedback-fetched.png")
    view.click()  # the file browser goes to the feedback folder of that submission
    page.locator(".jp-DirListing-item", has_text=f"{CHAPTER}.html").dblclick()
    report = page.frame_locator(".jp-HTMLViewer iframe")
    right, wrong = (report.locator("tr", has=report.locator("td", has_text=re.compile(f"^{q}$")))
                    for q in (RIGHT, WRONG))
    ui.expect(right).to_contain_text("1 / 1", timeout=EXCHANGE_MS)
    ui.expect(right).to_contain_text("Correct.")
    ui.expect(wrong).to_contain_text("0 / 1")
    ui.expect(wrong).to_contain_text("Off by a factor of 2")
    ui.expect(report.locator("#scaling-course-summary h1")).to_contain_text(f"{CHAPTER} — {STUDENT}: 1 / ")


def test_class_loop_through_the_exchange(page: Page, lab: Lab, instructor: Instructor) -> None:
    page.goto(f"{lab.url}/lab/workspaces/exchange")
    assignments = _open_assignment_list(page)
    released = _assignment(assignments, "released")
    ui.expect(released).to_contain_text(COURSE_ID, timeout=EXCHANGE_MS)
    ui.shot(page, "exchange-1-released.png")
    released.get_by_role("button", name="fetch").click()
    _notebooks(assignments).locator("a", has_text=CHAPTER).click()
    ui.shot(page, "exchange-2-fetched.png")

    panel = ui.notebook_ready(page)
    _answer(page, panel, instructor.course / "release" / CHAPTER / f"{CHAPTER}.ipynb")
    ui.shot(page, "exchange-3-answered.png")
    panel.locator('jp-button[data-command="docmanager:save"]').click()
    tab = page.locator(".lm-DockPanel .lm-TabBar-tab", has_text=f"{CHAPTER}.ipynb")
    ui.expect(tab).not_to_have_class(re.compile(r"\bjp-mod-dirty\b"))  # saved: the submission carries the answers

    page.locator(".lm-DockPanel .lm-TabBar-tab", has_text="Assignments").click()
    _notebooks(assignments).get_by_role("button", name="Validate").click()
    message = ui.validation_message(page)
    ui.expect(message).to_have_class(re.compile(r"\bvalidation-failed\b"))  # the rest of the chapter is unanswered
    ui.expect(message).to_contain_text(f'check("{WRONG}", t_v6e)')
    ui.expect(message).to_contain_text("Off by a factor of 2")
    ui.expect(message).not_to_contain_text(f'check("{RIGHT}", t_h100)')
    ui.shot(page, "exchange-4-validated.png")
    ui.close_dialog(page)

    _assignment(assignments, "fetched").get_by_role("button", name="Submit").click()
    ui.expect(_assignment(assignments, "submitted").get_by_role("button", name="Fetch Feedback")).to_be_visible(
        timeout=EXCHANGE_MS)
    ui.shot(page, "exchange-5-submitted.png")

    _collect_and_grade(instructor)
    _read_feedback(page, assignments)
    ui.shot(page, "exchange-7-feedback.png")
