"""Plain ``nbgrader autograde`` scores a test cell by its outputs (an error: 0; a number shown as the cell's result
before any error: those points; else full marks). A partly right answer must get the same share of the points
there as the message beside it says ("partly right (38%)"), never 0. (Plain nbgrader judges in the kernel, on the
self-check's cases; ``scaling-course grade`` draws its own, so the two shares may differ a little.)"""

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.utils import determine_grade

from autograder.questions import load_chapter
from solutions.ch04_transformers import cx5_untied
from tests.chapter_checks import both_judges

QID = "ch04-cx5-param-count"
Q = load_chapter("ch04_transformers")[QID]
POINTS = Q.points


def _graded_cell(answer: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[
        new_code_cell("import course\nfrom course import check, grade\nimport solutions.ch04_transformers as s"),
        new_code_cell(f'grade("{QID}", {answer})\ncheck("{QID}", {answer})',
                      metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": QID, "points": POINTS,
                                             "locked": True}})])
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=300).execute()
    return nb.cells[1]


@pytest.mark.slow
def test_plain_nbgrader_gives_a_partly_right_answer_its_share(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.delenv("SCALING_COURSE_GRADER", raising=False)
    share = both_judges(Q, cx5_untied)[1].score  # the self-check's share: nbgrader's kernel judges as it does
    assert 0 < share < 1
    assert determine_grade(_graded_cell("s.cx5_untied")) == (pytest.approx(POINTS * share), POINTS)
    assert determine_grade(_graded_cell("s.cx5_with_norms")) == (0, POINTS)  # wrong at every case: still nothing
    assert determine_grade(_graded_cell("s.param_count")) == (POINTS, POINTS)
