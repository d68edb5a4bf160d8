"""The copy report (grading/copies.py): submissions of one assignment whose answer cells are the same, named for the
staff after each run, from every stored result; never a grade or a word in a student's feedback.

The notebooks are what the grader leaves in autograded/ (the student's file rebuilt by ``sanitize`` on the master,
then outputs as a run would add them), so the cells compared are those the grade was given for."""

import contextlib
import csv
import json
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
from autograder.grading.sanitize import MAX_CELL_CHARS, release_stubs, sanitize
from autograder.grading.warmup import Warming

ROOT = Path(__file__).resolve().parents[2]
CH = "ch01_rooflines"
SOURCE = nbformat.read(ROOT / "source" / CH / f"{CH}.ipynb", as_version=4)
RELEASE = nbformat.read(ROOT / "release" / CH / f"{CH}.ipynb", as_version=4)
STUBS = release_stubs(RELEASE)
ANSWERS = [gid for gid in STUBS]  # the chapter's 13 answer cells, in notebook order


def _gid(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _assignment(tmp_path: Path) -> Assignment:
    master = tmp_path / "source" / CH / f"{CH}.ipynb"
    master.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(SOURCE, master)
    return Assignment(tmp_path, CH, CH, master, STUBS, {})


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


def _pairs(a: Assignment) -> set[tuple[str, str]]:
    return {(p.a, p.b) for p in copies.find(a)}


def _restyled(text: str) -> str:
    """The same code, as a student who tidies a copy would hand it in: other spacing, comments, blank lines."""
    lines = []
    for line in text.split("\n"):
        if not re.search("[\"'#]", line):  # a string's text is the program's, left as it is
            line = re.sub(r"\s*([=*/+])\s*", r" \1 ", line).rstrip()
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
    assert pair.same == pair.answered_a == pair.answered_b == len(ANSWERS) == 13
    lines = copies.report(a)
    assert any("alice, bob" in line and "13 of 13 answered cells identical" in line for line in lines), lines
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
    assert any("12 of 13 answered cells identical" in line for line in copies.report(a))


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
    assert "s00, s01" in line and "s09 and 2 more (13 of 13 answered cells identical, pair by pair)" in line, line
    assert len(list(csv.reader((tmp_path / ".scaling-course" / "copies" / f"{CH}.csv").open()))) == 1 + 66


# --- bounded ----------------------------------------------------------------------------------------------------

def test_answer_cells_of_huge_text_do_not_slow_the_check(tmp_path):
    """Each answer cell at the grader's own cut (MAX_CELL_CHARS), in text that costs a tokenizer most (quotes and
    comments), plus ungraded cells: the check reads a bounded prefix of each answer, so it costs little more than
    reading the notebooks' JSON (a Python tokenizer over the whole text takes seconds a notebook)."""
    a = _assignment(tmp_path)
    bulk = ("'#\"' # '\n" * (MAX_CELL_CHARS // 8))[:MAX_CELL_CHARS]
    hostile = _answered({gid: bulk for gid in ANSWERS})
    hostile.cells += [nbformat.v4.new_code_cell(bulk) for _ in range(2)]
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
    assert re.search(r"possible copies.*\n.*alice, bob \(13 of 13 answered cells identical\)", out, re.I), out
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
])
def test_normalised_text_ignores_spacing_comments_and_blank_lines(text, same_as):
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
