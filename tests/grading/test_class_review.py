"""What an instructor grading a class must never lose: a grade to a pasted image or to the feedback report, work
handed in beside the graded notebook or outside the folder the grader reads, the copy of a duplicated cell that
the student's kernel used, a regrade after a reference is fixed, the documented nbgrader commands, and the
grades kept when a run is interrupted.

One small class of Chapter 1 (E1 answered: 2 points) is graded once for the module; each test reads it.
"""

import base64
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import weakref
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.demo import copy_course, submit
from autograder.grading.console import Progress
from autograder.grading.pipeline import Interrupted, grade
from autograder.grading.sanitize import sanitize
from autograder.grading.submissions import find_notebook
from tests.grading.test_class import CHAPTER, LIMITS, NAME, ROOT, _cell, _gid, _release, answered

# A 1-pixel PNG, as JupyterLab stores an image pasted into a markdown cell.
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082")).decode()
RECEIPTS = {"timestamp.txt": "2026-12-02 10:00:00.000000 UTC", "submission_secret.txt": "0123456789abcdef" * 2}


def with_pasted_image():
    nb = answered()
    cell = nbformat.v4.new_markdown_cell("My sketch of the roofline:\n\n![image.png](attachment:image.png)")
    cell["attachments"] = {"image.png": {"image/png": PIXEL}}
    nb.cells.insert(nb.cells.index(_cell(nb, "ch01-e1-answer")) + 1, cell)
    return nb


def wrong_first_try():
    """A wrong first try of E1's answer cell above the right one (the same grade id twice), both above the
    tests: run from the top, the notebook ends with the right values, and its self-check ticks."""
    nb = answered()
    right = _cell(nb, "ch01-e1-answer")
    first = nbformat.from_dict(json.loads(json.dumps(right)))
    first.source = "t_h100 = 12345.0\nt_v6e = 12345.0\nfirst_try = True"
    first["id"] = "first-try"
    nb.cells.insert(nb.cells.index(right), first)
    return nb


def _hand_in(course: Path, student: str, files: dict[str, bytes]) -> None:
    folder = course / "submitted" / student / CHAPTER
    folder.mkdir(parents=True, exist_ok=True)
    secret = {"submission_secret.txt": f"{student:0>32}"[-32:]}  # each submission its own, as nbgrader's
    for name, data in {**{k: v.encode() for k, v in (RECEIPTS | secret).items()}, **files}.items():
        (folder / name).write_bytes(data)


def _zip(path: Path, nb) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(NAME, nbformat.writes(nb))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(ROOT, tmp_path_factory.mktemp("review"), [CHAPTER])
    _hand_in(course, "attach", {NAME: nbformat.writes(with_pasted_image()).encode()})
    _hand_in(course, "copy1", {NAME: nbformat.writes(_release()).encode(),
                               "ch01_rooflines-Copy1.ipynb": nbformat.writes(answered()).encode()})
    _hand_in(course, "dup", {NAME: nbformat.writes(wrong_first_try()).encode()})
    submitted = course / "submitted"
    (submitted / "flat").mkdir()
    nbformat.write(answered(), submitted / "flat" / NAME)
    (submitted / "caps" / "Ch01_Rooflines").mkdir(parents=True)
    nbformat.write(answered(), submitted / "caps" / "Ch01_Rooflines" / NAME)
    (submitted / "zipbeside").mkdir()
    _zip(submitted / "zipbeside" / "ch01_rooflines.zip", answered())
    (submitted / "other-work" / "ch02_tpus").mkdir(parents=True)  # another assignment only: nothing to say
    (submitted / "other-work" / "ch02_tpus" / "ch02_tpus.ipynb").write_text("{}")
    _zip(submitted / "loose.zip", answered())
    summary = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    return course, {r["student"]: r for r in summary.results}, summary


