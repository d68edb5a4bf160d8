"""``scaling-course release``: self-check fingerprints and nbgrader release notebooks from source/.

Two outputs, both committed and both regenerated here: ``course/fingerprints/<chapter>.json`` (from
the records in ``solutions/``) and ``release/<chapter>/`` (nbgrader's generate_assignment on
``source/<chapter>/``). Regenerating on a clean checkout changes no file; a test proves it.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import inspect
import json
import os
import re
import symtable
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import model_traffic, reference_results
from .built_so_far import complete_built_cell
from .course_config import variant_plan
from .distribution import BOOTSTRAP_END, DistributionError, bootstrap, colab_prefix
from .fingerprint import make_chapter
from .grading import STATE
from .kinds.common import diagnosed_as
from .questions import (
    CHECK_LINE,
    AuthoringError,
    Chapter,
    Function,
    Program,
    ProgramSpec,
    Question,
    chapter_names,
    load_chapter,
)

COURSE_ROOT = Path(__file__).resolve().parents[1]  # this repository: the course directory it ships
CHAPTER_DIR = re.compile(r"^ch\d\d_[a-z0-9_]+$")
# A question's test cell as the author writes it (one line), and as the release completes it: the hidden
# line records the answer for the grader, the visible one self-checks it.
TEST_CELL = re.compile(r'^### BEGIN HIDDEN TESTS\ngrade\("(?P<qid>[^"]+)", (?P<var>\w+)\)\n### END HIDDEN TESTS\n'
                       r'check\("(?P=qid)", (?P=var)\)$')


def fingerprint_dir() -> Path:
    import course

    return Path(course.__file__).parent / "fingerprints"


def released(chapter: str) -> dict[str, Any] | None:
    """The released self-check data of ``chapter`` (written from its records and the course's variant
    plan), or None where there is none (an assignment that is not a chapter)."""
    try:
        data = json.loads((fingerprint_dir() / f"{chapter}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("questions"), dict) else None


def released_questions(chapter: str) -> dict[str, dict[str, Any]] | None:
    """The released self-check data of ``chapter`` by question id (kind, points, ...), or None."""
    data = released(chapter)
    return None if data is None else data["questions"]


def source_chapters(course_dir: Path) -> list[str]:
    source = course_dir / "source"
    return sorted(d.name for d in source.iterdir() if d.is_dir() and CHAPTER_DIR.match(d.name))


def fingerprint_text(chapter: str, course_dir: Path = COURSE_ROOT) -> str:
    """The chapter's self-check data, with the variant plan of ``course_dir``'s nbgrader_config.py."""
    data = make_chapter(load_chapter(chapter), variant_plan(course_dir, chapter))
    answers = answer_variables(course_dir / "source" / chapter / f"{chapter}.ipynb")
    if answers:  # a demo cell run before an answer's cell says which answer it waits for (course/answers.py)
        data["answers"] = answers

    def compact(x: Any) -> str:
        return json.dumps(x, sort_keys=True, separators=(",", ":"))
    # One line per question, compact inside: a third of the size of indented JSON (the data of every choice
    # of every setting ships with the package), and a change to one record is still a one-line diff.
    head = [f"{json.dumps(k)}:{compact(v)}" for k, v in sorted(data.items()) if k != "questions"]
    questions = ",\n".join(f"{json.dumps(q)}:{compact(e)}" for q, e in sorted(data["questions"].items()))
    return "{" + ",\n".join(head) + ',\n"questions":{\n' + questions + "}}\n"


def answer_variables(path: Path) -> dict[str, str]:
    """The notebook's answers: variable -> the id of the first question whose test cell checks it ({} where there is
    no notebook). Released with the self-check data, so that the kernel knows an answer's name before its check
    cell has run."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return {}
    return _checked_names(nb)


def _checked_names(nb: Any) -> dict[str, str]:
    """Variable -> the id of the first question whose test cell checks it."""
    found: dict[str, str] = {}
    for cell in nb.cells:
        question = _question_of(cell)
        if question:
            found.setdefault(question[1], question[0])
    return found


def _answer_cell(cell: Any) -> bool:
    """Whether ``cell`` is an answer (solution) cell of a source notebook."""
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def _cell_head(cell: Any) -> str:
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return first[:60] + ("..." if len(first) > 60 else "")


