"""A small class graded end to end: scores, gradebook, CSV, feedback, isolation, tampering, reruns.

One grading run (module fixture) serves every test: six submissions of Chapter 1 (the reference, a
partly wrong one, an untouched release copy, two hostile ones and an unreadable file).
"""

import csv
import json
import re
import shutil
from collections import defaultdict
from html import escape, unescape
from pathlib import Path

import nbformat
import pytest

from autograder.demo import copy_course, reference_notebook, submit, with_slips
from autograder.grading.jail import landlock_abi
from autograder.grading.pipeline import CourseError, grade
from autograder.questions import Formula, Function, load_chapter
from tests.grading.tamper_cell import PATCH_ONLY, TAMPER
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
pytestmark = pytest.mark.slow


def _prepend(nb, code: str):
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    first = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    first.source = code + "\n" + first.source
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = copy_course(ROOT, tmp_path_factory.mktemp("course"))
    release_nb = nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    reference = reference_notebook(ROOT, CHAPTER)
    partly = with_slips(reference, CHAPTER)
    tamper = TAMPER if landlock_abi() >= 6 else TAMPER.replace("os.kill(os.getppid(), signal.SIGKILL)", "pass")
    notebooks = {"reference": reference, "partly-wrong": partly, "untouched": release_nb,
                 "tamper-fake": _prepend(with_slips(reference, CHAPTER, every=1), tamper),
                 "tamper-patch": _prepend(partly, PATCH_ONLY)}
    for student, nb in notebooks.items():
        submit(course, student, CHAPTER, nb)
    submit(course, "broken-json", CHAPTER, b'{"cells": [ this is not json')
    summary = grade(course, CHAPTER, jobs=2)
    return course, {r["student"]: r for r in summary.results}, summary


def test_scores(course):
    _, results, _ = course
    total = load_chapter(CHAPTER).total_points
    assert results["reference"]["score"] == total
    assert results["untouched"]["score"] == 0
    assert 0 < results["partly-wrong"]["score"] < total
    assert results["broken-json"]["score"] == 0
    assert any("cannot be read" in p for p in results["broken-json"]["problems"])


def test_functions_are_graded_on_cases_drawn_for_the_submission(course):
    """The kernel was given the cases drawn for the submission and recorded the function's outputs on
    them; the reference's functions pass them (the hostile suite shows a table of the public ones fail). The
    feedback names the answer as the function it is, never the JSON of its results."""
    path, results, _ = course
    functions = [q.qid for q in load_chapter(CHAPTER).questions if isinstance(q, Function)]
    for qid in functions:
        graded = results["reference"]["questions"][qid]
        assert graded["status"] == "correct", qid
        assert graded["answer_text"] == "(your function, called on the test cases)", qid
    assert (path / ".scaling-course" / "secret").stat().st_mode & 0o777 == 0o600


def test_grading_seeds_are_secret_stable_and_per_submission(tmp_path):
    from autograder.grading.judge import draw_cases
    from autograder.grading.seeds import SECRET, secret, submission_seed

    def drawn_cases(course_dir, chapter, seed):  # by a judging process of the course, as in grading
        from autograder.grading import judge

        if judge._judge is not None:
            judge._judge.close()
        judge._judge = None  # each course its own judging process
        return draw_cases(chapter, course_dir, seed)

    made = secret(tmp_path)
    assert secret(tmp_path) == made and len(made) >= 32 and (tmp_path / SECRET).stat().st_mode & 0o777 == 0o600
    seed = submission_seed(tmp_path, CHAPTER, "ada", "sha-1")
    assert seed == submission_seed(tmp_path, CHAPTER, "ada", "sha-1")  # a regrade draws the same cases
    others = {submission_seed(tmp_path, CHAPTER, "bob", "sha-1"), submission_seed(tmp_path, CHAPTER, "ada", "sha-2"),
              submission_seed(tmp_path, "ch02_tpus", "ada", "sha-1")}
    assert seed not in others and len(others) == 3
    (tmp_path / "elsewhere").mkdir()
    assert submission_seed(tmp_path / "elsewhere", CHAPTER, "ada", "sha-1") != seed  # another course, another secret
    cases = drawn_cases(tmp_path, CHAPTER, seed)
    assert set(cases) == {q.qid for q in load_chapter(CHAPTER).questions if isinstance(q, Function)}
    assert cases == drawn_cases(tmp_path, CHAPTER, seed) != drawn_cases(tmp_path, CHAPTER, others.pop())
    # A course with solutions of its own draws from them, as its judge does, even where the grader loaded
    # the installed ones. Here: a copy, whose CX2 crossover draws D = 7.
    own = tmp_path / "own" / "solutions" / f"{CHAPTER}.py"
    shutil.copytree(ROOT / "solutions", own.parent)
    record = "draw=draw_crossover,"
    assert record in own.read_text()
    own.write_text(own.read_text().replace(record, "draw=lambda rng, probe: {**probe, 'D': 7},"))
    mine = drawn_cases(tmp_path / "own", CHAPTER, seed)
    assert {c["D"] for c in mine.pop("ch01-cx2-crossover")} == {7}
    assert mine == {q: c for q, c in cases.items() if q != "ch01-cx2-crossover"}


