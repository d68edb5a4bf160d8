"""What a student reads for the common mistakes, and whether the notebooks keep their promises.

- Every argument a function question's prose describes arrives as described: a numpy array where the
  prose says array, a list where it says list (``autograder.probes.argument`` is the one rule).
- No plain cell of a release notebook uses a name that only a model answer defines: the prose, a test
  cell or an earlier plain cell must ask for it or define it.
- A function that returns None, or the wrong type, or is no function at all, is told so in those words.
- A misspelled question id gets one line with the nearest ids, never a traceback.
- Hints locked after unreadable answers say why; numbers, formulas and counts given in the wrong form say
  what to write instead.
"""

from __future__ import annotations

import ast
import builtins
import re

import nbformat
import numpy as np
import pytest
import sympy as sp

from autograder import probes
from autograder.checks import judge
from autograder.kinds import function as fn_kind
from autograder.questions import CHECK_LINE, Function, chapter_names, load_chapter
from course import progress
from course.answers import AnswerError, check, grade, hint, verdict
from tests.chapter_checks import recorded
from tests.paths import ROOT

CHAPTERS = {name: load_chapter(name) for name in chapter_names()}
FUNCTIONS = [q for c in CHAPTERS.values() for q in c.questions if isinstance(q, Function)]


def _release(chapter: str):
    return nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)


# --- F1: the arguments arrive as the prose says ---------------------------------------------------------

TYPE_WORD = re.compile(r"\b(arrays?|lists?|tuples?)\b", re.I)


def _prose(chapter: str, qid: str) -> str:
    """The markdown that poses question ``qid``: the cells between the previous question's cells (a
    solution or test cell) and the cell that defines the function its check line names."""
    cells = _release(chapter).cells
    test = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == qid)
    name = CHECK_LINE.search(cells[test].source).group(2)
    answer = max(i for i, c in enumerate(cells[:test]) if c.cell_type == "code" and (
        re.search(rf"^def {name}\(", c.source, re.M) or c.metadata.get("nbgrader", {}).get("solution")))
    start = max((i for i, c in enumerate(cells[:answer]) if c.cell_type == "code"
                 and (c.metadata.get("nbgrader", {}).get("solution") or c.metadata.get("nbgrader", {}).get("grade"))),
                default=-1)
    return "\n".join(c.source for c in cells[start + 1:answer] if c.cell_type == "markdown")


def _sentences(text: str) -> list[str]:
    """Sentences with code spans other than a bare name (``x``, ``lengths[b]``) and math other than a
    bare name (``$q[B, T, N, H]$``) blanked, so that their dots and words split or type nothing."""
    def name_or_blank(m: re.Match) -> str:
        name = re.fullmatch(r"([A-Za-z_]\w*)(\[.*\])?", m.group(1) or m.group(2) or "", re.S)
        return f"`{name.group(1)}`" if name else "CODE"

    text = re.sub(r"`([^`]*)`|\$([^$]*)\$", name_or_blank, text)
    return [s for s in re.split(r"(?<=[.;])\s+|\n\s*\n|\n\s*[-\d]+[.)]?\s", text) if s.strip()]


def _promised(prose: str, name: str) -> set[str]:
    """What the prose calls argument ``name``: for each sentence that names it, the type word nearest the
    name ("array", or "list" for list and tuple)."""
    found = set()
    for s in _sentences(prose):
        for m in re.finditer(rf"`{re.escape(name)}`", s):
            words = [(min(abs(w.start() - m.end()), abs(m.start() - w.end())), w.group(1).lower())
                     for w in TYPE_WORD.finditer(s)]
            if words:
                found.add("array" if min(words)[1].startswith("array") else "list")
    return found


def _arriving(q: Function) -> dict[str, str]:
    """The arguments of ``q`` that arrive as an array or a list, on its public and drawn cases."""
    out: dict[str, str] = {}
    for case in [*q.probes, *fn_kind.drawn_probes(q, "types")]:
        _, kwargs = probes.build(q.builder, case)
        for k, v in kwargs.items():
            if isinstance(v, np.ndarray):
                out[k] = "array"
            elif isinstance(v, list | tuple):
                out.setdefault(k, "list")
    return out