def answer_name_problems(nb: Any) -> list[str]:
    """Every cell that is neither an answer (solution) cell nor a test cell and binds, at its top level (assigns,
    defines, imports as, loops over), a name that a test cell checks: run after the answer's cell, it overwrites the
    student's answer, and the check then judges the demo's value."""
    checked = _checked_names(nb)
    problems = []
    code_cells = [c for c in nb.cells if c.get("cell_type") == "code"]
    for n, cell in enumerate(code_cells, 1):
        if _answer_cell(cell) or _question_of(cell):
            continue
        for name in sorted(bound_names(cell.source) & set(checked)):
            problems.append(f"code cell {n} ({_cell_head(cell)!r}) binds {name}, the answer that the test cell of "
                            f"{checked[name]} checks: rename it in that cell, or a student who runs it after "
                            "answering loses the answer")
    return problems


def solution_only_problems(nb: Any) -> list[str]:
    """Every cell that is neither an answer (solution) cell nor a test cell and reads a name that only an answer
    cell's reference solution binds, and no test cell checks: the student was never asked for it, so a student who
    answers another way gets a NameError in a cell they cannot change (Chapter 8's frontier plot read the
    reference's helper ``decode_step``)."""
    checked = set(_checked_names(nb))
    code_cells = [c for c in nb.cells if c.get("cell_type") == "code"]
    given = set().union(*(bound_names(c.source) for c in code_cells if not _answer_cell(c)))
    only = set().union(*(bound_names(c.source) for c in code_cells if _answer_cell(c))) - checked - given
    problems = []
    for n, cell in enumerate(code_cells, 1):
        if _answer_cell(cell) or _question_of(cell):
            continue
        try:
            read = _names_read(ast.parse(_python_of(cell.source)))
        except SyntaxError:
            continue
        for name in sorted(read & only):
            problems.append(f"code cell {n} ({_cell_head(cell)!r}) reads {name}, which only the reference's answer "
                            "sets and no question asks for: a student who answers another way gets a NameError "
                            "there; ask for it (a question that checks it), or leave it out of the cell")
    return problems


_MESH_CALLS = ("mesh", "make_mesh", "Mesh")


def _builds_mesh(node: ast.AST) -> bool:
    """Whether running ``node`` builds a mesh (a call of course.mesh, jax.make_mesh or Mesh outside a def)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
        return False
    if isinstance(node, ast.Call):
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if called in _MESH_CALLS:
            return True
    return any(_builds_mesh(child) for child in ast.iter_child_nodes(node))


def direct_mesh_calls(code: str) -> list[str]:
    """The calls in ``code`` that build a mesh with JAX's own constructors (``jax.make_mesh``, ``Mesh``,
    ``jax.sharding.Mesh``), not the course's ``course.mesh``: where the kernel has fewer devices they stop in JAX's
    traceback, and ``course.mesh`` refuses in one line that says how to get the devices (``meshes.mesh``). Each as
    "line N: the call"."""
    try:
        tree = ast.parse(_python_of(code))
    except SyntaxError:
        return []
    from_jax = {(a.asname or a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] == "jax" for a in node.names if a.name == "make_mesh"}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = ast.unparse(node.func)
        if called.split(".")[-1] == "Mesh" or called == "jax.make_mesh" or called in from_jax:
            found.append(f"line {node.lineno}: {called}(...)")
    return found


def direct_mesh_problems(nb: Any) -> list[str]:
    """Every code cell that builds a mesh without the course (``direct_mesh_calls``): on a kernel with fewer
    devices it would show a traceback where every other mesh cell says in one line what to do."""
    problems = []
    code_cells = [c for c in nb.cells if c.get("cell_type") == "code"]
    for n, cell in enumerate(code_cells, 1):
        for call in direct_mesh_calls(cell.source):
            problems.append(f"code cell {n} ({_cell_head(cell)!r}) builds a mesh with JAX's constructor ({call}): on "
                            "a kernel with fewer devices it stops in JAX's traceback; build it with course.mesh(...) "
                            "(explicit=True for Explicit axes), which says in one line what to do")
    return problems


def _names_read(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def mesh_cell_problems(nb: Any) -> list[str]:
    """Names that an answer (solution) cell reads and that a cell building a mesh sets without needing the mesh:
    on a kernel with fewer devices than the mesh, that cell stops where it builds it, and the answers that read
    such a name cannot be given, though nothing in them needs the devices (as ch09's B_, T_, ... of Q2 were).
    Set them in a cell of their own. A name whose value needs the mesh (a compiled program) is the mesh's."""
    free: dict[str, str] = {}  # a name set without the mesh, in a cell that builds one -> that cell's first line
    problems = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        code = _python_of(cell.source)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        bound = bound_names(cell.source)
        if _answer_cell(cell):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "?")
            read = sorted(n for n in globals_read(code) if n in free)
            if read:
                problems.append(f"the answer cell {grade_id} reads {', '.join(read)}, which the cell "
                                f"{free[read[0]]!r} sets after it builds a mesh: on a kernel with fewer devices that "
                                "cell stops at the mesh, and these answers cannot be given. Set them in a cell of "
                                "their own, before the mesh")
        elif any(builds := [_builds_mesh(statement) for statement in tree.body]):
            tainted: set[str] = set()
            built = False  # what the cell sets before it builds its first mesh is set on any kernel
            for statement, makes in zip(tree.body, builds, strict=True):
                names = bound_names(ast.unparse(statement))
                built = built or makes
                if makes or _names_read(statement) & tainted:
                    tainted |= names
                elif built:
                    free.update(dict.fromkeys(names - tainted, _cell_head(cell)))
                else:
                    for name in names:
                        free.pop(name, None)
            for name in tainted:
                free.pop(name, None)
            continue
        for name in bound:
            free.pop(name, None)
    return problems


