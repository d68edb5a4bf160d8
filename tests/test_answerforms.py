"""Demo and plot cells work with every answer form the README allows.

A formula may be sympy or text ("2*B*D*F/C") and a number a float or text with a unit ("1.2 ms"); the
grader reads them all, so a picture drawn from an answer must too. ``course.as_expr``/``as_number``
read them through the grader's own parsers; these tests prove that they do, that every notebook's demo
cells go through them, and that those cells run with text answers.
"""

from __future__ import annotations

import ast
import builtins
import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

import course
from autograder.questions import chapter_names, load_chapter
from autograder.verdict import Status
from course.symbols import B, D, F, symbol
from tests.paths import ROOT

NOTEBOOKS = sorted((ROOT / "source").glob("ch*/ch*.ipynb"))
READERS = {"as_expr", "as_number"}


# --- the helpers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [2 * B * D * F, "2*B*D*F", "2 * B * D * F", "F*D*B*2"])
def test_as_expr_reads_sympy_and_text_alike(answer):
    assert course.as_expr(answer, "B D F") == 2 * B * D * F


def test_as_expr_gives_the_course_positive_symbols():
    plain = sp.Symbol("B") * sp.Symbol("D")  # a student's own, assumption-free symbols
    expr = course.as_expr(plain)
    assert expr == B * D and all(s.is_positive for s in expr.free_symbols)
    assert course.as_expr("sqrt(4*B**2)") == 2 * B  # only true of positive B
    assert course.as_expr("N - 1").free_symbols == {symbol("N")}  # the course's N, not sympy's function


def test_as_expr_reads_numbers_and_constants():
    assert course.as_expr(0.5) == sp.Rational(1, 2) and course.as_expr(3) == 3
    assert course.as_expr("pi*B") == sp.pi * B


@pytest.mark.parametrize(("answer", "names", "words"), [
    ("2BD", "B D", "2*B"),
    ("B + Q", "B D", "Q"),
    ("__import__('os').system('true')", None, "cannot be read"),
    ("B.__class__", None, "attribute"),
    (None, "B", "No answer yet"),
    ("B == D", None, "cannot be read"),
    ([1, 2], None, "Expected a formula (a sympy expression or text like '2*B*D'), got a value of type list."),
])
def test_as_expr_explains_what_it_cannot_read(answer, names, words):
    with pytest.raises(course.UnreadableAnswer, match="cannot be read as a formula") as err:
        course.as_expr(answer, names)
    assert words in str(err.value)


@pytest.mark.parametrize(("answer", "unit", "expected"), [
    (0.0012, "s", 0.0012), ("1.2 ms", "s", 0.0012), ("1.2e-3", "s", 0.0012), (13, "", 13.0),
    ("13e9", "", 13e9), ("16 GB", "B", 16e9), ("3 days", "s", 3 * 86400.0),
    (Fraction(1, 990), "", 1 / 990), (Decimal("1.5"), "", 1.5), (sp.Integer(7), "B", 7.0),
    ("1.0101 x 10^-3 s", "ms", 1.0101), ("1.0101×10⁻³", "", 1.0101e-3),
])
def test_as_number_reads_floats_and_text_with_units(answer, unit, expected):
    assert course.as_number(answer, unit) == pytest.approx(expected)


@pytest.mark.parametrize(("answer", "unit"), [("3 GB", "s"), ("fast", "s"), (None, ""), ("1 parsec", "s"),
                                             ([1.0], "s"), (1j, "")])
def test_as_number_explains_what_it_cannot_read(answer, unit):
    with pytest.raises(course.UnreadableAnswer, match="cannot be read as a number") as err:
        course.as_number(answer, unit)
    assert "?" not in str(err.value) and "{" not in str(err.value), err.value


def test_as_expr_reads_a_fraction_as_the_exact_number():
    assert course.as_expr(Fraction(1, 2)) == sp.Rational(1, 2)


# --- the notebooks -------------------------------------------------------------------------------------

