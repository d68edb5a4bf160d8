"""Every chapter notebook matches its records, passes nbgrader validate, and its release fails it."""

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from autograder import probes
from autograder.questions import AuthoringError, Chapter, Function, load_chapter
from autograder.release import (
    CHECK_LINE,
    SOLUTION_BLOCK,
    complete_notebook,
    complete_solution_cells,
    complete_test_cells,
    function_lines,
    release,
)
from tests.paths import CHAPTERS, ROOT


def _nb(chapter: str, folder: str = "source"):
    return nbformat.read(ROOT / folder / chapter / f"{chapter}.ipynb", as_version=4)


def _as_written(nb, chapter: str):
    """The notebook as its author writes it: each test cell one check line with no nbgrader metadata, and
    each program or function answer a stub, which the release fills with the record's model."""
    models = {q.qid for q in load_chapter(chapter).questions if q.kind in ("program", "function")}
    solution = None
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            solution = cell
        elif meta.get("grade"):
            cell.source = cell.source.splitlines()[-1]
            cell.metadata = {}
            qid, name = CHECK_LINE.match(cell.source).groups()
            if qid in models:
                head, body, tail = SOLUTION_BLOCK.match(solution.source).groups()
                lines = body.splitlines(keepends=True)
                first, end = function_lines(body)[name]
                stub = f"def {name}(*args):\n    ...\n"
                solution.source = head + "".join(lines[:first]) + stub + "".join(lines[end:]) + tail
    return nb


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_writes_test_cells_and_models_from_the_records(chapter):
    """From one check line per question and a stub per program or function, the release writes exactly
    the committed notebook: the records are the one source of points, locks and model answers."""
    nb = _as_written(_nb(chapter), chapter)
    records = load_chapter(chapter)
    replaced = []
    assert complete_test_cells(records, nb) + complete_solution_cells(records, nb, replaced) == []
    assert nb == _nb(chapter)
    assert replaced == []  # a stub is the model's place, nothing of the author's is written over


def test_the_release_names_a_model_it_cannot_place():
    chapter = "ch01_rooflines"
    nb = _as_written(_nb(chapter), chapter)
    test = next(c for c in nb.cells if c.source == 'check("ch01-cx4-split-matmul", split_matmul)')
    test.source = 'check("ch01-cx4-split-matmul", split)'
    records = load_chapter(chapter)
    assert complete_solution_cells(records, nb) == [
        "ch01-cx4-split-matmul: the notebook's answer is split, the record's model split_matmul: give both one name"]
    test.source = 'check("ch01-cx4-split-matmul", split_matmul)'
    solution = nb.cells[nb.cells.index(test) - 1]
    solution.source = solution.source.replace("def split_matmul(", "def split(")
    assert complete_solution_cells(records, nb) == [
        "ch01-cx4-split-matmul: its solution cell defines no function split_matmul"]
    solution.source = solution.source.replace("def split(", "def split_matmul(")
    reads_a_constant = Chapter(records.name, records.title, tuple(
        replace(q, model=split_matmul) if q.qid == "ch01-cx4-split-matmul" else q for q in records.questions))
    assert complete_solution_cells(reads_a_constant, nb) == [
        "ch01-cx4-split-matmul: its model reads RECORDS_MESH, which the notebook does not define before its test cell"]


def test_the_release_names_a_checked_name_no_cell_sets():
    """A check line whose variable no cell above it sets (a typo) would tell every student to run an answer cell
    that does not exist: the release refuses it, for every kind of question."""
    chapter = "ch01_rooflines"
    nb = _as_written(_nb(chapter), chapter)
    records = load_chapter(chapter)
    test = next(c for c in nb.cells if c.source.startswith('check("ch01-e1-') and c.source.endswith(")"))
    qid, variable = re.match(r'check\("([^"]+)", (\w+)\)', test.source).groups()
    test.source = f'check("{qid}", {variable}x)'
    assert complete_solution_cells(records, nb) == [
        f"{qid}: its test cell checks {variable}x, which no cell before it sets"]
    test.source = f'check("{qid}", {variable})'
    assert complete_solution_cells(records, nb) == []


def split_matmul(x, y):  # a model written with a constant of the records, which the notebook lacks
    return RECORDS_MESH(x, y)  # noqa: F821