def test_cell_source(qid: str, variable: str) -> str:
    return f'### BEGIN HIDDEN TESTS\ngrade("{qid}", {variable})\n### END HIDDEN TESTS\ncheck("{qid}", {variable})'


def nbgrader_meta(grade_id: str, *, grade: bool, solution: bool, locked: bool,
                  points: float | None = None) -> dict[str, Any]:
    """A cell's nbgrader metadata, in the one form the course's cells carry."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    return meta if points is None else {**meta, "points": points}


def test_cell_metadata(qid: str, points: float) -> dict[str, Any]:
    """What nbgrader needs to grade, lock and never delete a question's test cell; the points are the record's."""
    return {"deletable": False, "editable": False,
            "nbgrader": nbgrader_meta(qid, grade=True, solution=False, locked=True, points=points)}


def _question_of(cell: Any) -> tuple[str, str] | None:
    """(question id, answer variable) of a test cell, complete or as the author wrote it; None otherwise."""
    if cell.get("cell_type") != "code" or _answer_cell(cell):
        return None
    m = TEST_CELL.match(cell.source) or CHECK_LINE.fullmatch(cell.source.strip())
    return (m["qid"], m["var"]) if m else None


def complete_test_cells(chapter: Chapter, nb: Any) -> list[str]:
    """Write every question's test cell from its record, in place, and name what cannot be written.

    The author writes one line per question, ``check("<qid>", <variable>)``, in a cell of its own where
    the self-check belongs; the variable is the notebook's, the rest is the record's: the hidden
    ``grade`` line, the grade id, the points and the lock. What stays for the author to fix: a graded
    cell not in that form, an id with no record, a question tested twice or not at all."""
    records = {q.qid: q for q in chapter.questions}
    seen: set[str] = set()
    problems = []
    for cell in nb.cells:
        graded = cell.get("metadata", {}).get("nbgrader", {})
        question = _question_of(cell)
        if question is None:
            if graded.get("grade") and not graded.get("solution"):
                problems.append(f"test cell {graded.get('grade_id', '?')} is not one "
                                f'check("<question id>", <answer>) line')
            continue
        qid, variable = question
        if qid not in records:
            problems.append(f"test cell {qid} has no record in solutions/")
        elif qid in seen:
            problems.append(f"{qid} has two test cells")
        else:
            cell.source = test_cell_source(qid, variable)
            cell.metadata.update(test_cell_metadata(qid, records[qid].points))
        seen.add(qid)
    problems += [f"{q} has a record but no test cell" for q in records if q not in seen]
    return problems


# A varied exercise's values, shown to the student in a locked cell of its own before its questions.
SETTING_LINE = re.compile(r'^(?P<var>[A-Za-z_]\w*) = course\.setting\("(?P<name>[^"]+)"\)$')


def setting_cell_metadata(name: str) -> dict[str, Any]:
    return {"deletable": False, "editable": False,
            "nbgrader": nbgrader_meta(f"{name}-setting", grade=False, solution=False, locked=True)}


def complete_setting_cells(chapter: Chapter, nb: Any) -> list[str]:
    """Lock every setting cell, ``<variable> = course.setting("<name>")`` (a graded id, so the grader runs
    the assignment's own line, never a student's edit), and name what cannot stand: a setting of the
    records that no cell shows before its first question, a name with no setting, one shown twice."""
    settings = {s.name: s for s in chapter.settings}
    shown: dict[str, int] = {}
    first_test: dict[str, int] = {}
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        question = _question_of(cell)
        if question:
            first_test.setdefault(question[0], i)
        m = SETTING_LINE.match(cell.source.strip())
        if m is None:
            if "course.setting(" in cell.source:
                problems.append(f"a cell asks for a setting other than as one line "
                                f'<variable> = course.setting("<name>"): {cell.source.strip()[:80]!r}')
            continue
        name = m["name"]
        if name not in settings:
            problems.append(f"setting {name} has no record in solutions/ (settings: {', '.join(settings) or 'none'})")
        elif name in shown:
            problems.append(f"setting {name} is shown twice")
        else:
            cell.source = m.group(0)
            cell.metadata.update(setting_cell_metadata(name))
        shown.setdefault(name, i)
    for name, s in settings.items():
        tests = [first_test[q] for q in s.qids if q in first_test]
        if name not in shown:
            problems.append(f'setting {name} is never shown: add a cell `{name.split("-")[-1]} = '
                            f'course.setting("{name}")` before its questions')
        elif tests and min(tests) < shown[name]:
            problems.append(f"setting {name} is shown after the test cell of one of its questions")
    return problems


def complete_setup_cell(nb: Any) -> list[str]:
    """Start the first code cell, the locked setup cell, with the bootstrap of this version and repository
    (``distribution.bootstrap``: pyproject.toml decides both), in place of the bootstrap it had, if any;
    the chapter's own lines after it stay."""
    cell = next((c for c in nb.cells if c.get("cell_type") == "code"), None)
    if cell is None or cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") != "setup":
        return ['the first code cell is not the locked setup cell (nbgrader grade id "setup"): '
                "write it with NotebookBuilder.setup"]
    lines = cell.source.splitlines()
    end = next((i + 1 for i, line in enumerate(lines) if line.startswith(BOOTSTRAP_END)), 0)
    cell.source = "\n".join([bootstrap(), *lines[end:]])
    return []