@pytest.mark.parametrize("q", [pytest.param(q, id=q.qid) for q in FUNCTIONS if not q.builder])
def test_arguments_arrive_as_the_prose_says(q):
    prose = _prose(next(c for c in CHAPTERS if c.startswith(q.chapter)), q.qid)
    for name, kind in _arriving(q).items():
        said = _promised(prose, name)
        assert said, f"{q.qid}: the prose never says what `{name}` is (it arrives as a {kind})"
        called = " and a ".join(sorted(said))
        assert said == {kind}, f"{q.qid}: the prose calls `{name}` a {called}; it arrives as a {kind}"


def test_the_rule_makes_arrays_of_numbers_only():
    """Lists of numbers of one type, flat or nested with rows of equal length, become numpy arrays;
    lists of flags, names or mixed rows (a table of [children, bytes/s] pairs) stay lists."""
    assert probes.argument([[1, 2], [3, 4]]).dtype == np.int64
    assert probes.argument([[1.5, 2.0]]).shape == (1, 2)
    assert probes.argument([[[0.5]], [[1.5]]]).shape == (2, 1, 1)
    for stays in ([True, False], ["X", ""], [[8, 4.5e11], [4, 1e11]], [[1, 2], [3]], [], [1, 2.5], {"X": 2}):
        assert probes.argument(stays) == stays


def test_a_natural_answer_that_takes_the_prose_at_its_word_passes():
    """ch10's prose says x is a numpy array; an answer that reads x.shape is right."""
    q = next(q for q in FUNCTIONS if q.qid == "ch02-cx1-hops")

    def hops(src, dst, shape, wrap):  # arrays, as promised: no conversion
        d = np.abs(src - dst)
        return np.where(wrap, np.minimum(d, shape - d), d).sum(axis=1)

    assert judge(q, recorded(q, hops)).ok
    assert verdict(q.qid, hops).ok


# --- F2: plain cells use only names the student is asked for -----------------------------------------------

def _bound(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            out.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
    return out


def _parse(source: str) -> ast.AST:
    return ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))


def unasked_names(nb) -> list[tuple[int, list[str]]]:
    """(cell, names) for each plain code cell of a release notebook that uses a name nothing before it
    defines (an earlier plain cell), asks for (a name in backticks in the prose) or checks (a test cell):
    in the release the solution cells are stubs, so such a name exists only in the model answer."""
    known, asked, found = set(dir(builtins)), set(), []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            asked |= set(re.findall(r"`([A-Za-z_]\w*)", cell.source))
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            continue
        tree = _parse(cell.source)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if meta.get("grade"):
            asked |= used
            continue
        missing = sorted(used - _bound(tree) - known - asked)
        if missing:
            found.append((i, missing))
        known |= _bound(tree)
    return found


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_plain_cells_use_only_names_the_notebook_asks_for(chapter):
    assert unasked_names(_release(chapter)) == []


def test_the_scan_finds_a_name_only_a_model_answer_defines():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Write `f`."),
                nbformat.v4.new_code_cell("raise NotImplementedError()", metadata={"nbgrader": {"solution": True}}),
                nbformat.v4.new_code_cell("print(f(2), helper)")]
    assert unasked_names(nb) == [(2, ["helper"])]


# --- F3: what a function answer returned ----------------------------------------------------------------

ROLL = "ch10-q1-roll-in-shard"
ATTAINABLE = "ch01-cx2-attainable"


def _both(qid, answer):
    """The self-check's verdict and the grader's, which must agree."""
    q = next(q for q in FUNCTIONS if q.qid == qid)
    s, g = verdict(qid, answer), judge(q, recorded(q, answer))
    assert (s.diagnosis, s.message) == (g.diagnosis, g.message)
    return s