def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _answers(path: Path) -> dict[str, object]:
    """Variable -> question, for the formula and number answers the notebook's hidden tests record."""
    chapter = load_chapter(path.stem)
    out: dict[str, object] = {}
    for cell in _cells(path):
        tree = ast.parse("".join(cell["source"])) if cell["cell_type"] == "code" else None
        for node in ast.walk(tree) if tree else ():
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "grade"
                    and len(node.args) == 2 and isinstance(node.args[1], ast.Name)):
                q = chapter[node.args[0].value]  # type: ignore[attr-defined]
                if q.kind in ("formula", "number"):
                    out[node.args[1].id] = q
    return out


def _demo_cells(path: Path) -> list[tuple[int, str]]:
    """Code cells a student does not write and the grader does not score: demos and plots."""
    out = []
    for i, cell in enumerate(_cells(path)):
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] == "code" and not meta.get("solution") and not meta.get("grade") \
                and meta.get("grade_id") != "setup":
            out.append((i, "".join(cell["source"])))
    return out


def _raw_uses(source: str, answers: set[str]) -> list[str]:
    """Uses of an answer variable that are not the first argument of ``as_expr``/``as_number``."""
    tree = ast.parse(source)
    through = {id(call.args[0]) for call in ast.walk(tree)
               if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)
               and (getattr(call.func, "attr", None) in READERS or getattr(call.func, "id", None) in READERS)}
    return sorted({f"{n.id} (line {n.lineno})" for n in ast.walk(tree)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in answers
                   and id(n) not in through})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_demo_cells_read_answers_through_the_course_helpers(path):
    """``answer.subs(...)``, ``float(answer)`` or ``answer * 1e3`` in a demo cell crashes on a text answer
    ("1.2 ms"), which the check itself accepts."""
    answers = set(_answers(path))
    raw = {i: uses for i, src in _demo_cells(path) if (uses := _raw_uses(src, answers))}
    assert not raw, f"{path.stem}: demo cells use answers without course.as_expr/as_number: {raw}"


def _setup_namespace(path: Path) -> dict:
    """The setup cell's imports and plain assignments, without the bootstrap (conftest set up JAX)."""
    setup = next("".join(c["source"]) for c in _cells(path)
                 if c["metadata"].get("nbgrader", {}).get("grade_id") == "setup")
    tree = ast.parse(setup)
    keep = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom | ast.Assign)]
    ns: dict = {"course": course}  # imported inside the bootstrap's try
    exec(compile(ast.Module(keep, []), f"{path.stem}:setup", "exec"), ns)  # trusted course source
    return ns


def _defines(source: str) -> set[str]:
    tree = ast.parse(source)
    out = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    out |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    out |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.Lambda) for a in n.args.args}
    out |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    return out


def _free(source: str) -> set[str]:
    loaded = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - _defines(source) - set(dir(builtins))


def _providers(path: Path, index: int, answers: set[str]) -> list[str] | None:
    """Earlier cells (solutions included, tests not) that define what cell ``index`` needs besides the
    answers, as long as none of them runs JAX; None when some name has no such provider."""
    cells = _cells(path)
    setup = set(_setup_namespace(path))
    need = _free("".join(cells[index]["source"])) - answers - setup
    chosen: dict[int, str] = {}
    while need:
        name = need.pop()
        for i in range(index - 1, -1, -1):
            cell = cells[i]
            meta = cell["metadata"].get("nbgrader", {})
            src = "".join(cell["source"])
            if cell["cell_type"] == "code" and not meta.get("grade") and name in _defines(src):
                if "jax" in src or "mesh" in src or meta.get("grade_id") == "setup":
                    return None
                if i not in chosen:
                    chosen[i] = src
                    need |= _free(src) - setup - set().union(*map(_defines, chosen.values()))
                break
        else:
            return None
    return [chosen[i] for i in sorted(chosen)]


def _text_form(q) -> str:
    """The answer a student could type: the reference as text, a number with its unit."""
    if q.kind == "formula":
        return str(q.reference)
    return f"{float(q.reference)!r} {q.unit}".strip()


def _runnable_demos() -> list[tuple[Path, int]]:
    """Demo cells that use answers and whose other inputs come from earlier cells that run no JAX (the
    reference's functions, say); the rest run in the reference notebook's execution, with sympy answers."""
    out = []
    for path in NOTEBOOKS:
        answers = set(_answers(path))
        for i, src in _demo_cells(path):
            if _free(src) & answers and _providers(path, i, answers) is not None:
                out.append((path, i))
    return out