def complete_cells(chapter: Chapter, nb: Any, replaced: list[str] | None = None) -> list[str]:
    """Every cell the release writes (the setup cell's bootstrap; from the records: test cells, model
    answers, setting cells), and what stands in the way."""
    return (complete_setup_cell(nb) + complete_test_cells(chapter, nb) + complete_solution_cells(chapter, nb, replaced)
            + complete_setting_cells(chapter, nb) + answer_name_problems(nb) + mesh_cell_problems(nb)
            + direct_mesh_problems(nb) + solution_only_problems(nb))


# The block between the solution markers of a solution cell.
SOLUTION_BLOCK = re.compile(r"(?P<head>.*?### BEGIN SOLUTION\n)(?P<body>.*?)(?P<tail>### END SOLUTION.*)", re.S)
WRITTEN_FROM_MODELS = ("program", "function")


def function_lines(code: str) -> dict[str, tuple[int, int]]:
    """The top-level functions of ``code``: name -> (first line, line after the last), decorators included."""
    return {node.name: (min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1, node.end_lineno or 0)
            for node in ast.parse(code).body if isinstance(node, ast.FunctionDef)}


def _python_of(source: str) -> str:
    """A cell's source without its IPython lines (``%magic``, ``!shell``), which are no Python."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def bound_names(code: str) -> set[str]:
    """The names a notebook cell binds at its top level: imports, assignments, definitions."""
    code = _python_of(code)
    try:
        table = symtable.symtable(code, "<cell>", "exec")
    except SyntaxError:
        return set()
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}


def globals_read(code: str) -> set[str]:
    """The module-level names that the functions of ``code`` read, in any nested scope."""
    def read(table: symtable.SymbolTable) -> set[str]:
        names = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
        return names.union(*(read(child) for child in table.get_children()))
    return read(symtable.symtable(code, "<model>", "exec"))


def _is_stub(function: str) -> bool:
    """A function whose body holds nothing but a docstring, ``...`` or ``pass``: a place for the model."""
    body = ast.parse(textwrap.dedent(function)).body[0].body
    return all(isinstance(n, ast.Pass) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
               for n in body)


def _write_model(q: Question, variable: str, cell: Any, bound: set[str], replaced: list[str]) -> str | None:
    """Put the text of ``q``'s model where the solution ``cell`` defines the student's function (adding
    its name to ``replaced`` where that overwrites another version, not a stub); the problem, if that
    cannot be done. The model may read only what the notebook has defined by then (``bound``): a
    constant or kit helper of the records would fail there, as a NameError in the instructor's run."""
    try:
        model = q.solution
    except AuthoringError as e:
        return str(e)
    name = getattr(model, "__name__", repr(model))
    if name != variable:
        return f"{q.qid}: the notebook's answer is {variable}, the record's model {name}: give both one name"
    block = SOLUTION_BLOCK.match(cell.source) if cell is not None else None
    if block is None:
        return f"{q.qid}: no solution cell before its test cell"
    try:
        functions = function_lines(block["body"])
    except SyntaxError as e:
        return f"{q.qid}: its solution cell does not parse ({e.msg}, line {e.lineno})"
    if variable not in functions:
        return f"{q.qid}: its solution cell defines no function {variable}"
    text = textwrap.dedent(inspect.getsource(model))
    missing = sorted(globals_read(text) - bound - set(dir(builtins)))
    if missing:
        return (f"{q.qid}: its model reads {', '.join(missing)}, which the notebook does not define before "
                f"its test cell")
    lines = block["body"].splitlines(keepends=True)
    first, end = functions[variable]
    before = "".join(lines[first:end])
    if before != text and not _is_stub(before):
        replaced.append(variable)
    cell.source = block["head"] + "".join(lines[:first]) + text + "".join(lines[end:]) + block["tail"]
    return None