# --- a pasted image --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_pasted_image_costs_nothing_and_the_report_shows_the_cell(graded):
    course, results, _ = graded
    assert results["attach"]["score"] == 2, results["attach"]["problems"]
    assert not any("grader error" in p for p in results["attach"]["problems"])
    html = (course / "feedback" / "attach" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert "My sketch of the roofline" in html and "image.png" in html
    assert "attachment:" not in html  # no broken image: a placeholder in its place


def test_the_grade_never_depends_on_the_report(tmp_path, monkeypatch):
    """A notebook the report cannot show gives a report of the scores and notes alone, never a grader error;
    the receipts lie beside the report and, as nbgrader's autograde leaves them, beside the autograded notebook."""
    from autograder.grading import stages
    from tests.grading.test_stages import _course, _submit

    a = _course(tmp_path)
    folder, theirs = _submit(a)
    (folder / "timestamp.txt").write_text(RECEIPTS["timestamp.txt"])
    real = stages.render_html

    def fails_on_cells(nb, *args):
        if nb.cells:
            raise RuntimeError("a cell nobody foresaw")
        return real(nb, *args)

    monkeypatch.setattr(stages, "render_html", fails_on_cells)
    job = stages.Job(a, "ada", folder, notebook=theirs, questions={})
    stages.store(job)
    assert (a.course_dir / "autograded" / "ada" / "hw" / "hw.ipynb").exists()
    assert (a.course_dir / "feedback" / "ada" / "hw" / "hw.html").exists()
    assert any("scores only" in p and "RuntimeError" in p for p in job.problems), job.problems
    for where in ("feedback", "autograded"):
        assert (a.course_dir / where / "ada" / "hw" / "timestamp.txt").read_text() == RECEIPTS["timestamp.txt"]


# --- work in a second notebook ----------------------------------------------------------------------------

def test_other_notebooks_beside_the_graded_one_are_named(tmp_path):
    folder = tmp_path / "s" / CHAPTER
    (folder / ".ipynb_checkpoints").mkdir(parents=True)
    for name in (NAME, "ch01_rooflines-Copy1.ipynb", ".ipynb_checkpoints/ch01_rooflines-checkpoint.ipynb"):
        (folder / name).write_text("{}")
    path, notes = find_notebook(folder, CHAPTER, tmp_path / "work")
    assert path == folder / NAME  # the assignment's name decides, never a guess
    assert len(notes) == 1 and "ch01_rooflines-Copy1.ipynb" in notes[0] and "not graded" in notes[0], notes
    assert "checkpoint" not in notes[0]
    (folder / "ch01_rooflines-Copy1.ipynb").unlink()
    assert find_notebook(folder, CHAPTER, tmp_path / "work") == (folder / NAME, [])


@pytest.mark.parametrize("where", ["CH01_ROOFLINES.IPYNB", "Work.Ipynb", "download/ch01_rooflines.ipynb",
                                   "Submission.ZIP", "download/hw.zip"])
def test_a_notebook_or_zip_named_in_another_case_or_in_a_folder_is_found(tmp_path, where):
    """Windows and an LMS write names in capitals, and a download may come in a folder of its own: each was "no
    ch01_rooflines.ipynb in the submission", and 0, with a note about cells that no notebook was read to find."""
    folder = tmp_path / "s" / CHAPTER
    (folder / where).parent.mkdir(parents=True)
    if where.lower().endswith(".zip"):
        _zip(folder / where, answered())
    else:
        nbformat.write(answered(), folder / where)
    path, notes = find_notebook(folder, CHAPTER, tmp_path / "work")
    assert path is not None and nbformat.read(path, as_version=4).cells == answered().cells, notes
    assert len(notes) == (where != "CH01_ROOFLINES.IPYNB") and all("graded" in n for n in notes), notes


def test_the_assignments_name_in_capitals_is_its_name_beside_other_work(tmp_path):
    """Graded by its name, the draft beside it named for the staff: it was "which one?", and 0."""
    folder = tmp_path / "s" / CHAPTER
    folder.mkdir(parents=True)
    nbformat.write(answered(), folder / "CH01_ROOFLINES.IPYNB")
    nbformat.write(nbformat.v4.new_notebook(), folder / "ch01_rooflines-Copy1.ipynb")
    path, notes = find_notebook(folder, CHAPTER, tmp_path / "work")
    assert path == folder / "CH01_ROOFLINES.IPYNB" and "ch01_rooflines-Copy1.ipynb" in notes[0], notes
    with zipfile.ZipFile(tmp_path / "Sub.ZIP", "w") as z:  # and inside a zip, beside a scratch notebook
        z.writestr("CH01_ROOFLINES.IPYNB", nbformat.writes(answered()))
        z.writestr("scratch.ipynb", nbformat.writes(nbformat.v4.new_notebook()))
    for p in folder.iterdir():
        p.unlink()
    (tmp_path / "Sub.ZIP").rename(folder / "Sub.ZIP")
    path, notes = find_notebook(folder, CHAPTER, tmp_path / "work")
    assert path is not None and nbformat.read(path, as_version=4).cells == answered().cells, notes


def test_a_submission_without_a_notebook_names_what_it_holds(tmp_path):
    folder = tmp_path / "s" / CHAPTER
    folder.mkdir(parents=True)
    assert find_notebook(folder, CHAPTER, tmp_path / "work")[1] == [
        "no ch01_rooflines.ipynb in the submission; the folder is empty"]
    (folder / "ch01_rooflines.ipynb").mkdir()  # a folder named like the notebook holds no notebook
    assert find_notebook(folder, CHAPTER, tmp_path / "work")[1] == [
        "no ch01_rooflines.ipynb in the submission; it holds ch01_rooflines.ipynb/"]
    (folder / "answers.pdf").write_bytes(b"%PDF")
    assert find_notebook(folder, CHAPTER, tmp_path / "work")[1] == [
        "no ch01_rooflines.ipynb in the submission; it holds answers.pdf"]
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr(NAME, nbformat.writes(answered()))
    with zipfile.ZipFile(folder / "outer.zip", "w") as z:  # an LMS's download, zipped again
        z.writestr("inner.zip", inner.getvalue())
    assert find_notebook(folder, CHAPTER, tmp_path / "work")[1] == [
        "no ch01_rooflines.ipynb in the submission; inner.zip in outer.zip (a zip in a zip: not opened)"]


@pytest.mark.slow
def test_work_in_a_second_notebook_is_flagged_for_the_staff(graded):
    course, results, summary = graded
    assert results["copy1"]["score"] == 0  # the notebook under the assignment's name is graded
    assert any("ch01_rooflines-Copy1.ipynb" in p for p in summary.problems["copy1"]), summary.problems
    html = (course / "feedback" / "copy1" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert "ch01_rooflines-Copy1.ipynb" in html  # the student is told too


# --- misplaced submissions --------------------------------------------------------------------------------

def test_misplaced_work_is_found(tmp_path):
    from autograder.grading.pipeline import Assignment
    from autograder.grading.submissions import misplaced

    submitted = tmp_path / "submitted"
    (submitted / "ok" / CHAPTER).mkdir(parents=True)
    (submitted / "ok" / CHAPTER / NAME).write_text("{}")
    (submitted / "flat").mkdir()
    (submitted / "flat" / NAME).write_text("{}")
    (submitted / "caps" / "CH01_ROOFLINES").mkdir(parents=True)
    (submitted / "deep" / "ch01").mkdir(parents=True)
    (submitted / "deep" / "ch01" / NAME).write_text("{}")
    (submitted / "other" / "ch02_tpus").mkdir(parents=True)
    (submitted / "other" / "ch02_tpus" / "ch02_tpus.ipynb").write_text("{}")
    (submitted / ".hidden").mkdir()
    (submitted / ".hidden" / NAME).write_text("{}")
    (submitted / "loose.ipynb").write_text("{}")
    (submitted / "notes.txt").write_text("")
    a = Assignment(tmp_path, CHAPTER, CHAPTER, tmp_path / "master.ipynb", {}, {})
    found = misplaced(a)
    assert set(found) == {"flat", "caps", "deep", "loose.ipynb"}, found
    assert "expected submitted/flat/ch01_rooflines/ch01_rooflines.ipynb" in found["flat"]
    assert "CH01_ROOFLINES" in found["caps"] and "ch01/ch01_rooflines.ipynb" in found["deep"]
    assert all(note.startswith("not graded:") for note in found.values())


@pytest.mark.slow
def test_misplaced_submissions_are_listed_never_silently_absent(graded):
    _, results, summary = graded
    for where in ("flat", "caps", "zipbeside", "loose.zip"):
        assert where not in results
        notes = summary.problems[where]
        assert len(notes) == 1, notes
        note = notes[0]
        assert note.startswith("not graded:") and "expected submitted/" in note, note
    assert "expected submitted/flat/ch01_rooflines/" in summary.problems["flat"][0]
    assert "other-work" not in summary.problems


# --- a duplicated answer cell -----------------------------------------------------------------------------

def test_the_last_copy_of_a_duplicated_cell_counts_and_earlier_ones_still_run():
    master = nbformat.read(ROOT / "source" / CHAPTER / NAME, as_version=4)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"dup-{os.getpid()}.ipynb"
    nbformat.write(wrong_first_try(), path)
    try:
        clean = sanitize(master, {}, path)
    finally:
        path.unlink()
    sources = [c.source for c in clean.notebook.cells]
    graded = next(i for i, c in enumerate(clean.notebook.cells) if _gid(c) == "ch01-e1-answer")
    assert "e1.flops" in sources[graded]  # the last copy is the graded cell
    assert "first_try = True" in sources[graded - 1] and _gid(clean.notebook.cells[graded - 1]) is None
    assert any("duplicated" in p and "ch01-e1-answer" in p and "last" in p for p in clean.problems), clean.problems


@pytest.mark.slow
def test_a_wrong_first_try_above_the_right_cell_costs_nothing(graded):
    _, results, _ = graded
    assert results["dup"]["score"] == 2, results["dup"]["problems"]
    assert any("duplicated" in p for p in results["dup"]["problems"])


# --- the nbgrader commands the docs give --------------------------------------------------------------------

def _documented(path: Path) -> list[list[str]]:
    """The nbgrader command lines of a doc's code blocks, without comments."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(), re.S | re.M)
    lines = [line.split("#")[0].split() for block in blocks for line in block.splitlines()]
    return [words[1:] for words in lines if words and words[0] in ("nbgrader", ".venv/bin/nbgrader")]


def _nbgrader(course: Path, words: list[str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *words, *extra], cwd=course, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_the_readmes_nbgrader_commands_work_as_written(graded):
    """Every nbgrader line of the README's instructor block, run on a graded class: nothing of ours is lost
    (grades.csv, the reports' receipts), and nbgrader's feedback can be released."""
    course, results, _ = graded
    ours = (course / "grades.csv").read_text()
    commands = _documented(ROOT / "README.md")
    assert commands, "the README gives no nbgrader command"
    for words in commands:
        out = _nbgrader(course, words)
        assert out.returncode == 0, (words, out.stderr[-2000:])
    assert (course / "grades.csv").read_text() == ours
    export = [w for w in commands if w[0] == "export"]
    for words in export:
        written = course / words[words.index("--to") + 1]
        assert "attach" in written.read_text() and CHAPTER in written.read_text()


@pytest.mark.slow
def test_nbgraders_own_feedback_can_replace_ours_and_still_be_released(graded, tmp_path):
    """docs/grading.md: ``nbgrader generate_feedback ASSIGNMENT --force`` renders nbgrader's report of each
    autograded notebook (the pasted image's too), keeps the receipts, and ``release_feedback`` releases them."""
    course, results, _ = graded
    documented = [w for w in _documented(ROOT / "docs" / "grading.md") if w[0] == "generate_feedback"]
    assert documented and all("--force" in w for w in documented), documented
    out = _nbgrader(course, documented[0])
    assert out.returncode == 0, out.stderr[-3000:]
    for student in ("attach", "copy1", "dup"):
        feedback = course / "feedback" / student / CHAPTER
        assert {p.name for p in feedback.iterdir()} >= {f"{CHAPTER}.html", *RECEIPTS}, student
    (tmp_path / "exchange").mkdir(mode=0o777)
    (tmp_path / "exchange").chmod(0o777)  # as docs/grading.md says: every account writes there
    out = _nbgrader(course, ["release_feedback", CHAPTER], f"--Exchange.root={tmp_path / 'exchange'}")
    assert out.returncode == 0, out.stderr[-3000:]
    released = list((tmp_path / "exchange").rglob("*.html"))
    assert len(released) == 3, released


def test_the_docs_give_no_nbgrader_command_that_skips_or_overwrites():
    for doc in (ROOT / "README.md", ROOT / "docs" / "grading.md"):
        for words in _documented(doc):
            if words[0] == "export":
                assert "--to" in words and words[words.index("--to") + 1] != "grades.csv", (doc, words)
            if words[0] == "generate_feedback":
                assert "--force" in words, (doc, words)  # without it nbgrader skips every graded student


# --- reruns: the problems of kept results, one student regraded -------------------------------------------

@pytest.mark.slow
def test_a_rerun_lists_the_problems_of_the_results_it_keeps(graded):
    course, _, first = graded
    again = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    assert again.skipped == len(again.results) == 3
    assert again.problems == first.problems


@pytest.mark.slow
def test_one_student_is_regraded_alone_and_grades_csv_keeps_the_class(graded):
    course, results, _ = graded
    before = (course / "grades.csv").read_text()
    again = grade(course, CHAPTER, jobs=2, limits=LIMITS, students=["dup"], force=True)
    assert [r["student"] for r in again.results] == ["dup"] and again.skipped == 0
    assert again.results[0]["score"] == results["dup"]["score"]
    assert (course / "grades.csv").read_text() == before  # every stored student, as before


@pytest.mark.slow
def test_work_copied_in_by_hand_is_named_before_release_feedback_fails_for_everyone(tmp_path):
    """A submission placed in submitted/ by hand has no submission_secret.txt, and ``nbgrader release_feedback``
    stops at its report for the whole class: the run names it, and the command it gives releases the others."""
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    _hand_in(course, "root", {NAME: nbformat.writes(answered()).encode()})
    submit(course, "dave", CHAPTER, answered())
    summary = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    [warning] = summary.warnings
    command = re.search(r"`(nbgrader release_feedback [^`]*--CourseDirectory[^`]*)`", warning).group(1).split()
    assert command == ["nbgrader", "release_feedback", CHAPTER, "--CourseDirectory.student_id_exclude=dave"]
    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o777)
    exchange.chmod(0o777)
    plain = _nbgrader(course, ["release_feedback", CHAPTER], f"--Exchange.root={exchange}")
    assert plain.returncode != 0 and "FileNotFoundError" in plain.stderr  # nbgrader's own behaviour, at dave's
    assert f"feedback/dave/{CHAPTER}/" in plain.stderr
    out = _nbgrader(course, command[1:], f"--Exchange.root={exchange}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(list(exchange.rglob("*.html"))) == 1


# --- a reference fixed after grading (mutates the class: after the tests that read it) --------------------

@pytest.mark.slow
def test_a_fixed_reference_regrades_and_says_why(graded, monkeypatch):
    """A reference fixed in the course's records is refused until it is released (the students' self-check and the
    points come from the release: grading/release_check.py); once released, the class is graded again."""
    import io
    import shutil

    from autograder.grading import release_check
    from autograder.grading.pipeline import CourseError

    course, results, _ = graded
    again = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    assert again.skipped == 3
    own = course / "solutions"
    shutil.copytree(ROOT / "solutions", own, ignore=shutil.ignore_patterns("__pycache__"))
    record = "reference=h100, unit=\"s\""
    text = (own / f"{CHAPTER}.py").read_text()
    assert record in text
    (own / f"{CHAPTER}.py").write_text(text.replace(record, "reference=2 * h100, unit=\"s\""))
    with pytest.raises(CourseError, match="ch01-e1-h100-time: its reference or checks changed"):
        grade(course, CHAPTER, jobs=2, limits=LIMITS)
    # Released (which would write the installed package's self-check data, shared with the checkout: not here).
    monkeypatch.setattr(release_check, "check", lambda course_dir, chapter, answers: None)
    log = io.StringIO()
    fixed = grade(course, CHAPTER, jobs=2, limits=LIMITS, progress=Progress(stream=log, bar=False))
    assert fixed.skipped == 0
    assert "the chapter's answers changed since the last run: regrading 3" in log.getvalue(), log.getvalue()
    scores = {r["student"]: r["questions"]["ch01-e1-h100-time"]["score"] for r in fixed.results}
    assert scores["dup"] == 0 and scores["attach"] == 0  # judged against the fixed reference
    assert grade(course, CHAPTER, jobs=2, limits=LIMITS).skipped == 3  # and kept from then on


# --- Ctrl-C ------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_ctrl_c_keeps_what_was_graded_and_says_how_to_continue(tmp_path):
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    for student in ("s0", "s1", "s2"):
        submit(course, student, CHAPTER, answered())
    cmd = [sys.executable, "-m", "autograder.cli", "grade", CHAPTER, "--course-dir", str(course), "--jobs", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    results = course / ".scaling-course" / "results" / CHAPTER
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(results.glob("*.json")) and proc.poll() is None:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    kept = len(list(results.glob("*.json")))
    assert 1 <= kept < 3, (kept, stdout, stderr)
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    lines = [line for line in (stdout + stderr).splitlines() if line.startswith("interrupted:")]
    assert lines == [f"interrupted: {kept} graded and kept, rerun the same command to continue"], stdout + stderr
    assert proc.returncode == 130
    assert (course / "grades.csv").read_text().count("\n") == 1 + kept  # what is kept is in the table already


def test_a_stopped_run_ends_though_something_it_left_never_does():
    """Python's exit waits for every thread and pool process it knows; after Ctrl-C the grader ends anyway."""
    code = ("import threading, time\n"
            "from autograder import cli\n"
            "threading.Thread(target=time.sleep, args=(600,)).start()  # as a pool's thread left waiting\n"
            "cli.exit_within(1.0, cli.INTERRUPTED)\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 130, done.stderr
    assert time.monotonic() - started < 30


class _CtrlCInACleanup(Progress):
    """After the first stored result, Ctrl-C is pressed while the grader runs an object's cleanup (a weakref
    callback, as the garbage collector runs them at any moment): Python reports an exception raised there and
    goes on, so an interrupt that only raises is lost there, as it once was on a loaded machine."""

    def update(self, done: int, total: int, text: str) -> None:
        super().update(done, total, text)
        if done == 1:
            class Thing:
                pass

            thing = Thing()
            ref = weakref.ref(thing, lambda _: signal.raise_signal(signal.SIGINT))
            del thing
            assert ref() is None


@pytest.mark.slow
def test_a_ctrl_c_that_lands_in_a_cleanup_still_stops_the_run(tmp_path, capfd):
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    for student in ("s0", "s1", "s2"):
        submit(course, student, CHAPTER, answered())
    with pytest.raises(Interrupted) as stopped:
        grade(course, CHAPTER, jobs=2, limits=LIMITS, progress=_CtrlCInACleanup(stream=io.StringIO(), bar=False))
    kept = len(list((course / ".scaling-course" / "results" / CHAPTER).glob("*.json")))
    assert str(stopped.value) == "interrupted: 1 graded and kept, rerun the same command to continue"
    assert kept == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the run's own handler is gone


@pytest.mark.slow
@pytest.mark.parametrize("when, jobs", [("kernel-starting", 1), ("cell-running", 1), ("cell-running", 2)])
def test_ctrl_c_at_a_terminal_while_notebooks_run_stores_none_of_them(tmp_path, when, jobs):
    """A terminal's Ctrl-C reaches the whole process group: the grader, its workers, and (one submission, or
    ``--jobs 1``) the grader's own process running a notebook. Pressed while a kernel starts or runs a cell, the
    run stops with its one line, and nothing is stored for those notebooks (a kernel stopped by the Ctrl-C is not
    the student's "kernel died", to be kept as their grade)."""
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    nb = answered()
    nb.cells.insert(1, nbformat.v4.new_code_cell(
        'import pathlib, time\npathlib.Path("cell-running").touch()\ntime.sleep(60)'))
    for student in ["s0", "s1", "s2"][:1 if jobs == 1 else 3]:
        submit(course, student, CHAPTER, nb)
    cmd = [sys.executable, "-m", "autograder.cli", "grade", CHAPTER, "--course-dir", str(course), "--jobs", str(jobs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    work = course / ".scaling-course" / "work"
    marker = "kernel.json" if when == "kernel-starting" else "cell-running"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(work.rglob(marker)) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert "interrupted: 0 graded and kept, rerun the same command to continue" in stderr, (stdout, stderr)
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    assert not list((course / ".scaling-course" / "results" / CHAPTER).glob("*.json"))
    # The stopped notebook's folder goes with it, where it ran in the grader's own process (--jobs 1).
    if jobs == 1:
        assert not [p.name for p in work.iterdir() if p.is_dir() and re.fullmatch(r"s\d-\d+", p.name)], \
            list(work.iterdir())


# --- a locked test cell edited ------------------------------------------------------------------------------------

def _with_test_cells(edit):
    """The release notebook with ``edit`` applied to its test cells (a list), sanitized as the grader does: the
    test cells, and what sanitize made of the notebook."""
    from autograder.grading.sanitize import release_locked

    master = nbformat.read(ROOT / "source" / CHAPTER / NAME, as_version=4)
    release = nbformat.read(ROOT / "release" / CHAPTER / NAME, as_version=4)
    tests = [c for c in release.cells if _gid(c) and c.metadata["nbgrader"].get("grade")
             and not c.metadata["nbgrader"].get("solution")]
    edit(tests)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"edited-{os.getpid()}.ipynb"
    nbformat.write(release, path)
    try:
        return tests, sanitize(master, {}, path, release_locked(nbformat.read(ROOT / "release" / CHAPTER / NAME,
                                                                               as_version=4)))
    finally:
        path.unlink()


def test_a_test_cell_whose_text_or_points_were_changed_is_restored_and_named():
    """A student who rewrites a test cell (``pass``, 50 points) gets the assignment's back, as before; now the staff
    are told which cells were edited. A test cell as released is never named."""
    def edit(tests):
        tests[0].source = "pass  # edited test"
        tests[1].metadata["nbgrader"]["points"] = 50
    tests, clean = _with_test_cells(edit)
    named = [p for p in clean.problems if p.startswith("locked cells whose text or points")]
    assert named and named[0].endswith(f"{_gid(tests[0])}, {_gid(tests[1])}"), clean.problems
    restored = {_gid(c): c for c in clean.notebook.cells}
    assert restored[_gid(tests[0])].source != "pass  # edited test"
    assert restored[_gid(tests[1])].metadata["nbgrader"]["points"] != 50


def test_a_test_cell_of_an_earlier_release_is_named_as_the_assignments_change():
    """After an erratum (a question's points or test changed, and released again) every notebook handed out before
    holds the earlier cell, with that release's checksum: the note says the assignment changed, never that the
    student edited a locked cell."""
    def edit(tests):
        tests[0].metadata["nbgrader"]["points"] = 2  # as the earlier release gave it
        tests[0].metadata["nbgrader"]["checksum"] = "0" * 32  # that release's checksum
        tests[1].source += "\n# a line the earlier release had"
        tests[1].metadata["nbgrader"]["checksum"] = "1" * 32
    tests, clean = _with_test_cells(edit)
    assert not [p for p in clean.problems if p.startswith("locked cells whose text or points")], clean.problems
    named = [p for p in clean.problems if p.startswith("test cells that changed since this notebook was made")]
    assert named and named[0].endswith(f"{_gid(tests[0])}, {_gid(tests[1])}"), clean.problems
