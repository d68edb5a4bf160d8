"""The Gradescope autograder zip: built for Chapter 1, unzipped into a fake ``$ROOT`` (``GRADESCOPE_ROOT``),
and ``run_autograder`` run as Gradescope would (setup.sh skipped: this environment's Python stands in for
the one it installs). One module fixture builds the zip once and grades each submission once, every run
at the same time: the reference under another file name and with no student id (the book's values), a
partly wrong notebook inside a zip, a blank one beside a second notebook, a file that is not JSON, and an
upload with no notebook. The same notebooks are graded by ``scaling-course grade``'s pipeline alongside,
and the scores must agree question by question.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.demo import copy_course, reference_notebook, settings_of, submit, with_slips
from autograder.grading.gradescope import BOOK, build, pick_notebook, zero_results
from autograder.grading.gradescope import _student as student_of
from autograder.grading.pipeline import grade
from autograder.questions import Number, load_chapter
from autograder.record import GRADER_ENV, STUDENT_ENV
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
EMAIL = "jdoe@example.edu"
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
pytestmark = [pytest.mark.slow, pytest.mark.ch01]


def _notebooks() -> dict[str, nbformat.NotebookNode]:
    release_nb = nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    reference = reference_notebook(ROOT, CHAPTER)
    return {"reference": reference, "blank": release_nb,
            "partly": with_slips(reference, CHAPTER, setting=settings_of(CHAPTER, EMAIL))}


def _layout(root: Path, archive: Path, files: dict[str, bytes], email: str | None) -> None:
    """A folder as Gradescope's /autograder: the zip in source/, the upload in submission/, the metadata."""
    zipfile.ZipFile(archive).extractall(root / "source")
    for name, data in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    if email is not None:
        users = [{"email": email, "name": "J. Doe", "id": 7, "sid": "12345"}]
        (root / "submission_metadata.json").write_text(json.dumps({"id": 1, "users": users}))