def complete_solution_cells(chapter: Chapter, nb: Any, replaced: list[str] | None = None) -> list[str]:
    """Write the model answer of every program and function question from its record, in place.

    The record's model (its reference, where the two are one) is the one text of the answer: the
    chapter's tests prove the grader accepts it, and the release copies it into the solution cell
    before the question's test cell, replacing that cell's function of the same name. What else the
    cell holds (visible helpers, other answers) stays the author's. ``replaced`` collects the names of
    the functions whose notebook version, neither a stub nor the model, was overwritten. A test cell of any
    other question whose variable no cell before it sets (a typo) is named: its students would be told to run
    an answer cell that does not exist."""
    replaced = [] if replaced is None else replaced
    records = {q.qid: q for q in chapter.questions}
    problems = []
    solution_cell = None
    bound: set[str] = set()  # what the notebook's code cells have defined so far
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        if _answer_cell(cell):
            solution_cell = cell
        question = _question_of(cell)
        q = records.get(question[0]) if question else None
        if q is not None and q.kind not in WRITTEN_FROM_MODELS and question[1] not in bound | set(dir(builtins)):
            problems.append(f"{q.qid}: its test cell checks {question[1]}, which no cell before it sets")
        if q is not None and q.kind in WRITTEN_FROM_MODELS:
            problem = _write_model(q, question[1], solution_cell, bound, replaced)
            problems += [problem] if problem else []
        bound |= bound_names(cell.source)
    return problems


def complete_notebook(course_dir: Path, chapter: str) -> list[str]:
    """Write the source notebook's test cells, model answers and list of what was built so far from the
    records (the file changes only where they were incomplete or stale); refuse, naming every problem, a
    notebook that does not match.
    Returns the names of the model answers written over another version in the notebook: a change made
    there, not in the records, is what the author must hear was replaced."""
    import nbformat

    path = course_dir / "source" / chapter / f"{chapter}.ipynb"
    text = path.read_text()
    nb = nbformat.reads(text, as_version=4)
    records = load_chapter(chapter)
    replaced: list[str] = []
    problems = complete_cells(records, nb, replaced) + complete_built_cell(course_dir, records, nb)
    if problems:
        raise AuthoringError(f"source/{chapter} disagrees with solutions/{chapter}.py:\n  " + "\n  ".join(problems))
    completed = nbformat.writes(nb) + "\n"
    if completed != text:
        path.write_text(completed)
    return replaced


def _plan_note(chapter: str, before: dict[str, Any] | None, after: dict[str, Any] | None, course_dir: Path) -> str:
    """What an instructor must hear where a release from a course folder other than the package's own checkout
    changed the variant plan the installed package keeps: every course folder on this installation shares it."""
    def plan(data: dict[str, Any] | None) -> dict[str, Any]:
        return {k: v for k, v in ((data or {}).get("variants") or {}).items() if k not in ("settings", "order")}

    if before is None or plan(before) == plan(after) or course_dir.resolve() == COURSE_ROOT:
        return ""
    return (f"course/fingerprints/{chapter}.json: the installed package now holds this folder's variant plan "
            f"({plan(after)}, before: {plan(before)}). Every course folder on this installation shares it, and the "
            "students' package is built from it: a folder with another plan must release again before it grades "
            "(or use an environment of its own).")