def test_a_function_that_forgets_return_is_told_so():
    def attainable(B, D, F, peak, bw, act_bytes, weight_bytes, out_bytes):
        B * D  # noqa: B018

    v = _both(ATTAINABLE, attainable)
    assert not v.ok and "returned None: did you forget `return`?" in v.message, v.message
    assert "dict" not in v.message


def test_a_nested_list_is_read_as_its_values_and_the_input_named_by_its_shape():
    """Nested lists are an array's values (``record._leaves``): a wrong roll as .tolist() is judged element by element,
    as the array itself would be, not refused as "a list of 16 lists"."""
    def roll_in_shard(x, shift):
        return np.roll(x, shift, axis=0).tolist()  # a list of 16 rows of 8, rolled over the whole array

    v = _both(ROLL, roll_in_shard)
    assert "x=array of shape (16, 8)" in v.message, v.message
    assert "of the 128 elements of the returned array are wrong" in v.message, v.message
    assert "16 values" not in v.message


def test_the_wrong_type_names_the_real_type():
    v = _both(ATTAINABLE, lambda **kw: {1, 2})
    assert "set" in v.message and "dict" not in v.message, v.message


def test_the_wrong_number_of_values_is_not_an_error_it_raised():
    v = _both("ch01-cx3-critical-batch", lambda **kw: 1.0)
    assert "returned 1 value; expected 2 values" in v.message and "raised" not in v.message, v.message


def test_not_a_function_is_unreadable_not_an_error_it_raised():
    v = _both(ATTAINABLE, 5)
    assert str(v.status) == "invalid", v
    assert "raised" not in v.message and "Expected a function, got a number" in v.message, v.message


# --- F4: a misspelled question id -------------------------------------------------------------------------

@pytest.mark.parametrize("call", [check, grade, lambda qid, _: hint(qid)], ids=["check", "grade", "hint"])
@pytest.mark.parametrize("typo", ["ch01-e1-h100-tme", "ch1-e1-h100-time"])
def test_a_misspelled_id_gets_one_line_with_the_nearest_id(call, typo):
    with pytest.raises(AnswerError) as e:
        call(typo, 1e-3)
    text = "\n".join(e.value._render_traceback_())
    assert "\n" not in text and "did you mean 'ch01-e1-h100-time'?" in text, text
    assert isinstance(e.value, LookupError)


@pytest.mark.parametrize(("typo", "near"), [("ch01-e33", "'ch01-e3'?"), ("ch1-e3", "did you mean 'ch")])
def test_a_misspelled_setting_gets_one_line_with_the_nearest_name(typo, near):
    import course

    with pytest.raises(AnswerError) as e:
        course.setting(typo)
    text = "\n".join(e.value._render_traceback_())
    assert "\n" not in text and near in text, text


@pytest.fixture
def fingerprints_without(tmp_path, monkeypatch):
    """The installed course's self-check data without the chapters given (``[]``: none at all), as an install of
    another version (or a broken one) has it; the kernel's setup says which version its notebook was released
    with."""
    from autograder import record
    from course import answers, devices

    def install(chapters, released_with=None):
        folder = tmp_path / "fingerprints"
        folder.mkdir()
        for f in answers._files() if chapters else []:  # []: no chapter's at all
            if f.name[:4] not in chapters:
                (folder / f.name).write_text(f.read_text())
        monkeypatch.setenv(record.CHAPTER_DATA_ENV, str(folder))
        monkeypatch.setattr(devices, "_state", dict(devices._state))
        monkeypatch.delenv("SCALING_COURSE_DEVICES", raising=False)
        from importlib.metadata import version

        devices.setup("cpu", version=released_with or version("scaling-course"))
        for cached in (answers._chapter_data, answers._answer_owners):
            cached.cache_clear()

    yield install
    from course import answers as after

    for cached in (after._chapter_data, after._answer_owners):
        cached.cache_clear()