@pytest.mark.parametrize(("path", "index"), _runnable_demos(), ids=lambda x: getattr(x, "stem", str(x)))
def test_demo_cells_run_with_text_answers(path, index):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    answers = _answers(path)
    ns = _setup_namespace(path)
    for provider in _providers(path, index, set(answers)) or []:
        exec(compile(provider, f"{path.stem}:provider", "exec"), ns)  # trusted course source
    ns.update({var: _text_form(q) for var, q in answers.items()})  # after the reference's own values
    source = "".join(_cells(path)[index]["source"])
    try:
        exec(compile(source, f"{path.stem}[{index}]", "exec"), ns)  # trusted course source
    finally:
        plt.close("all")


# --- every form of a number a notebook may hold, through both judges ------------------------------------
# The grade is what ``grade(qid, answer)`` records in a grader's kernel (on the cases drawn for the
# submission), read back from the notebook's JSON and judged by the grader; the self-check is
# ``course.answers.verdict``. Each case below must get the same verdict, in the same words, from both.

SEED = "answer-forms"
QUESTIONS = {q.qid: q for name in chapter_names() for q in load_chapter(name).questions}


@pytest.fixture
def judges(monkeypatch, tmp_path):
    """``judges(qid, answer)``: (the grade, the self-check)."""
    from autograder import record
    from autograder.checks import judge
    from autograder.kinds.function import drawn_probes
    from course import answers

    shown: list[dict] = []
    monkeypatch.setattr(answers, "_display", shown.append)

    def both(qid, answer):
        q = QUESTIONS[qid]
        drawn = tmp_path / "drawn.json"
        drawn.write_text(json.dumps({qid: drawn_probes(q, SEED)} if q.kind == "function" else {}))
        shown.clear()
        with monkeypatch.context() as env:
            env.setenv(record.GRADER_ENV, "1")
            env.setenv(record.DRAWN_ENV, str(drawn))
            answers.grade(qid, answer)
        answers._graded.pop(qid, None)
        outputs = [{"output_type": "display_data", "data": json.loads(json.dumps(b))} for b in shown]
        rec = record.read(outputs, qid)
        assert rec is not None, shown
        return judge(q, rec["answer"], SEED), answers.verdict(qid, answer)

    return both


def _scalars(value):
    """``value`` as the numbers of numpy, JAX, sympy and the standard library hold it."""
    import jax.numpy as jnp
    import numpy as np

    forms = [np.float64(value), np.float32(value), np.array(value), np.array(value, dtype=np.float32),
             jnp.array(value, dtype=jnp.float32), sp.Float(value), Decimal(repr(float(value)))]
    if float(value).is_integer():
        n = int(value)
        forms += [np.int64(n), np.int32(n), np.uint16(n), np.array(n), jnp.array(n), sp.Integer(n), Fraction(n)]
    return forms


@pytest.mark.parametrize(("qid", "option"), [("ch12-e6-shard-bandwidth", 150), ("ch04-e6-alltoall-count", 2)])
def test_a_number_option_may_be_any_kind_of_number(judges, qid, option):
    for answer in _scalars(option):
        graded, checked = judges(qid, answer)
        assert graded.ok and checked.ok, (type(answer), graded, checked)


def test_a_wrong_number_option_is_a_wrong_choice_in_any_form(judges):
    import numpy as np

    for answer in (np.int64(370), sp.Integer(370), Fraction(370)):
        graded, checked = judges("ch12-e6-shard-bandwidth", answer)
        assert graded.diagnosis == checked.diagnosis == "wrong_option", (graded, checked)
    graded, checked = judges("ch12-e6-shard-bandwidth", np.bool_(True))  # a flag is no number
    assert graded.diagnosis == checked.diagnosis == "wrong_type" and graded.message == checked.message