def write_fingerprints(chapter: str, course_dir: Path = COURSE_ROOT) -> Path:
    """Write the chapter's self-check data; where it changed (its records did), first refuse records the grader
    reads otherwise than they say (``record_problems``)."""
    path = fingerprint_dir() / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = fingerprint_text(chapter, course_dir)
    except AuthoringError as e:  # data that cannot be made (a hinted slip like its reference): every problem, named
        problems = list(dict.fromkeys([*record_problems(load_chapter(chapter)), str(e)]))
        raise AuthoringError(f"solutions/{chapter}.py:\n  " + "\n  ".join(problems)) from None
    if not path.exists() or path.read_text() != text:
        problems = record_problems(load_chapter(chapter))
        if problems:
            raise AuthoringError(f"solutions/{chapter}.py:\n  " + "\n  ".join(problems))
        path.write_text(text)
    reference_results.write(fingerprint_dir(), chapter, reference_specs(load_chapter(chapter)),
                            slip_results(load_chapter(chapter)))
    return path


def slip_results(chapter: Chapter) -> dict[str, bytes]:
    """The results of each program question's value-told slips (``kinds.program.value_slips``) at the self-check's
    seed, at every spec it is judged at, by file name: a wrong program whose results are one slip's is told that
    slip's hint, by the self-check and the grader alike."""
    from course.devices import simulated_cpus

    from .kinds.program import value_slips
    from .meshes import mesh
    from .programs import SELFCHECK_SEED, results

    files = {}
    for q in model_traffic.programs_of(chapter):
        slips = value_slips(q)
        for spec in model_traffic.judged_specs(q) if slips else ():
            simulated_cpus()
            arrays = []
            for s in slips:
                fn = functools.partial(s.answer, **dict(spec.mesh)) if q.spec.mesh_choices else s.answer
                try:
                    outs = results(spec, fn, SELFCHECK_SEED, make_mesh=mesh)
                except Exception as e:
                    raise AuthoringError(f"{q.qid}: the slip {s.answer.__name__} does not run at {spec.mesh}: "
                                         f"{type(e).__name__}: {e}") from None
                if len(outs) != max(1, len(spec.outputs)):
                    raise AuthoringError(f"{q.qid}: the slip {s.answer.__name__} returns {len(outs)} results")
                arrays += [reference_results.sampled(o) for o in outs]
            files[reference_results.slips_name(q.qid, spec)] = reference_results.encode(arrays)
    return files


def reference_specs(chapter: Chapter) -> list[ProgramSpec]:
    """The specs of the chapter's programs judged against a single-device reference, at the book's values and
    every other choice a setting offers, each at every mesh a student may choose: the self-check reads their
    results as data (``reference_results``)."""
    specs = [s for q in model_traffic.programs_of(chapter) if q.spec.reference for s in model_traffic.judged_specs(q)]
    return list({reference_results.shares_name(s): s for s in specs}.values())


SCALAR_KINDS = ("number", "formula", "choice")
def record_problems(chapter: Chapter) -> list[str]:
    """What the chapter's tests would find first in its scalar and function questions, at the book's values: a
    reference the grader refuses, a slip it gives full marks or another diagnosis than the record's; and a
    function whose public probes a constant passes (``constant_passes``). Judged only where the records changed
    (seconds a chapter: a function at its public probes alone); programs are left to the tests, which run them
    (``python -m pytest -m chNN``), but for a slip that is its model (``same_program``). Each problem is one line
    naming the question and the slip, whatever the kind."""
    from . import fingerprint, kinds
    from .checks import judge

    problems = []
    for q in chapter.questions:
        if isinstance(q, Program):
            problems += [f"{q.qid}: the slip {_named(s.answer)} gets full marks from the grader" for s in q.slips
                         if same_program(s.answer, q.model)]
        if q.kind not in (*SCALAR_KINDS, "function"):
            continue
        try:
            data = fingerprint.make(q)
        except AuthoringError as e:  # its slips' data cannot be made, and says why (kinds.function)
            problems.append(str(e))
            continue
        if not judge(q, kinds.encode(data, q.solution if isinstance(q, Function) else q.reference)).ok:
            problems.append(f"{q.qid}: the grader refuses its reference")
        if isinstance(q, Function) and constant_passes(q, data):
            problems.append(f"{q.qid}: its probes cannot tell a constant from the answer (a function that returns "
                            "the first probe's result passes them all): add a probe whose result differs")
        for slip in q.slips:
            v = judge(q, kinds.encode(data, slip.answer))
            said = _named(slip.answer)
            if v.ok:
                problems.append(f"{q.qid}: the slip {said} gets full marks from the grader")
            elif not diagnosed_as(v.diagnosis, slip.diagnosis):
                problems.append(f"{q.qid}: the slip {said} is diagnosed {v.diagnosis} by the grader, not "
                                f"{slip.diagnosis} as its record says")
    return problems