def test_release_writes_points_and_locks_from_the_records(tmp_path):
    """Points or a lock changed by hand in the notebook are put back; the file is rewritten only then."""
    chapter = "ch01_rooflines"
    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / chapter, course / "source" / chapter)
    path = course / "source" / chapter / f"{chapter}.ipynb"
    complete_notebook(course, chapter)
    assert path.read_bytes() == (ROOT / "source" / chapter / f"{chapter}.ipynb").read_bytes()
    nb = _nb(chapter)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution")]
    tests[0].metadata["nbgrader"]["points"] = 7
    tests[1].metadata["nbgrader"]["locked"] = False
    tests[2].source = tests[2].source.splitlines()[-1]  # the check line alone, as an author writes it
    nbformat.write(nb, path)
    assert complete_notebook(course, chapter) == []
    assert path.read_bytes() == (ROOT / "source" / chapter / f"{chapter}.ipynb").read_bytes()
    # A model edited in the notebook, not in the records, is written over, and the release says so.
    solution = next(c for c in nb.cells if "def split_matmul(" in c.source and "BEGIN SOLUTION" in c.source)
    solution.source = solution.source.replace('"X")', '"X") * 1.0')
    nbformat.write(nb, path)
    said = []
    shutil.copy(ROOT / "nbgrader_config.py", course)
    release(course, [chapter], say=said.append)
    assert path.read_bytes() == (ROOT / "source" / chapter / f"{chapter}.ipynb").read_bytes()
    assert said == [f"source/{chapter}: wrote the model answers of solutions/{chapter}.py over other versions in "
                    "the notebook: split_matmul (edit models in the records)"]


def test_the_release_refuses_a_notebook_whose_questions_do_not_match_its_records(tmp_path):
    """What the release cannot write from the records (autograder.release.complete_test_cells) is named."""
    chapter = "ch01_rooflines"
    nb = _as_written(_nb(chapter), chapter)
    tests = [c for c in nb.cells if c.source.startswith("check(")]
    qids = [t.source.split('"')[1] for t in tests]
    tests[1].source = tests[1].source.replace("check(", "print(")
    tests[2].source = tests[0].source
    tests[3].source = 'check("ch01-zz-unknown", x)'
    tests[4].source += "\nprint('done')"
    tests[4].metadata = {"nbgrader": {"grade": True, "grade_id": "g4", "points": 1, "solution": False}}
    problems = complete_test_cells(load_chapter(chapter), nb)
    assert problems == [f"{qids[0]} has two test cells", "test cell ch01-zz-unknown has no record in solutions/",
                        'test cell g4 is not one check("<question id>", <answer>) line',
                        *(f"{q} has a record but no test cell" for q in qids[1:5])]
    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / chapter, course / "source" / chapter)
    nbformat.write(nb, course / "source" / chapter / f"{chapter}.ipynb")
    with pytest.raises(AuthoringError, match="disagrees with solutions"):
        complete_notebook(course, chapter)


def _keyword_functions(chapter: str, nb) -> dict[str, str]:
    """Answer variable -> question id, for each function question the check calls by keyword: those
    without a builder (``fn(**probe)``) and those whose builder passes keywords alone."""
    records = load_chapter(chapter)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        m = meta.get("grade") and not meta.get("solution") and CHECK_LINE.match(cell.source.splitlines()[-1])
        q = records[m["qid"]] if m else None
        if isinstance(q, Function) and (not q.builder or not probes.build(q.builder, q.probes[0])[0]):
            out[m["var"]] = q.qid
    return out


def positional_calls(chapter: str, nb) -> list[str]:
    """Calls, in the cells a student does not write, of a function answer with two or more arguments of
    which one is positional (a ``*spread`` counts as two). The check calls the student's function with the
    prompt's parameter names, so a student's function with those names in another order passes it; a
    demo that calls it positionally would then plot or print wrong numbers."""
    names, found = _keyword_functions(chapter, nb), []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        source = re.sub(r"^\s*[%!].*$", "", cell.source, flags=re.M)  # IPython magics and shell lines
        for call in ast.walk(ast.parse(source)):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names):
                continue
            spread = any(isinstance(a, ast.Starred) for a in call.args)
            if call.args and (spread or len(call.args) + len(call.keywords) >= 2):
                found.append(f"{chapter} cell {i} ({names[call.func.id]}): {ast.get_source_segment(source, call)}")
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_plain_cells_call_function_answers_by_keyword(chapter):
    """Demo and plot cells call a student's function as the check does, by the prompt's parameter names."""
    found = positional_calls(chapter, _nb(chapter, "release"))
    assert found == [], "call these by keyword, with the prompt's parameter names:\n" + "\n".join(found)