def _line(e: BaseException) -> str:
    shown = e._render_traceback_()
    assert len(shown) == 1 and "\n" not in shown[0] and 'File "' not in shown[0], shown
    return shown[0]


@pytest.mark.parametrize("missing", [["ch03"], []], ids=["this-chapters-file", "every-file"])
def test_a_course_install_without_the_chapters_data_says_to_install_the_notebooks_version(fingerprints_without,
                                                                                         missing):
    """The locked setting cell and check cells name ids the learner never typed: no "did you mean" another
    chapter's id, no traceback, no "check the name": the installed course lacks the chapter, so install the version
    the notebook was released with."""
    import course

    fingerprints_without(missing)
    for call in (lambda: course.setting("ch03-e1"), lambda: check("ch03-e2-ways", 2),
                 lambda: hint("ch03-e2-ways")):
        with pytest.raises(AnswerError) as e:
            call()
        line = _line(e.value)
        assert line.startswith("AnswerError: ") and "has no self-check data for ch03" in line, line
        assert "did you mean" not in line and "check the" not in line, line
        assert "pip install" in line and "scaling-course" in line, line
        if not missing:
            assert "scaling-course release" in line and "instructors" in line.lower(), line


def test_an_id_the_installed_version_does_not_know_says_the_versions_differ(fingerprints_without):
    """An old notebook beside a newer course: a check id renamed since says that the versions differ (the
    likely cause), not a near id of another question."""
    import course

    fingerprints_without(["ch13"], released_with="0.0.1")
    for call in (lambda: check("ch03-e2-pieces", 2), lambda: course.setting("ch03-e9")):
        with pytest.raises(AnswerError) as e:
            call()
        line = _line(e.value)
        assert "released with scaling-course 0.0.1" in line and "did you mean" not in line, line
        assert "pip install" in line, line


# --- F5: hints after unreadable answers -------------------------------------------------------------------