def test_feedback_shows_the_students_plots(course):
    path, _, _ = course
    source = nbformat.read(ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    plotting = sum("plots." in c.source for c in source.cells if c.cell_type == "code")
    assert plotting >= 2
    html = (path / "feedback" / "reference" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert html.count("src='data:image/png;base64,") >= plotting - 1  # the measured roofline is NaN here


def test_monkeypatching_cannot_raise_a_score(course):
    _, results, _ = course
    assert results["tamper-fake"]["score"] == 0
    assert results["tamper-patch"]["score"] == results["partly-wrong"]["score"]
    for qid, q in results["tamper-patch"]["questions"].items():
        assert q["score"] == results["partly-wrong"]["questions"][qid]["score"], qid


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock on this kernel: isolation is limits only")
def test_kernel_cannot_read_solutions_or_signal_the_grader(course):
    path, _, _ = course
    graded = nbformat.read(path / "autograded" / "tamper-fake" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    nb = "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.outputs)
    # Refused by Landlock, or not even there: where the course lies under /tmp, the kernel's private view
    # of /tmp holds only its own folders.
    for name in ("ch01_rooflines.py", "ch01_rooflines.ipynb"):
        assert re.search(rf"TAMPER: blocked {re.escape(name)} (PermissionError|FileNotFoundError)", nb), nb[-2000:]
    assert "TAMPER: read" not in nb
    if landlock_abi() >= 6:
        assert "TAMPER: blocked signal" in nb


def test_gradebook_and_csv(course):
    from nbgrader.api import Gradebook

    path, results, _ = course
    with Gradebook(f"sqlite:///{path / 'gradebook.db'}") as gb:
        for student, r in results.items():
            sub = gb.find_submission(CHAPTER, student)
            assert sub.score == pytest.approx(r["score"]), student
    rows = {row["student"]: row for row in csv.DictReader((path / "grades.csv").open())}
    assert set(rows) == set(results)
    assert float(rows["reference"]["score"]) == results["reference"]["max_score"]
    assert float(rows["partly-wrong"]["ch01-e3-critical-batch"]) == results["partly-wrong"]["questions"][
        "ch01-e3-critical-batch"]["score"]


def _grader_text(path: Path, student: str) -> str:
    """What the grader wrote for a student: the feedback summary and the verdicts in test cells
    (the rest of the report is the student's own notebook, release text included)."""
    html = (path / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()
    summary = re.search(r"<section id='scaling-course-summary'.*?</section>", html, re.S).group(0)
    summary = re.sub(r"<p>Your setting .*?</ul>", "", summary, flags=re.S)  # the student's values: public inputs
    graded = nbformat.read(path / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    verdicts = [o.get("text", "") for c in graded.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")
                for o in c.get("outputs", [])]
    return summary + "\n".join(verdicts)


ROW = re.compile(r"<tr class='\w+'><td>([\w-]+)</td><td>[^<]*</td><td>(.*?)</td><td><code>", re.S)  # qid, feedback


def _feedback(path: Path, student: str) -> dict[str, str]:
    """What the grader wrote about each question alone, by qid: its row's feedback in the summary and the
    verdict in its test cell, without the score, the student's answer or the symbols its prompt lists."""
    said: defaultdict[str, str] = defaultdict(str)
    for qid, feedback in ROW.findall((path / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()):
        said[qid] += unescape(feedback) + "\n"
    graded = nbformat.read(path / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    for c in graded.cells:
        cell = c.get("metadata", {}).get("nbgrader", {})
        if cell.get("grade"):
            for o in c.get("outputs", []):
                verdict = o.get("text", "").partition("\nYour answer:")[0]
                said[cell["grade_id"]] += re.sub(r"^\[[\d.]+ / [\d.]+\] \w+: ", "", verdict) + "\n"
    return {qid: re.sub(r"symbols: use only .*", "", text) for qid, text in said.items()}


def _standalone(token: str, text: str) -> bool:
    """Whether ``token`` stands alone in ``text``: not part of a longer name, number or expression (a full
    stop may end it)."""
    return re.search(rf"(?<![\w.*/^+-]){re.escape(token)}(?![\w*/^+-]|\.\w)", text) is not None


def test_feedback_leaks_no_reference_or_hidden_test(course):
    """No reference appears in what the grader wrote: a long one anywhere, and any one, however short (B,
    2), standing alone in what it wrote about its own question."""
    from autograder.formula import parse_formula

    path, results, _ = course
    for student in ("partly-wrong", "untouched", "tamper-fake"):
        chapter = load_chapter(CHAPTER).variant(results[student]["setting"])  # the student's own references
        html = (path / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()
        assert not re.search(r"(?<!\w)grade\(", html) and "HIDDEN" not in html  # the tamperer's fake_grade may show
        text = _grader_text(path, student)
        answers = sorted((q["answer_text"] for q in results[student]["questions"].values() if q["answer_text"]),
                         key=len, reverse=True)  # longest first: a short answer ("1.0") may sit inside a longer one
        for answer in answers:  # the student's own answers may repeat a reference
            for shown in (escape(answer), escape(answer, quote=False), answer):
                text = text.replace(shown, "")
        for option in (o for q in chapter.questions for o in getattr(q, "options", ())):
            text = text.replace(option, "")  # choice options are public
        feedback = _feedback(path, student)
        assert set(feedback) == {q.qid for q in chapter.questions}, student
        for q in chapter.questions:
            if isinstance(q, Formula):
                ref = parse_formula(q.reference, q.names).text
                assert len(ref) < 6 or ref not in text, f"{q.qid}: reference {ref} in {student}'s feedback"
                tokens = {ref}
            elif isinstance(getattr(q, "reference", None), float | int):
                tokens = {f"{float(q.reference):.{digits}g}" for digits in (3, 4, 6)}
                for token in tokens:
                    found = re.search(rf"(?<![\d.]){re.escape(token)}(?!\d)", text)
                    assert len(token) <= 2 or not found, \
                        f"{q.qid}: {token} in {student}'s feedback: {text[found.start() - 80:found.end() + 80]}"
            else:
                continue
            for token in tokens:
                assert not _standalone(token, feedback[q.qid]), \
                    f"{q.qid}: reference {token} in {student}'s feedback on it: {feedback[q.qid]!r}"


def test_rerun_keeps_unchanged_submissions(course):
    path, results, _ = course
    again = grade(path, CHAPTER, jobs=2)
    assert again.skipped == len(results)
    assert {r["student"]: r["score"] for r in again.results} == {s: r["score"] for s, r in results.items()}


def test_broken_course_directory_is_explained(tmp_path):
    with pytest.raises(CourseError, match="nbgrader_config.py"):
        grade(tmp_path, CHAPTER)
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    with pytest.raises(CourseError, match="no source notebook"):
        grade(tmp_path, CHAPTER)


def test_a_notebook_whose_points_differ_from_its_records_is_not_graded(tmp_path):
    """Points come from the records (the self-check counts them): a test cell's points edited in the
    notebook since the release would grade out of other points than the students were shown."""
    copy_course(ROOT, tmp_path, [CHAPTER])
    (tmp_path / "submitted" / "ada" / CHAPTER).mkdir(parents=True)
    path = tmp_path / "source" / CHAPTER / f"{CHAPTER}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ch01-e1-h100-time")
    cell.metadata["nbgrader"]["points"] = 5
    nbformat.write(nb, path)
    with pytest.raises(CourseError, match=r"ch01-e1-h100-time: 5\.0 points in the notebook, 1\.0 in the released "):
        grade(tmp_path, CHAPTER)