def test_the_scan_finds_a_positional_call_of_a_function_answer():
    nb = _nb("ch01_rooflines", "release")
    nb.cells.append(nbformat.v4.new_code_cell(
        "%time x = critical_batch(act_bytes=2, weight_bytes=2, out_bytes=2, peak=1, bw=1)\n"
        "y = critical_batch(2, weight_bytes=2, out_bytes=2, peak=1, bw=1)\nz = critical_batch(*args)\n"
        "w = [critical_batch(**kw), critical_batch(kw), print(1, 2)]"))
    last = f"ch01_rooflines cell {len(nb.cells) - 1} "
    assert [f for f in positional_calls("ch01_rooflines", nb) if f.startswith(last)] == [
        f"{last}(ch01-cx3-critical-batch): {call}"
        for call in ("critical_batch(2, weight_bytes=2, out_bytes=2, peak=1, bw=1)", "critical_batch(*args)")]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_setup_cell_is_first_and_locked(chapter):
    code = [c for c in _nb(chapter).cells if c.cell_type == "code"]
    meta = code[0].metadata.get("nbgrader", {})
    assert meta.get("grade_id") == "setup" and meta.get("locked"), "the first code cell must be the locked setup"
    assert "print(course.setup(version=" in code[0].source  # before anything touches JAX (see test_bootstrap)


@functools.cache
def _validated(folder: str, invert: bool) -> dict[str, str]:
    """What ``nbgrader validate`` says of each chapter's notebook in ``folder``, by chapter: one run over all of them
    (each notebook still runs in a kernel of its own), since starting nbgrader costs seconds a call."""
    paths = [str(ROOT / folder / chapter / f"{chapter}.ipynb") for chapter in CHAPTERS]
    cmd = [sys.executable, "-m", "nbgrader", "validate", *paths] + (["--invert"] if invert else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800, cwd=ROOT,
                          env=os.environ | {"PYTHONUNBUFFERED": "1"})  # its log and its verdicts in the order written
    starts = [(m.start(), Path(m.group(1)).stem) for m in re.finditer(r"Validating '([^']+)'", proc.stdout)]
    ends = [start for start, _ in starts[1:]] + [len(proc.stdout)]
    said = {chapter: proc.stdout[start:end] for (start, chapter), end in zip(starts, ends, strict=True)}
    return {chapter: said.get(chapter, f"not validated: {proc.stdout[-3000:]}") for chapter in CHAPTERS}


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_source_passes_validate(chapter):
    said = _validated("source", invert=False)[chapter]
    assert "Success! Your notebook passes all the tests." in said, said[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_fails_every_test(chapter):
    said = _validated("release", invert=True)[chapter]
    assert "Success! The notebook does not pass any tests." in said, said[-4000:]


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_program_whose_collectives_the_student_writes_is_asked_for_in_shard_map_first(chapter):
    """A jax.jit program whose collectives the compiler placed earns half where the question asks the student to
    write them (``ProgramSpec.compiler_places`` False). Chapter 8's notebook never named shard_map, so a right jit
    program with exactly the asked collective found out at its check: before a chapter's first such question, its
    markdown names `jax.shard_map`."""
    from autograder.questions import Program

    own = {q.qid for q in load_chapter(chapter).questions
           if isinstance(q, Program) and not q.spec.compiler_places and any(q.spec.collectives.values())}
    if not own:
        pytest.skip("no program question whose collectives the student writes")
    said = ""
    for cell in nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4).cells:
        if _grade_id(cell) in own:
            assert "shard_map" in said, f"{_grade_id(cell)}: no markdown cell before it names jax.shard_map"
            return
        said += cell.source if cell.cell_type == "markdown" else ""
    pytest.fail(f"no cell of the release notebook is graded as one of {sorted(own)}")


@pytest.mark.parametrize("line", ['check("ch13-q3-routing", q3_routing)', 'check("ch13-q3-routing",q3_routing)',
                                  'check( "ch13-q3-routing" , q3_routing )  '])
def test_a_check_line_is_read_alike_whatever_its_spacing(line):
    """One pattern for the release, the demo and the self-check: a missing space after the comma gave the release
    three messages, two of them false ("no test cell"), while the demo read the line."""
    from autograder.questions import CHECK_LINE

    m = CHECK_LINE.fullmatch(line.strip())
    assert m and (m["qid"], m["var"]) == ("ch13-q3-routing", "q3_routing")