@pytest.mark.parametrize(("qid", "answer", "right"), [
    # a choice whose options are amounts, written with their unit or another of its kind
    ("ch12-e6-shard-bandwidth", "150 GB/s", True), ("ch12-e6-shard-bandwidth", "150GB/s", True),
    ("ch12-e6-shard-bandwidth", "0.15 TB/s", True), ("ch12-e6-shard-bandwidth", "370 GB/s", False),
    # an option with other separators, in JAX's name, or a parallelism plan's parts in another order
    ("ch12-e4-bottleneck", "leaf-switch", True), ("ch12-e4-bottleneck", "Leaf_switches", True),
    ("ch09-e2-collective", "psum_scatter", True), ("ch11-c3-reduction", "psum-scatter", True),
    ("ch09-q2-strategy", "mp2-dp4", True), ("ch09-q2-strategy", "mp4-dp2", False),
    ("ch12-q52-config", "zero-pp8-tp8", True),
    # a number after an approximation mark, before a sentence's full stop, or with a unit word opening a sentence
    ("ch01-e1-h100-time", "~1.0101 ms", True), ("ch01-e1-h100-time", "≈ 1.0101 ms", True),
    ("ch01-e1-h100-time", "about 1.0101 ms", True), ("ch01-e1-h100-time", "1.0101 ms.", True),
    ("ch01-e1-h100-time", "1.0101 Milliseconds", True), ("ch01-e1-h100-time", "~2.0202 ms", False),
])
def test_honest_spellings_are_read_alike_by_both_judges(judges, qid, answer, right):
    graded, checked = judges(qid, answer)
    assert graded.ok is checked.ok is right, (graded, checked)
    assert (graded.diagnosis, graded.message) == (checked.diagnosis, checked.message)


def test_a_choice_of_amounts_declares_their_unit():
    """A choice whose options are numbers and whose prompt names their unit ("'450', '370' or '150' GB/s?") says
    so (``Choice.unit``), so that an answer written with the unit is the option of that amount."""
    import re

    from autograder.kinds.choice import _as_number
    from autograder.numbers import UNITS
    from autograder.questions import Choice

    amounts, undeclared = [], []
    for name in chapter_names():
        for q in load_chapter(name).questions:
            if isinstance(q, Choice) and all(_as_number(o) is not None for o in q.options):
                amounts.append(q.qid)
                if not q.unit and any(len(w) > 1 and w in UNITS for w in re.findall(r"[A-Za-z/%]+", q.prompt)):
                    undeclared.append(q.qid)
    assert len(amounts) >= 3 and undeclared == []


@pytest.mark.parametrize("answer", [Fraction(1, 990), Decimal("0.0010101"), sp.Rational(1, 990), "1/990"])
def test_a_number_may_be_a_fraction_or_a_decimal(judges, answer):
    graded, checked = judges("ch01-e1-h100-time", answer)
    assert graded.ok and checked.ok, (graded, checked)


def test_a_number_answer_may_be_any_kind_of_number(judges):
    for answer in _scalars(0.0010101):
        graded, checked = judges("ch01-e1-h100-time", answer)
        assert graded.ok and checked.ok, (type(answer), graded, checked)


@pytest.mark.parametrize("wrap", [Fraction, lambda x: Decimal(repr(x)), lambda x: sp.Float(x)],
                         ids=["Fraction", "Decimal", "sympy"])
def test_a_function_may_return_any_kind_of_number(judges, wrap):
    q = QUESTIONS["ch01-cx2-crossover"]
    graded, checked = judges(q.qid, lambda **kw: wrap(float(q.solution(**kw))))
    assert graded.ok and checked.ok, (graded, checked)


# Scientific notation as it is typed by hand: read when it is one number (with a unit after it or not).
@pytest.mark.parametrize(("qid", "answer"), [
    ("ch01-e1-h100-time", "1.0101 x 10**-3"), ("ch01-e1-h100-time", "1.0101 x 10^-3"),
    ("ch01-e1-h100-time", "1.0101×10⁻³"), ("ch01-e1-h100-time", "1.0101e−3"), ("ch01-e1-h100-time", "1.0101E−3 s"),
    ("ch01-e1-h100-time", "1.0101 × 10^(-3) s"), ("ch01-e1-h100-time", "1.0101·10⁻³ s"),
    ("ch01-e1-h100-time", "1.0101 * 10^-3"), ("ch01-e1-h100-time", "1.0101 X 10^−3"),
    ("ch01-e1-h100-time", "1.0101 x 10^0 ms"), ("ch01-e3-critical-batch", "2.4024 x 10^2"),
    ("ch01-e3-critical-batch", "2.4024×10²"), ("ch01-e3-critical-batch", "2.4024 x 10**+2"),
])
def test_scientific_notation_written_by_hand_is_read(judges, qid, answer):
    graded, checked = judges(qid, answer)
    assert graded.ok and checked.ok, (graded, checked)