def test_a_hint_locked_after_unreadable_answers_says_they_could_not_be_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(progress.ENV_PATH, str(tmp_path / "progress.json"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(progress, "_memory", {})
    for _ in range(2):
        with pytest.raises(AnswerError):
            check("ch01-e1-h100-time", "3 parsecs")
    hint("ch01-e1-h100-time")
    out = capsys.readouterr().out
    assert "could not be read" in out and "run the check cell on your answer first" not in out, out


# --- F6: numbers, formulas and counts in the wrong form ---------------------------------------------------

@pytest.mark.parametrize(("qid", "answer", "says", "not_says"), [
    ("ch01-e1-h100-time", 2 * sp.Symbol("B", positive=True), "a formula in B", "Unknown unit"),
    ("ch10-e4-overhead", "244 us / 224 us", "Compute it first", "Unknown unit"),
    ("ch04-q1-total-params", "13B", "13e9", "not the right kind of unit"),
    ("ch04-q1-total-params", "13 tokens", "leave out 'tokens'", "Unknown unit"),
    ("ch01-e2-dot-bytes", "N*2 FLOPs", "drop 'FLOPs'", "'2*F'"),
    ("ch01-e2-dot-bytes", "2*N bytes", "drop 'bytes'", "not a formula I can read"),
    ("ch04-q1-total-params", "13 bn", "13e9", "Unknown unit"),
])
def test_an_answer_in_the_wrong_form_is_told_what_to_write(qid, answer, says, not_says):
    v = verdict(qid, answer)
    assert str(v.status) == "invalid", v
    assert says in v.message and not_says not in v.message, v.message


# --- F7: no sentence has a field left unfilled -------------------------------------------------------------

# Every reader of a student's answer, with the answers that make it say each thing it can say: the number,
# formula and choice questions through both judges, a function's results, and the demo cells' readers.
NUMBER_QUESTIONS = ("ch01-e1-h100-time", "ch01-e3-critical-batch")  # a time, a plain number
FORMULA_QUESTION = "ch01-e2-dot-flops"
CHOICE_QUESTION = "ch12-e6-shard-bandwidth"


def _corpus() -> tuple[list, list]:
    """(answers to a number, answers to a formula): the engine's tables of unreadable answers, and a few
    readable wrong ones."""
    from tests.engine.test_formula import INVALID as FORMULA_INVALID
    from tests.engine.test_numbers import INVALID as NUMBER_INVALID

    numbers = [a for cases in NUMBER_INVALID.values() for a, _ in cases]
    numbers += ["2 / 1.5 x 10^3", "3 GB", "1 parsec", "13B", "240 tokens", "2*B", 1.0, 5e-3, 7.3e-4, 1e3]
    formulas = [a for cases in FORMULA_INVALID.values() for a in cases] + ["2*N bytes", "N", "3*N", "N**2", "2NN"]
    return numbers, formulas


def _messages() -> list[tuple[object, str]]:
    """(answer, what the student reads) from every reader of the corpus."""
    from course import as_expr, as_number

    questions = {q.qid: q for c in CHAPTERS.values() for q in c.questions}
    numbers, formulas = _corpus()
    said: list[tuple[object, str]] = []

    def both(qid, answer):
        q = questions[qid]
        said.extend((answer, v.message) for v in (verdict(qid, answer), judge(q, recorded(q, answer))))

    for answer in numbers:
        for qid in NUMBER_QUESTIONS:
            both(qid, answer)
        for unit in ("s", ""):
            try:
                as_number(answer, unit)
            except ValueError as e:
                said.append((answer, str(e)))
    for answer in formulas:
        both(FORMULA_QUESTION, answer)
        for names in ("N", None):
            try:
                as_expr(answer, names)
            except ValueError as e:
                said.append((answer, str(e)))
    for answer in ("neither", True, [150], np.int64(999), None, 370, 1.5):
        both(CHOICE_QUESTION, answer)
    q = questions[ATTAINABLE]
    for result in (None, {1, 2}, "fast", [[1.0]], (1.0, 2.0), lambda: 1, np.zeros((2, 2)), float("nan")):
        both(ATTAINABLE, lambda result=result, **kw: result)
    both(ATTAINABLE, lambda **kw: (q.solution(**kw),))
    both(ATTAINABLE, 5)
    return said


def test_no_sentence_a_student_reads_has_an_unfilled_field(monkeypatch):
    """A sentence whose template names a field its caller did not give prints "?" for it ("Expected ?, got a
    value of type Fraction"): every reader must give every field its sentences name."""
    from autograder import messages
    from tests.badinput.common import PLACEHOLDER

    missing: list[str] = []

    def record_missing(self, key):
        missing.append(key)
        return "?"

    monkeypatch.setattr(messages._Default, "__missing__", record_missing)
    said = _messages()
    assert not missing, f"fields left unfilled: {sorted(set(missing))}"
    for answer, message in said:
        first = message.split("\n")[0]  # the lines after it echo the student's text under a caret
        own = str(answer) if isinstance(answer, str) else ""
        stray = [m.group() for m in PLACEHOLDER.finditer(first) if m.group() not in own]
        assert not stray and not re.search(r"(^|[\s'(])\?([\s,.;:)]|$)", first), (answer, message)


def test_the_corpus_makes_every_reader_say_every_unreadable_sentence():
    """The check above covers each sentence for unreadable answers (those the grader alone writes aside)."""
    from autograder import messages

    questions = {q.qid: q for c in CHAPTERS.values() for q in c.questions}
    numbers, formulas = _corpus()
    seen = {verdict(FORMULA_QUESTION, a).diagnosis for a in formulas}
    seen |= {verdict(qid, a).diagnosis for a in numbers for qid in NUMBER_QUESTIONS}
    seen |= {verdict(CHOICE_QUESTION, a).diagnosis for a in ("neither", True)}
    seen |= {judge(questions[ATTAINABLE], recorded(questions[ATTAINABLE], 5)).diagnosis}
    unseen = set(messages._INVALID) - seen - {"no_record", "too_expensive"}  # the grader's, about a run
    assert not unseen, unseen
