"""The copy report (grading/copies.py): submissions of one assignment whose written cells are the same, named for the
staff after each run, from every stored result; never a grade or a word in a student's feedback.

The notebooks are what the grader leaves in autograded/ (the student's file rebuilt by ``sanitize`` on the master,
then outputs as a run would add them), so the cells compared are those the grade was given for: the answer cells and
the student's own code cells, wherever the student put the work (moved out of the answer cells, or in a notebook
whose nbgrader metadata is gone)."""

import ast
import contextlib
import csv
import json
import random
import re
import time
from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.demo import filled_notebook
from autograder.grading import copies, factory, pipeline, results
from autograder.grading.feedback import write_atomic
from autograder.grading.inert import inert
from autograder.grading.pipeline import Assignment
from autograder.grading.sanitize import MAX_CELL_CHARS, release_locked, release_stubs, sanitize
from autograder.grading.warmup import Warming
from tests.paths import ROOT

CH = "ch01_rooflines"
SOURCE = nbformat.read(ROOT / "source" / CH / f"{CH}.ipynb", as_version=4)
RELEASE = nbformat.read(ROOT / "release" / CH / f"{CH}.ipynb", as_version=4)
STUBS = release_stubs(RELEASE)
ANSWERS = [gid for gid in STUBS]  # the chapter's 13 answer cells, in notebook order


@pytest.fixture(autouse=True)
def among_students_alone(request, monkeypatch):
    """Most tests hand the reference's answers in as students' work, to compare students with each other: the
    course's reference answers, compared as one more student (``copies.REFERENCE``), are left out of them, and
    tested on their own (marked ``with_reference``)."""
    if "with_reference" not in request.keywords:
        monkeypatch.setattr(copies, "reference", lambda a, everyones: {})