def _named(answer: Any) -> str:
    """A slip as its record writes it: a function by its name, a value as Python prints it."""
    return (getattr(answer, "__name__", None) if callable(answer) else None) or repr(answer)


def same_program(slip: Any, model: Any) -> bool:
    """Whether a program slip is its model: the same function, or one whose code reads the same but for its name
    and docstring. The release runs no program's slips (the tests judge them), but this one the grader passes
    whatever it is given, and the code alone tells."""
    if slip is model:
        return True
    try:
        trees = [ast.parse(textwrap.dedent(inspect.getsource(f))).body[0] for f in (slip, model)]
    except (OSError, TypeError, SyntaxError, IndexError):
        return False
    if not all(isinstance(t, ast.FunctionDef) for t in trees):
        return False
    for tree in trees:
        tree.name = "_"
        if ast.get_docstring(tree) is not None:
            tree.body = tree.body[1:]
    return ast.dump(trees[0]) == ast.dump(trees[1])


def constant_passes(q: Function, data: dict[str, Any]) -> bool:
    """Whether a function that returns the reference's result at the first probe, whatever it is given, passes
    every public probe: the self-check would then tick an answer that computes nothing. With one probe it always
    does, so a function question needs two probes or more whose results differ."""
    from . import kinds
    from .checks import judge
    from .kinds.function import _expected_items

    first = _expected_items(q, q.probes[0])
    result = first[0] if len(q.outputs) == 1 else first
    return judge(q, kinds.encode(data, lambda *args, **kwargs: result)).ok


def generate(course_dir: Path, chapter: str, database: bool = False, release_dir: Path | None = None) -> Path:
    """nbgrader generate_assignment for one chapter; with ``database`` it also registers the
    assignment and its grade cells in the gradebook (the grader needs that, the release does not).
    ``release_dir`` writes the student copy elsewhere than release/."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    # nbgrader runs the `alembic` command when it creates a gradebook: make this environment's
    # scripts findable even when the environment is not activated (.venv/bin/scaling-course ...).
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    config = Config()
    config.CourseDirectory.root = str(course_dir)
    config.GenerateAssignment.no_database = not database
    config.SaveCells.enabled = database
    config.Exchange.root = str(course_dir / STATE / "exchange")
    _load_course_config(course_dir, config)
    if release_dir is not None:
        config.CourseDirectory.release_directory = str(release_dir)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    result = api.generate_assignment(chapter, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader could not generate {chapter}:\n{result['error']}\n{result['log']}")
    return (release_dir or course_dir / "release") / chapter


def _load_course_config(course_dir: Path, config) -> None:
    from traitlets.config.loader import PyFileConfigLoader

    path = course_dir / "nbgrader_config.py"
    if path.exists():
        config.merge(PyFileConfigLoader(path.name, str(course_dir)).load_config())
        config.CourseDirectory.root = str(course_dir)


# An "Open in Colab" link of the README, up to the path of the notebook in the repository.
COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/[\w.-]+/")


def write_readme_links(course_dir: Path) -> bool:
    """Point the README's Colab links at the repository pyproject.toml names; whether the file changed."""
    path = course_dir / "README.md"
    if not path.is_file():
        return False
    text = path.read_text()
    linked = COLAB_LINK.sub(colab_prefix(), text)
    if linked != text:
        path.write_text(linked)
    return linked != text


def traffic_entries() -> tuple[dict[str, dict[str, dict[str, float]]], list[tuple[Program, ProgramSpec, str]]]:
    """``model_traffic``'s table as the records ask for it: the entries it holds that a record still asks for, and
    the (question, spec, key) it lacks (a new question, a changed spec, a new variant, a model that exports another
    program: the key holds the program's digest). Every chapter's: the table is one file, whichever chapters are
    released. Exports every model at every spec (seconds, once a process)."""
    old, entries = model_traffic.table(), {}
    todo: list[tuple[Program, ProgramSpec, str]] = []
    for name in chapter_names():
        for q in model_traffic.programs_of(load_chapter(name)):
            for spec in model_traffic.judged_specs(q):
                key = model_traffic.table_key(spec, exported_model(q, spec))
                if key in old.get(q.qid, {}):
                    entries.setdefault(q.qid, {})[key] = old[q.qid][key]
                else:
                    todo.append((q, spec, key))
    return entries, todo


def write_traffic() -> bool:
    """Measure what the table lacks, drop what no record asks for, write it; True when it changed."""
    path = model_traffic.table_path()
    if path is None:
        return False
    entries, todo = traffic_entries()
    for q, spec, key in todo:
        entries.setdefault(q.qid, {})[key] = measure_traffic(q, spec)
    text = model_traffic.text(entries)
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    model_traffic.table.cache_clear()
    return True