def _run_autograder(root: Path, python: str = sys.executable) -> subprocess.Popen:
    env = {**os.environ, "GRADESCOPE_ROOT": str(root), "SCALING_COURSE_PYTHON": python}
    return subprocess.Popen(["bash", str(root / "source" / "run_autograder")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gradescope")
    archive = build(ROOT, CHAPTER, tmp / "autograder.zip")
    nbs = {k: nbformat.writes(v).encode() for k, v in _notebooks().items()}
    packed = tmp / "upload.zip"
    with zipfile.ZipFile(packed, "w") as z:
        z.writestr(f"work/{CHAPTER}.ipynb", nbs["partly"])
    uploads = {
        "reference": ({"My Work (1).ipynb": nbs["reference"]}, None),
        "partly-zip": ({"upload.zip": packed.read_bytes()}, EMAIL),
        "blank": ({f"work/{CHAPTER}.ipynb": nbs["blank"], "notes.ipynb": nbs["reference"]}, EMAIL),
        "garbage": ({f"{CHAPTER}.ipynb": b'{"cells": [ this is not json'}, EMAIL),
        "no-notebook": ({"answers.py": b"print(42)\n"}, EMAIL),
    }
    runs = {}
    for name, (files, email) in uploads.items():
        _layout(tmp / name, archive, files, email)
        runs[name] = _run_autograder(tmp / name)
    # The class grader on the same notebooks, with the zip's secret: the same grading seeds.
    course = copy_course(ROOT, tmp / "course", [CHAPTER])
    (course / ".scaling-course").mkdir()
    shutil.copy(tmp / "reference" / "source" / ".scaling-course" / "secret", course / ".scaling-course")
    for student, key in ((EMAIL, "partly"), ("someone", "reference"), ("nobody", "blank")):
        submit(course, student, CHAPTER, nbs[key])
    pipeline = {r["student"]: r for r in grade(course, CHAPTER, jobs=2).results}
    logs = {name: run.communicate(timeout=600)[0] for name, run in runs.items()}
    for name, run in runs.items():
        assert run.returncode == 0, f"{name}: run_autograder failed:\n{logs[name]}"
    results = {name: json.loads((tmp / name / "results" / "results.json").read_text()) for name in runs}
    return archive, results, pipeline, logs


def _check_format(out: dict, qids: list[str]) -> None:
    """Gradescope's results.json: the keys it reads, of the types it expects."""
    assert isinstance(out["score"], int | float) and isinstance(out["output"], str) and out["output"]
    assert out["visibility"] in VISIBILITY and out["stdout_visibility"] in VISIBILITY
    assert [t["name"] for t in out["tests"]] == qids
    for t in out["tests"]:
        assert isinstance(t["score"], int | float) and isinstance(t["max_score"], int | float)
        assert 0 <= t["score"] <= t["max_score"]
        assert isinstance(t["output"], str) and t["visibility"] in VISIBILITY and t["status"] in ("passed", "failed")
    assert out["score"] == pytest.approx(sum(t["score"] for t in out["tests"]))


def test_results_follow_gradescopes_format(graded):
    _, results, pipeline, _ = graded
    qids = list(pipeline[EMAIL]["questions"])
    for out in results.values():
        _check_format(out, qids)
    assert sum(t["max_score"] for t in results["reference"]["tests"]) == load_chapter(CHAPTER).total_points


def test_scores_equal_the_class_graders(graded):
    _, results, pipeline, _ = graded
    total = load_chapter(CHAPTER).total_points
    by_test = {name: {t["name"]: t["score"] for t in out["tests"]} for name, out in results.items()}
    assert by_test["partly-zip"] == {q: e["score"] for q, e in pipeline[EMAIL]["questions"].items()}
    assert 0 < results["partly-zip"]["score"] < total
    assert results["reference"]["score"] == pipeline["someone"]["score"] == total
    assert results["blank"]["score"] == pipeline["nobody"]["score"] == 0


def test_each_test_shows_the_students_feedback(graded):
    _, results, pipeline, _ = graded
    for name, student in (("partly-zip", EMAIL), ("blank", "nobody")):  # blank: the notebook of the right name
        outputs = {t["name"]: t["output"] for t in results[name]["tests"]}
        for qid, entry in pipeline[student]["questions"].items():
            assert entry["message"] in outputs[qid], (name, qid)


def test_student_ids_and_values(graded):
    _, results, pipeline, _ = graded
    partly = results["partly-zip"]
    assert EMAIL in partly["output"] and f'course.setup(student="{EMAIL}")' in partly["output"]
    assert partly["extra_data"]["setting"] == pipeline[EMAIL]["setting"]
    # No metadata: the book's values, in the kernel and in the judge alike (the reference scores in full).
    assert "book's values" in results["reference"]["output"]
    assert results["reference"]["extra_data"]["setting"] == {}


def test_broken_uploads_get_zero_and_a_reason(graded):
    _, results, _, _ = graded
    assert results["garbage"]["score"] == 0 and "cannot be read" in results["garbage"]["output"]
    none = results["no-notebook"]
    assert none["score"] == 0 and "No notebook" in none["output"] and "answers.py" in none["output"]
    assert all(t["score"] == 0 and "No notebook" in t["output"] for t in none["tests"])


def test_results_hold_no_reference_or_hidden_test(graded):
    """A wrong number's feedback never names its reference; no hidden test line appears anywhere."""
    _, results, pipeline, _ = graded
    chapter = load_chapter(CHAPTER).variant(pipeline[EMAIL]["setting"])
    out = results["partly-zip"]
    text = json.dumps(out)
    assert not re.search(r"(?<!\w)grade\(", text) and "HIDDEN" not in text
    wrong = {t["name"]: t["output"] for t in out["tests"] if t["status"] == "failed"}
    numbers = [q for q in chapter.questions if isinstance(q, Number) and q.qid in wrong]
    assert numbers, "the partly wrong notebook should get some number questions wrong"
    for q in numbers:
        for token in {f"{float(q.reference):.{d}g}" for d in (3, 4, 6)}:
            if len(token) > 2:
                said = wrong[q.qid] + out["output"]
                assert not re.search(rf"(?<![\d.]){re.escape(token)}(?!\d)", said), f"{q.qid}: {token} shown"


def test_a_grader_that_cannot_start_leaves_the_zip_zero_result(graded, tmp_path):
    archive, _, pipeline, _ = graded
    _layout(tmp_path, archive, {f"{CHAPTER}.ipynb": b"{}"}, EMAIL)
    run = _run_autograder(tmp_path, python=str(tmp_path / "no-such-python"))
    run.communicate(timeout=60)
    out = json.loads((tmp_path / "results" / "results.json").read_text())
    _check_format(out, list(pipeline[EMAIL]["questions"]))
    assert out["score"] == 0 and "did not finish" in out["output"]


def test_student_ids_from_metadata(tmp_path):
    meta = tmp_path / "submission_metadata.json"
    cases = [('{"users": [{"email": "a@b.edu", "sid": 123}]}', "sid", "123"),
             ('{"users": [{"email": "a@b.edu"}]}', "email", "a@b.edu"),
             ('{"users": [{"email": "../../etc"}]}', "email", BOOK),
             ('{"users": [{"email": ".hidden"}]}', "email", BOOK),
             ('{"users": [{"email": null}]}', "email", BOOK),
             ('{"users": []}', "email", BOOK),
             ('[1, 2]', "email", BOOK),
             ("not json", "email", BOOK)]
    for text, field, expected in cases:
        meta.write_text(text)
        assert student_of(meta, field)[0] == expected, text
    assert student_of(tmp_path / "missing.json", "email")[0] == BOOK


def test_an_empty_student_means_the_books_values_in_the_kernel(monkeypatch):
    """What grading without an id (``BOOK``) relies on: a graded kernel that is handed an empty student id
    computes with the book's values, as the judge of an assignment without variants does."""
    from course import variant

    monkeypatch.setenv(GRADER_ENV, "1")
    monkeypatch.setenv(STUDENT_ENV, BOOK)
    assert variant.student() is None


def test_several_notebooks_none_named_is_explained(tmp_path):
    for name in ("a.ipynb", "b.ipynb"):  # two different notebooks (copies with the same bytes count as one)
        (tmp_path / "submission" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "submission" / name).write_text(f'{{"name": "{name}"}}')
    path, reason = pick_notebook(tmp_path / "submission", CHAPTER, tmp_path)
    assert path is None and "several notebooks" in reason and f"{CHAPTER}.ipynb" in reason
    out = zero_results({"q1": 2.0, "q2": 1.0}, reason)
    _check_format(out, ["q1", "q2"])


def test_an_unusable_id_falls_back_to_the_next_identifier_never_to_the_book(tmp_path):
    """A missing, empty, blank, null or slash-containing sid: the email deals the values, then Gradescope's own
    user id; the book's values only where the metadata names no one. A fallback is said in the summary line
    the staff and the student read (the third item)."""
    meta = tmp_path / "submission_metadata.json"
    for sid in ("missing", "", "   ", None, "12/34"):
        user = {"email": "a@b.edu", "id": 4242} | ({} if sid == "missing" else {"sid": sid})
        meta.write_text(json.dumps({"users": [user]}))
        student, who, note = student_of(meta, "sid")
        assert student == "a@b.edu", sid
        assert "sid" in note and "email" in note and "a@b.edu" in who, (sid, note)
        meta.write_text(json.dumps({"users": [user | {"email": "../x"}]}))
        student, who, note = student_of(meta, "sid")
        assert student == "4242" and "Gradescope user id" in note, sid
    meta.write_text(json.dumps({"users": [{"email": "a@b.edu", "sid": "s1", "id": 1}]}))
    assert student_of(meta, "sid") == ("s1", student_of(meta, "sid")[1], "")
    meta.write_text(json.dumps({"users": [{"email": "a@b.edu", "id": 7}]}))
    assert student_of(meta, "email")[0] == "a@b.edu" and not student_of(meta, "email")[2]


def test_several_zips_are_named_not_called_no_notebook(tmp_path):
    """Two uploaded zips that each hold the notebook: none is graded (as in class grading), and the reason names
    both, not "no notebook found"."""
    import zipfile

    sub = tmp_path / "submission"
    sub.mkdir()
    for name, text in (("draft.zip", '{"a": 1}'), ("final.zip", '{"a": 2}')):
        with zipfile.ZipFile(sub / name, "w") as z:
            z.writestr(f"{CHAPTER}.ipynb", text)
    path, reason = pick_notebook(sub, CHAPTER, tmp_path / "work")
    assert path is None and "draft.zip" in reason and "final.zip" in reason, reason
    assert "No notebook" not in reason and f"{CHAPTER}.ipynb" in reason