# Inside a calculation a times-ten is not one number ("2 / 1.5 x 10^3": 2/1500, or 2/1.5 times 1000?):
# the sentence says how to write it.
@pytest.mark.parametrize(("answer", "fix"), [("2 / 1.0101 x 10^3", "1.0101e3"), ("1 + 1.0101×10⁻³", "1.0101e-3"),
                                             ("3 x 10**-3 / 2.97", "3e-3"), ("(1.0101 x 10^-3)", "1.0101e-3")])
def test_scientific_notation_inside_a_calculation_is_told_how_to_write(judges, answer, fix):
    graded, checked = judges("ch01-e1-h100-time", answer)
    assert graded.diagnosis == checked.diagnosis == "scientific_notation", (graded, checked)
    assert graded.message == checked.message and f"write {fix}" in graded.message, graded.message
    assert "unit" not in graded.message.split("\n")[0], graded.message


# --- a function that returns its one value in a tuple ---------------------------------------------------

@pytest.mark.parametrize("qid", ["ch01-cx2-crossover", "ch01-cx2-attainable", "ch03-cx1-local-shape"])
@pytest.mark.parametrize("wrapper", [tuple, list], ids=["tuple", "list"])
def test_a_function_that_returns_its_one_value_in_a_tuple_is_told_so(judges, qid, wrapper):
    q = QUESTIONS[qid]
    graded, checked = judges(qid, lambda **kw: wrapper([q.solution(**kw)]))
    for v in (graded, checked):
        assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, "returned:one"), v
    word = wrapper.__name__
    assert graded.message == checked.message == (
        f"Your function returned a {word} of one value, where the question asks for the value itself: "
        f"return it without the {'trailing comma' if word == 'tuple' else 'brackets'}."), graded.message


def test_a_one_dimensional_shape_is_a_tuple_of_one_number_and_right(judges):
    q = QUESTIONS["ch03-cx1-local-shape"]
    graded, checked = judges(q.qid, q.solution)
    assert graded.ok and checked.ok, (graded, checked)


# Plain-number questions whose prompt says FLOPs, each a ratio, a share, an intensity (read in FLOPs per byte or
# bare) or a count of something else.
FLOPS_NOT_A_COUNT = {"ch04-e4-remat-flops-ratio", "ch07-e10-prefix-fraction", "ch08-w3-batch-flops",
                     "ch09-q2-mlp-share", "ch01-e2-intensity-limit", "ch12-q17-intensity"}


def test_a_flop_count_is_asked_in_flop_so_its_units_read():
    """"420 GFLOPs" for 4.2e11 training FLOPs a token was refused as "not the right kind of unit" where the question
    was a plain number, and read elsewhere: a question that asks for FLOPs takes the unit FLOP."""
    import re

    from autograder.questions import Number, chapter_names, load_chapter

    plain = set()
    for name in chapter_names():
        chapter = load_chapter(name)
        questions = list(chapter.questions)
        for s in chapter.settings:
            questions += s.build(**next(iter(s.combos())))
        plain |= {q.qid for q in questions if isinstance(q, Number) and q.unit == ""
                  and re.search(r"\bFLOPs\b(?! ?/ ?s)", q.prompt)}
    assert plain == FLOPS_NOT_A_COUNT
    from tests.chapter_checks import both_judges

    a2 = load_chapter("ch06_applied_training")["ch06-a2-flops-per-token"]
    assert all(v.ok for v in both_judges(a2, "420 GFLOPs")) and all(v.ok for v in both_judges(a2, "4.2e11"))