# Each model's program at each spec, by (question, spec key, model function): exported once a process.
_EXPORTED: dict[tuple[str, str, Any], str] = {}


def exported_model(q: Program, spec: ProgramSpec) -> str:
    """The question's model exported at ``spec`` on the 8 simulated devices, as a student's program is. A model that
    cannot be exported is the author's mistake, named with the question (a name its records module lacks: most
    often ``course``, which a model's ``course.mesh(...)`` reads)."""
    key = (q.qid, model_traffic.spec_key(spec), q.solution)
    if key not in _EXPORTED:
        from course.devices import simulated_cpus

        simulated_cpus()
        from .meshes import mesh
        from .programs import reference_program

        try:
            _EXPORTED[key] = reference_program(q, spec, make_mesh=mesh)
        except NameError as e:
            fix = " (add `import course` to the records module: a model builds its mesh with course.mesh(...))" \
                if e.name == "course" else ""
            raise AuthoringError(f"{q.qid}: the model reads {e.name}, which its records module does not define"
                                 f"{fix}") from None
        except Exception as e:
            raise AuthoringError(f"{q.qid}: the model cannot be exported at {spec.mesh}: "
                                 f"{type(e).__name__}: {e}") from None
    return _EXPORTED[key]


def measure_traffic(q: Program, spec: ProgramSpec) -> dict[str, float]:
    """What the question's model moves at ``spec``: exported and run as a student's program is, on the 8
    simulated devices (the collectives a program states do not depend on the machine)."""
    from .collectives import traffic
    from .meshes import mesh
    from .programs import run_exported, weighed_collectives

    report = run_exported(spec, exported_model(q, spec), 0, make_mesh=mesh)
    if report.error:
        raise AuthoringError(f"{q.qid}: the model does not run at {spec.mesh}: {report.error}")
    # a model's count with a loop of unknown length in it is as few as it may run: no yardstick
    flops = {model_traffic.MATMUL_FLOPS: report.flops} if report.flops is not None and report.flops_exact else {}
    return model_traffic.as_json({**traffic(weighed_collectives(spec, report)), **flops})


@contextlib.contextmanager
def _all_or_nothing(paths: list[Path]) -> Iterator[None]:
    """The files as they were where the block raises: a release refused for its records (a slip the grader reads
    otherwise) had already written the notebook's new points, which the grade then refused as the notebook's."""
    kept = {p: p.read_bytes() if p.is_file() else None for p in paths}
    try:
        yield
    except BaseException:
        for p, data in kept.items():
            if data is None:
                p.unlink(missing_ok=True)
            elif not p.is_file() or p.read_bytes() != data:
                p.write_bytes(data)
        raise


def release(course_dir: Path, chapters: list[str] | None = None, say: Callable[[str], None] = print) -> list[Path]:
    """Regenerate fingerprints and release notebooks for ``chapters`` (default: all in source/); ``say``
    tells what the release wrote over an author's own text."""
    names = chapters or source_chapters(course_dir)
    unknown = sorted(set(names) - set(source_chapters(course_dir)))
    if unknown:
        raise FileNotFoundError(f"no source/{unknown[0]}/ in {course_dir}; chapters there: "
                                f"{', '.join(source_chapters(course_dir)) or 'none'}")
    if write_traffic():
        say(f"solutions/{model_traffic.FILE_NAME}: measured what the new or changed program models move")
    out = []
    for name in names:
        with _all_or_nothing([course_dir / "source" / name / f"{name}.ipynb", fingerprint_dir() / f"{name}.json"]):
            replaced = complete_notebook(course_dir, name)
            before = released(name)
            write_fingerprints(name, course_dir)
        if replaced:
            say(f"source/{name}: wrote the model answers of solutions/{name}.py over other versions in the "
                f"notebook: {', '.join(replaced)} (edit models in the records)")
        readme = course_dir / "README.md"
        if readme.is_file() and f"| `{name}` |" not in readme.read_text():
            say(f"README.md has no row for {name} in its table of chapters: add one (questions and points, as "
                "docs/authoring.md says; the tests check it)")
        note = _plan_note(name, before, released(name), course_dir)
        if note:
            say(note)
        out.append(generate(course_dir, name))
    try:
        if write_readme_links(course_dir):
            say("README.md: the Colab links now open the repository of pyproject.toml")
    except DistributionError as e:
        say(f"README.md: Colab links left as they were: {e}")
    return out