def _gid(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _assignment(tmp_path: Path) -> Assignment:
    master = tmp_path / "source" / CH / f"{CH}.ipynb"
    master.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(SOURCE, master)
    return Assignment(tmp_path, CH, CH, master, STUBS, {}, locked=release_locked(RELEASE))


def _full() -> nbformat.NotebookNode:
    """What a student who answers every cell as the instructor did hands in."""
    return filled_notebook(RELEASE, SOURCE)


def _answered(answers: dict[str, str]) -> nbformat.NotebookNode:
    """The release notebook with the answer cells of ``answers`` replaced; the others as released."""
    nb = nbformat.from_dict(json.loads(json.dumps(RELEASE)))
    for c in nb.cells:
        if _gid(c) in answers:
            c.source = answers[_gid(c)]
    return nb


def _reference(gid: str) -> str:
    return next(c.source for c in _full().cells if _gid(c) == gid)


def _graded(a: Assignment, student: str, nb: nbformat.NotebookNode | bytes, output: str = "", sha: str = "") -> None:
    """Hand in ``nb`` as ``student`` and leave what a grading run stores: the autograded notebook (the master's
    cells, the student's answers, outputs as the run made them: ``output`` in each code cell) and the result."""
    folder = a.course_dir / "submitted" / student / a.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{a.notebook}.ipynb"
    path.write_bytes(nb if isinstance(nb, bytes) else nbformat.writes(nb).encode())
    clean = sanitize(SOURCE, STUBS, path).notebook
    for c in clean.cells:
        if c.cell_type == "code" and output:
            c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    write_atomic(a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb",
                 nbformat.v4.writes(inert(clean)))
    result = {"student": student, "assignment": a.name, "notebook": a.notebook, "grader": "2",
              "sha256": sha or f"{abs(hash(student)):064d}"[:64], "timestamp": None, "questions": {},
              "score": 44.0, "max_score": 44.0, "problems": [], "isolation": "", "seconds": 1.0}
    write_atomic(a.course_dir / ".scaling-course" / "results" / a.name / f"{student}.json", json.dumps(result))


def _moved(nb: nbformat.NotebookNode, holding: str | None = "pass") -> nbformat.NotebookNode:
    """``nb`` with each answer moved into a code cell of the student's own just above its answer cell, which is left
    holding ``holding`` (None: the release's placeholder). The kernel runs the moved answer first, so the notebook
    scores what ``nb`` scores."""
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    cells = []
    for c in out.cells:
        if _gid(c) in STUBS:
            cells.append(nbformat.v4.new_code_cell(c.source))
            c.source = STUBS[_gid(c)] if holding is None else holding
        cells.append(c)
    out.cells = cells
    return out


def _stripped(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with every cell's nbgrader metadata removed, as a careless editor (or a student) may leave it."""
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    for c in out.cells:
        c.metadata.pop("nbgrader", None)
    return out


def _pairs(a: Assignment) -> set[tuple[str, str]]:
    return {(p.a, p.b) for p in copies.find(a)}


def _restyled(text: str) -> str:
    """The same code, as a student who tidies a copy would hand it in: other spacing, comments, blank lines."""
    lines = []
    for line in text.split("\n"):
        if not re.search("[\"'#]", line):  # a string's text is the program's, left as it is
            line = re.sub(r"\s*(?<![=!<>+\-*/%&|^@:])=(?!=)\s*", " = ", line).rstrip()  # assignments, not ==, +=
        lines += [line + "   # mine", ""] if line.strip() else ["", "# worked this out"]
    return "\n".join(lines)


# --- who is named ---------------------------------------------------------------------------------------------

def test_two_students_with_the_same_notebook_are_named(tmp_path):
    a = _assignment(tmp_path)
    same = nbformat.writes(_full()).encode()
    _graded(a, "alice", same)
    _graded(a, "bob", same)
    _graded(a, "carol", _answered({gid: f"x_{i} = {i}  # a guess\ny_{i} = x_{i} * 2" for i, gid in
                                    enumerate(ANSWERS)}))
    [pair] = copies.find(a)
    assert (pair.a, pair.b) == ("alice", "bob")
    assert pair.same == pair.written_a == pair.written_b == len(ANSWERS) == 13
    lines = copies.report(a)
    assert any("alice, bob" in line and "13 of 13 written cells identical" in line for line in lines), lines
    assert not any("carol" in line for line in lines)


def test_the_same_answers_with_other_outputs_spacing_and_comments_are_named(tmp_path):
    a = _assignment(tmp_path)
    _graded(a, "alice", _full(), output="alice's run\n")
    _graded(a, "bob", _answered({gid: _restyled(_reference(gid)) for gid in ANSWERS}), output="1.5e9\n" * 50)
    assert _pairs(a) == {("alice", "bob")}


def test_nearly_identical_answers_are_named_with_their_count_and_fewer_are_not(tmp_path):
    """At least 90% of the answered cells of each, and at least MIN_CELLS of them: 12 of 13 is named, 11 is not."""
    a = _assignment(tmp_path)
    own = {gid: f"mine_{i} = {i} * 3\nprint(mine_{i})" for i, gid in enumerate(ANSWERS)}
    _graded(a, "alice", _full())
    _graded(a, "bob", _answered({gid: own[gid] if gid == ANSWERS[0] else _reference(gid) for gid in ANSWERS}))
    _graded(a, "carol", _answered({gid: own[gid] if gid in ANSWERS[:2] else _reference(gid) for gid in ANSWERS}))
    found = {(p.a, p.b): p.same for p in copies.find(a)}
    assert found == {("alice", "bob"): 12, ("bob", "carol"): 12}
    assert any("12 of 13 written cells identical" in line for line in copies.report(a))


def test_untouched_notebooks_and_cells_left_as_released_are_never_named(tmp_path):
    a = _assignment(tmp_path)
    _graded(a, "ada", RELEASE)
    _graded(a, "bea", RELEASE)
    _graded(a, "cy", _answered({gid: STUBS[gid] + "\n\n# I'll do this later" for gid in ANSWERS}))  # a stub, restyled
    empty = nbformat.from_dict(json.loads(json.dumps(RELEASE)))
    empty.cells = []  # no cells at all: every answer cell restored from the release
    _graded(a, "dee", empty)
    assert copies.find(a) == []
    assert copies.report(a) == []


def test_answers_moved_out_of_the_answer_cells_are_compared_where_they_stand(tmp_path):
    """A copy that moves every answer into a cell of its own just above its answer cell (left holding ``pass``, or the
    release's placeholder) scores what the original scores: the moved cells run first. It is named beside its source,
    and so is a copy of the copy."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    _graded(a, "bob", _moved(_full()))
    _graded(a, "carol", _moved(_full(), holding=None))
    clean = sanitize(SOURCE, STUBS, tmp_path / "submitted" / "bob" / CH / f"{CH}.ipynb").notebook
    own = [c.source for c in clean.cells if not _gid(c)]  # the moved answers run as bob's own cells
    assert all(_reference(gid) in own for gid in ANSWERS)
    assert _pairs(a) == {("alice", "bob"), ("alice", "carol"), ("bob", "carol")}
    pair = next(p for p in copies.find(a) if p.b == "bob")
    assert pair.same == 13 and pair.tokens >= 800, pair
    assert pair.cells_a == tuple(ANSWERS) and all(w.startswith("after ch01-") for w in pair.cells_b), pair


def test_a_notebook_without_its_nbgrader_metadata_is_compared(tmp_path):
    """With every cell's nbgrader metadata removed, sanitize finds no answer cell: it restores each from the release
    and runs the student's cells as the student's own, so the copy scores what its source scores. Its cells are
    compared as they stand; the copies of the assignment's own cells among them (setup, settings, tests, plots)
    are everyone's and count for nothing."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    _graded(a, "bob", _stripped(_full()))
    _graded(a, "carol", _stripped(_moved(_full())))
    clean = sanitize(SOURCE, STUBS, tmp_path / "submitted" / "bob" / CH / f"{CH}.ipynb")
    assert any("none of the assignment's" in p for p in clean.problems), clean.problems
    # where no notebook was found, the note that says so is all: no cells were looked for
    assert sanitize(SOURCE, STUBS, None).problems == []
    assert _pairs(a) == {("alice", "bob"), ("alice", "carol"), ("bob", "carol")}
    pair = next(p for p in copies.find(a) if (p.a, p.b) == ("alice", "bob"))
    assert (pair.same, pair.written_a, pair.written_b) == (13, 13, 13), pair
    assert any("alice, bob, carol (13 of 13 written cells identical, pair by pair)" in line
               for line in copies.report(a)), copies.report(a)


def test_a_copy_padded_with_cells_of_its_own_or_copied_in_part_is_named(tmp_path):
    """Cells of one's own are compared now, so they must not hide a copy: a pair is named when the cells the same
    are nearly all of one of the two students' cells and at least half of the other's; a student who wrote five
    answers as the reference does is not paired with every classmate who wrote those and more."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    padded = _moved(_full())
    padded.cells += [nbformat.v4.new_code_cell(f"padding_{i} = [k * {i} for k in range(10)]\nprint(padding_{i})")
                     for i in range(4)]
    _graded(a, "bob", padded)
    largest = sorted(ANSWERS, key=lambda gid: -len(copies.tokens(_reference(gid))))
    _graded(a, "carol", _answered({gid: _reference(gid) for gid in largest[:9]}))  # nine answers, all alice's
    _graded(a, "dave", _answered({gid: _reference(gid) for gid in largest[:5]}))  # five, as many would write them
    found = {(p.a, p.b): (p.same, p.written_a, p.written_b) for p in copies.find(a)}
    assert found == {("alice", "bob"): (13, 13, 17), ("alice", "carol"): (9, 13, 9), ("bob", "carol"): (9, 17, 9),
                     ("carol", "dave"): (5, 9, 5)}


def _honest(seed: int, gids: list[str]) -> dict[str, str]:
    """Answers of a student's own: other names, other numbers, another way to write them."""
    rng = random.Random(seed)
    out = {}
    for gid in gids:
        name = "".join(rng.choice("abcdefghkmnpqrstuvwxyz") for _ in range(6))
        terms = " + ".join(f"{rng.uniform(0.5, 9):.3f} * {rng.choice('BDFNW')}" for _ in range(rng.randint(3, 6)))
        out[gid] = f"{name} = {terms}\n{name}_t = {name} / hw.H100.bf16_flops_per_s\nprint({name}_t)"
    return out


NAMES = re.findall(r'^check\("[^"]+", (\w+)\)', "\n".join(c.source for c in RELEASE.cells), re.M)  # 30 answers
SHORT = {"ch01-q4-answer": "q4_limit = 2.0\nq4_bound = 'never'",
         "ch01-q5-answer": "gpu_batch = q5.gpu.bf16_flops_per_s / q5.gpu.hbm_bytes_per_s",
         "ch01-e1-answer": "t_h100 = e1.flops / hw.H100.bf16_flops_per_s\n"
                           "t_v6e = e1.flops / hw.TPU_V6E.bf16_flops_per_s"}
# What any student may have as every other does, by kind; each kind alone holds over 200 tokens in 3 cells or more.
EVERYONES = {
    "the assignment's cells": [c.source for c in RELEASE.cells if c.cell_type == "code"],  # setup, settings, plots
    "short lines": ["", "pass", "import numpy as np", "t_h100, t_v6e", *(f"print({n})" for n in NAMES),
                    *(f'print("{n}:", {n})' for n in NAMES)],
    "notebook commands": [
        "%env SCALING_COURSE_PACKAGE=scaling-course @ git+https://github.com/scaling-course/scaling-course@v0.1.0",
        "!pip install --quiet jax[cpu]==0.4.30 numpy==1.26.4 sympy==1.13.1 matplotlib==3.9.0 nbformat==5.10.4",
        "!pip install --quiet git+https://github.com/scaling-course/scaling-course@v0.1.0#egg=scaling-course[colab]",
        "%matplotlib inline\n%load_ext autoreload\n%autoreload 2\n%config InlineBackend.figure_format = 'retina'"],
}


@pytest.mark.parametrize("stripped", [False, True], ids=["as released", "metadata gone"])
@pytest.mark.parametrize("kind", list(EVERYONES))
def test_students_with_only_what_everyone_has_in_common_are_not_named(tmp_path, kind, stripped):
    """Cells every student may have alike make no two the same: the assignment's own cells as released (the setup
    cell, the settings, the tests, the plots), empty cells, ``pass``, short lines, notebook commands (``%env``,
    ``!pip``), and short answers that everyone right writes alike; with the metadata gone (every cell the student's
    own) too. Two students whose work is nothing else are not named."""
    a = _assignment(tmp_path)
    for student in ("ada", "bea"):
        nb = _answered(SHORT)
        nb.cells += [nbformat.v4.new_code_cell(text) for text in EVERYONES[kind]]
        _graded(a, student, _stripped(nb) if stripped else nb)
    assert copies.find(a) == []
    assert copies.report(a) == []


@pytest.mark.parametrize("stripped", [False, True], ids=["as released", "metadata gone"])
def test_two_honest_students_with_different_work_are_not_named(tmp_path, stripped):
    """Two whole notebooks of their own, with everything a class has in common besides: not named, either way."""
    a = _assignment(tmp_path)
    for student, seed in (("cy", 3), ("dee", 4)):
        nb = _answered({**_honest(seed, ANSWERS), **SHORT})
        nb.cells += [nbformat.v4.new_code_cell(text) for kind in EVERYONES.values() for text in kind]
        _graded(a, student, _stripped(_moved(nb)) if stripped and student == "dee" else nb)
    assert copies.find(a) == []
    assert copies.report(a) == []


@pytest.mark.every_chapter
def test_in_every_chapter_the_cells_a_student_wrote_are_the_answers_however_the_notebook_holds_them(tmp_path):
    """Each chapter's reference notebook writes its non-trivial answer cells and nothing else, with its metadata or
    without it, its answers in place or moved; the release notebook, with or without metadata, writes nothing: every
    cell the assignment gives (setup, settings, tests, plots, helpers) is everyone's."""
    for master in sorted((ROOT / "source").glob("ch*/*.ipynb")):
        ch = master.parent.name
        source, release = nbformat.read(master, as_version=4), nbformat.read(ROOT / "release" / ch / master.name, 4)
        stubs = release_stubs(release)
        a = Assignment(tmp_path, ch, ch, master, stubs, {}, locked=release_locked(release))
        full = filled_notebook(release, source)
        written = {}
        for form, nb in {"full": full, "stripped": _stripped(full), "moved": _moved(full), "release": release,
                         "stripped release": _stripped(release)}.items():
            path = tmp_path / "submitted" / form / ch / master.name
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            write_atomic(tmp_path / "autograded" / form / ch / master.name,
                         nbformat.v4.writes(inert(sanitize(source, stubs, path).notebook)))
            written[form] = copies.written(a, form, copies.given(a))
        answers = {copies.normalised(c.source) for c in full.cells if _gid(c) in stubs}
        assert {d for d, n in answers if n >= copies.MIN_CELL_TOKENS} == set(written["full"]), ch
        assert written["full"].keys() == written["stripped"].keys() == written["moved"].keys(), ch
        assert written["release"] == written["stripped release"] == {}, ch


def test_shared_short_numeric_answers_alone_are_not_a_copy(tmp_path):
    """Questions with no variant have one right value, which a short line computes the same way for everyone: two
    students whose only answers are such lines, written alike, share less than MIN_TOKENS of work."""
    a = _assignment(tmp_path)
    short = {"ch01-q4-answer": "q4_limit = 2.0\nq4_bound = 'never'",
             "ch01-q5-answer": "gpu_batch = q5.gpu.bf16_flops_per_s / q5.gpu.hbm_bytes_per_s",
             "ch01-e1-answer": "t_h100 = e1.flops / hw.H100.bf16_flops_per_s\n"
                               "t_v6e = e1.flops / hw.TPU_V6E.bf16_flops_per_s"}
    _graded(a, "ada", _answered(short))
    _graded(a, "bea", _answered(short))
    assert copies.find(a) == []


def test_the_report_covers_students_graded_in_earlier_runs_and_skips_grader_errors(tmp_path):
    """The stored results decide, not who this run graded; a result the grader failed on (no fingerprint) has no
    graded notebook to compare."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    assert copies.find(a) == []
    _graded(a, "zed", _full(), sha="-")  # overwritten below as a grader error
    failed = json.loads((tmp_path / ".scaling-course" / "results" / CH / "zed.json").read_text()) | {"sha256": ""}
    write_atomic(tmp_path / ".scaling-course" / "results" / CH / "zed.json", json.dumps(failed))
    _graded(a, "bob", _full())  # a later run, of bob alone
    assert _pairs(a) == {("alice", "bob")}


def test_a_group_is_one_line_that_names_ten_students_at_most(tmp_path):
    a = _assignment(tmp_path)
    same = nbformat.writes(_full()).encode()
    for i in range(12):
        _graded(a, f"s{i:02d}", same)
    assert len(copies.find(a)) == 12 * 11 // 2  # the file has every pair
    header, line = copies.report(a)
    assert "s00, s01" in line and "s09 and 2 more (13 of 13 written cells identical, pair by pair)" in line, line
    assert len(list(csv.reader((tmp_path / ".scaling-course" / "copies" / f"{CH}.csv").open()))) == 1 + 66


# --- bounded ----------------------------------------------------------------------------------------------------

def test_answer_cells_of_huge_text_do_not_slow_the_check(tmp_path):
    """Each answer cell at the grader's own cut (MAX_CELL_CHARS), in text that costs a tokenizer most (quotes and
    comments), plus cells of the student's own: the check reads a bounded prefix of each, so it costs little more
    than reading the notebooks' JSON (a Python tokenizer over the whole text takes seconds a notebook)."""
    a = _assignment(tmp_path)
    bulk = ("'#\"' # '\n" * (MAX_CELL_CHARS // 8))[:MAX_CELL_CHARS]
    hostile = _answered({gid: f"v{i} = {i}\n{bulk}"[:MAX_CELL_CHARS] for i, gid in enumerate(ANSWERS)})
    hostile.cells += [nbformat.v4.new_code_cell(f"w{i} = {i}\n{bulk}"[:MAX_CELL_CHARS]) for i in range(2)]
    for i in range(4):
        _graded(a, f"huge-{i}", hostile)
    files = sorted((tmp_path / "autograded").glob(f"*/{CH}/{CH}.ipynb"))
    started = time.process_time()  # CPU time: two wall-clock windows differ by what else the machine runs
    for f in files:
        json.loads(f.read_bytes())
    parse = time.process_time() - started
    started = time.process_time()
    found = copies.find(a)
    took = time.process_time() - started
    assert took < 0.3 + 2.5 * parse, (took, parse)
    assert {(p.a, p.b) for p in found} >= {("huge-0", "huge-1")}  # the same huge text is still the same


def test_a_notebook_near_the_size_limit_is_compared_and_one_that_cannot_be_read_is_named(tmp_path):
    """A pasted image (a markdown cell's attachment) is kept by sanitize, so an autograded notebook may be as large as
    a submission may be, plus its outputs: a copy behind 18 MiB of image is still compared. A notebook the check cannot
    read is not left out in silence: the summary names it, so hiding from the check is seen."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    padded = _full()
    image = "A" * (18 * 2**20)
    padded.cells.append(nbformat.v4.new_markdown_cell("![x](attachment:x.png)",
                                                      attachments={"x.png": {"image/png": image}}))
    _graded(a, "bob", padded)
    assert _pairs(a) == {("alice", "bob")}
    unreadable = tmp_path / "autograded" / "carol" / CH / f"{CH}.ipynb"
    _graded(a, "carol", _full())
    unreadable.write_text('{"cells": [')
    lines = copies.report(a)
    assert any("carol" in line and "not compared" in line for line in lines), lines
    assert not any("alice" in line and "not compared" in line for line in lines), lines


@pytest.mark.parametrize("bulk", [
    [f"cell_{i} = {i} * e1.flops + {i}" for i in range(copies.MAX_CELLS + 1)],  # many cells of one's own
    [f"v{i} = 1\n" + "x = 'pad'\n" * (copies.CELL_CHARS // 10) for i in range(copies.MAX_CODE_CHARS
                                                                         // copies.CELL_CHARS + 1)],  # much text
], ids=["cells", "characters"])
def test_bulk_before_a_copy_does_not_hide_it(tmp_path, bulk):
    """The check reads at most MAX_CELLS written cells and MAX_CODE_CHARS characters of a notebook: a notebook with
    more, put before its copied cells, is not compared but named, as an unreadable one is."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    nb = _full()
    nb.cells = [nbformat.v4.new_code_cell(text) for text in bulk] + nb.cells
    _graded(a, "bob", nb)
    assert copies.find(a) == []
    lines = copies.report(a)
    assert any("bob not compared" in line and "written cells" in line for line in lines), lines


# --- what the staff see, and what nobody else does ----------------------------------------------------------

def test_a_run_names_copies_in_its_summary_and_a_file_and_changes_no_grade(tmp_path, monkeypatch, capsys):
    a = _assignment(tmp_path)
    (tmp_path / "nbgrader_config.py").write_text("")
    handed = {"alice": _full(), "bob": _full(), "carol": RELEASE}
    for student, nb in handed.items():
        folder = tmp_path / "submitted" / student / CH
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{CH}.ipynb")

    def graded(a, student, folder, limits):
        _graded(a, student, handed[student])
        stored = json.loads((tmp_path / ".scaling-course" / "results" / CH / f"{student}.json").read_text())
        return {**stored, "problems": [f"a note on {student}'s notebook"]}

    monkeypatch.setattr(factory, "shared", lambda home: contextlib.nullcontext())
    monkeypatch.setattr(pipeline, "prepare", lambda course_dir, name, late=None: a)
    monkeypatch.setattr(pipeline, "warm", lambda a, n: (a, Warming("")))
    monkeypatch.setattr(results, "write_result", lambda db_url, result: None)
    monkeypatch.setattr(pipeline, "grade_submission", graded)
    summary = pipeline.grade(tmp_path, CH, jobs=1)
    assert {r["student"]: r["score"] for r in summary.results} == {"alice": 44.0, "bob": 44.0, "carol": 44.0}
    assert summary.problems == {s: [f"a note on {s}'s notebook"] for s in handed}  # nothing for the student
    assert any("alice, bob" in line for line in summary.copies), summary.copies
    cli.print_summary(tmp_path, CH, summary)
    out = capsys.readouterr().out
    assert re.search(r"possible copies.*\n.*alice, bob \(13 of 13 written cells identical\)", out, re.I), out
    assert out.rstrip().split("\n")[-1].startswith("3 graded")  # the last line is still the count
    with (tmp_path / ".scaling-course" / "copies" / f"{CH}.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["student_a"], r["student_b"], r["identical_cells"]) for r in rows] == [("alice", "bob", "13")]
    for student in handed:
        assert "cop" not in (tmp_path / "autograded" / student / CH / f"{CH}.ipynb").read_text().lower()


def test_the_docs_say_what_variants_do_not_stop_and_where_the_copy_report_is():
    security = " ".join((ROOT / "docs" / "security.md").read_text().split())
    grading = " ".join((ROOT / "docs" / "grading.md").read_text().split())
    assert "variants do not stop copied code" in security.lower()
    assert ".scaling-course/copies/" in grading and ".scaling-course/copies/" in security


@pytest.mark.parametrize("text, same_as", [
    ("x = 1\ny = x * 2", "x=1\n\n\ny   =   x*2   # doubled"),
    ("def f(a):\n    return a  # id", "def f(a):\n  return a"),
    ("s = '# not a comment'", "s = '# not a comment'  # but this is"),
    ("x = 1\nif x:\n    y = 2", "%env SCALING_COURSE_PACKAGE=scaling-course\n!pip install \\\n  jax\nx = 1\n"
                                  "if x:\n    %time z = 3\n    y = 2"),
])
def test_normalised_text_ignores_spacing_comments_blank_lines_and_notebook_commands(text, same_as):
    assert copies.normalised(text) == copies.normalised(same_as)


def test_normalised_text_keeps_what_a_program_says():
    assert copies.normalised("x = 1") != copies.normalised("x = 2")
    assert copies.normalised("s = '# a'") != copies.normalised("s = '# b'")


@pytest.mark.parametrize("text, other", [
    ('x = """text # A\nline"""', 'x = """text # B\nline"""'),  # a "#" in a string of several lines
    ("x = '''a\n# b'''", "x = '''a\n# c'''"),
    ('s = "a \\" # b"', 's = "a \\" # c"'),  # an escaped quote does not end the string
    ("for i in range(3):\n    x += 1\ny = x", "for i in range(3):\n    x += 1\n    y = x"),  # indentation is meaning
    ("if a:\n  b\n  c", "if a:\n  b\nc"),
    ("y = (a\n% b)", "y = (a\n)"),  # a line in brackets is no notebook command
])
def test_normalised_text_tells_strings_and_blocks_apart(text, other):
    assert copies.normalised(text) != copies.normalised(other)


@pytest.mark.parametrize("text, same_as", [
    ("\uff45\uff11 = 2", "e1 = 2"),  # fullwidth letters: the same Python name (NFKC)
    ("for i in r:\n    x = (1,\n  2)\ny", "for i in r:\n\tx = (1,\n            2)  # c\n\ny"),  # brackets, tabs
    ("def f():\n    '''doc\n  # not a comment\n'''\n    return 1",
     "def f():\n  '''doc\n  # not a comment\n'''\n  return 1"),
])
def test_normalised_text_reads_names_and_indentation_as_python_does(text, same_as):
    assert copies.normalised(text) == copies.normalised(same_as)


def test_normalised_text_stays_linear_on_unclosed_strings():
    start = time.perf_counter()
    copies.normalised('"""' * 6_000 + "'" * 2_000)
    copies.normalised(("'a" * 5_000 + "\n") * 2)
    copies.normalised('"\\' * 10_000 + "\\")  # every quote opens a string that only a lone backslash ends
    assert time.perf_counter() - start < 1.0



@pytest.mark.with_reference
def test_a_student_who_pasted_the_public_reference_answers_is_named_alone(tmp_path):
    """The source's solution cells are public (the repository, the package): one student who pasted them had no
    classmate to be paired with and was never named. The reference is compared as one more student; an honest
    student with work of their own is not paired with it."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    _graded(a, "bob", _answered({gid: f"# bob's own try at {gid}\nvalue_{i} = {i} * 2 + 1" for i, gid in
                                 enumerate(ANSWERS)}))
    assert {(p.a, p.b) for p in copies.find(a)} == {(copies.REFERENCE, "alice")}
    assert any("course's reference answers" in line for line in copies.report(a))


def _formatted(text: str) -> str:
    """A copy put through a formatter: the parser's quotes, brackets and line breaks."""
    return ast.unparse(ast.parse(text))


def _renamed(text: str) -> str:
    """A copy whose functions' local names are changed."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for arg in node.args.args:
                arg.arg += "_mine"
            for name in ast.walk(node):
                if isinstance(name, ast.Name) and name.id in {a.arg[:-5] for a in node.args.args}:
                    name.id += "_mine"
    return ast.unparse(tree)


def _lines_swapped(text: str) -> str:
    """A copy with the first two statements of the cell in the other order (independent ones, or not)."""
    body = ast.parse(text).body
    return ast.unparse(ast.Module(body=[*body[1::-1], *body[2:]], type_ignores=[])) if len(body) > 1 else text


@pytest.mark.parametrize("change", [_formatted, _renamed, _lines_swapped], ids=lambda f: f.__name__.strip("_"))
def test_a_copy_retyped_through_a_formatter_renamed_or_reordered_is_named(tmp_path, change):
    """Each earned the classmate's full marks and went unnamed: cells were compared token for token."""
    a = _assignment(tmp_path)
    _graded(a, "alice", _full())
    _graded(a, "bob", _answered({gid: change(_reference(gid)) for gid in ANSWERS}))
    assert ("alice", "bob") in _pairs(a)
