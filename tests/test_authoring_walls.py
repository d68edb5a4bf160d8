"""What adding a chapter cannot get past unnoticed: each wall is tried with a throwaway chapter built here (none is
added to ``solutions/``), as an author would get it wrong."""

from __future__ import annotations

import math
import sys
import types

import pytest

import course
from autograder import model_traffic, release
from autograder.collectives import by_kind
from autograder.fingerprint import make_chapter
from autograder.kinds import function as function_kind
from autograder.questions import AuthoringError, load_chapter
from solutions._kit import *  # noqa: F403 (what an author writes a chapter with: solutions/_kit.py)

# --- the traffic table follows the model, not only its spec ---------------------------------------------

def _split(x, y):
    """x[B, D_X] @ y[D_X, F]: one psum of the partial products."""
    import jax
    from jax.sharding import PartitionSpec as P

    def block(x_block, y_block):
        return jax.lax.psum(x_block @ y_block, "X")
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)


def _split_padded(x, y):
    """The same numbers and the same one all-reduce, over a buffer twice the size: twice the bytes."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    def block(x_block, y_block):
        part = x_block @ y_block
        return jax.lax.psum(jnp.concatenate([part, part]), "X")[:part.shape[0]]
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)


def _program(model) -> Program:
    spec = ProgramSpec(mesh=X8, einsum="bd,df->bf", operands=(Operand((16, 64), (None, "X")),
                                                              Operand((64, 32), ("X", None))),
                       out_spec=(), collectives={"all-reduce": 1})
    return Program(qid="ch13-cx1-split", points=1, prompt="x @ y split over 8 devices.", spec=spec, model=model,
                   slips=(Slip(model, "wrong_values"),))


@pytest.fixture
def one_chapter(tmp_path, monkeypatch):
    """The release sees one chapter, ``chapter["now"]``, and a traffic table of the test's own."""
    path = tmp_path / model_traffic.FILE_NAME
    monkeypatch.setattr(model_traffic, "table_path", lambda: path)
    model_traffic.table.cache_clear()
    chapter: dict = {}
    monkeypatch.setattr(release, "chapter_names", lambda: ["ch13_walls"])
    monkeypatch.setattr(release, "load_chapter", lambda name: chapter["now"])
    yield chapter
    model_traffic.table.cache_clear()


def test_a_changed_model_is_measured_again(one_chapter):
    one_chapter["now"] = Chapter("ch13_walls", "Walls", (_program(_split),))
    assert release.write_traffic()
    q = one_chapter["now"].questions[0]
    before = model_traffic.at(model_traffic.expected(q), q.spec)
    assert before and before["all-reduce"] > 0
    assert release.traffic_entries()[1] == []  # measured: nothing stale

    one_chapter["now"] = Chapter("ch13_walls", "Walls", (_program(_split_padded),))  # the spec unchanged
    stale = release.traffic_entries()[1]
    assert [t[0].qid for t in stale] == ["ch13-cx1-split"], "a model changed under its spec must be measured again"
    assert release.write_traffic()
    q = one_chapter["now"].questions[0]
    after = model_traffic.at(model_traffic.expected(q), q.spec)  # the grader finds it by the spec alone
    moved = {k: v for k, v in after.items() if k != model_traffic.MATMUL_FLOPS}  # beside its matrix products' FLOPs
    assert by_kind(moved) == {"all-reduce": 2 * before["all-reduce"]} and after[model_traffic.MATMUL_FLOPS] > 0
    assert len(model_traffic.table()["ch13-cx1-split"]) == 1  # the old model's entry is dropped


def test_a_model_missing_a_name_is_an_authoring_error(one_chapter):
    """A records module without ``import course``: the release names the question and the name."""
    module = types.ModuleType("ch13_walls_without_course")
    exec(_SOURCE_WITHOUT_COURSE, module.__dict__)
    one_chapter["now"] = Chapter("ch13_walls", "Walls", (_program(module.split),))
    with pytest.raises(AuthoringError, match=r"ch13-cx1-split.*\bcourse\b.*import course"):
        release.traffic_entries()


_SOURCE_WITHOUT_COURSE = '''
import jax
from jax.sharding import PartitionSpec as P

def split(x, y):
    def block(x_block, y_block):
        return jax.lax.psum(x_block @ y_block, "X")
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)
'''


# --- a setting's values and a number's reference --------------------------------------------------------

def _batch(k: int) -> tuple[Number, ...]:
    batch = 240 * 8 / k
    return (Number(qid="ch13-q2-batch", points=1, prompt=f"Critical batch at top-{k}.", reference=batch,
                   tolerance=Tolerance.figures(), slips=(Slip(batch / 2, "ratio:1/2"),)),)


def test_a_value_whose_build_raises_is_named():
    s = vary("ch13-q2", _batch, k=values(8, 0))
    with pytest.raises(AuthoringError, match=r"ch13-q2.*k = 0.*ZeroDivisionError"):
        s.questions({"k": 0})
    with pytest.raises(AuthoringError, match=r"ch13-q2.*k = 0"):  # the release builds every choice
        make_chapter(Chapter("ch13_walls", "Walls", (s,)))


def test_a_build_that_raises_at_the_books_values_is_named():
    with pytest.raises(AuthoringError, match=r"ch13-q2.*k = 0"):
        vary("ch13-q2", _batch, k=values(0, 8))


@pytest.mark.parametrize("reference", [math.inf, -math.inf, math.nan])
def test_a_number_reference_is_finite(reference):
    with pytest.raises(AuthoringError, match=r"ch13-q2-batch.*finite"):
        Number(qid="ch13-q2-batch", points=1, prompt="A batch.", reference=reference, slips=(Slip(1.0, "not_equal"),))


def test_a_relative_tolerance_needs_a_reference_other_than_zero():
    with pytest.raises(AuthoringError, match=r"ch13-q2-batch.*0"):
        Number(qid="ch13-q2-batch", points=1, prompt="A batch.", reference=0.0, slips=(Slip(1.0, "not_equal"),))
    Number(qid="ch13-q2-batch", points=1, prompt="A batch.", reference=0.0, tolerance=Tolerance(low=-0.1, high=0.1),
           slips=(Slip(1.0, "not_equal"),))  # a range says what is near enough to 0


def test_a_negative_number_reference_must_be_declared():
    with pytest.raises(AuthoringError, match=r"ch13-q2-batch.*negative"):
        _batch(-4)
    Number(qid="ch13-q2-change", points=1, prompt="The change in step time.", reference=-0.25, negative=True,
           slips=(Slip(0.25, "ratio:-1"),))


# --- the chapter's name is its module's -----------------------------------------------------------------

def test_a_chapter_named_otherwise_than_its_module_is_refused(monkeypatch):
    module = types.ModuleType("solutions.ch13_walls")
    module.CHAPTER = Chapter("ch13_wall", "Walls", (_batch(8)[0],))
    monkeypatch.setitem(sys.modules, "solutions.ch13_walls", module)
    with pytest.raises(AuthoringError, match=r"ch13_walls.*ch13_wall\b"):
        load_chapter("ch13_walls")


# --- public probes that a constant passes ---------------------------------------------------------------

def _dropped(counts, capacity):
    return float(sum(max(0, int(c) - capacity) for c in counts))


def _drops_all_over(counts, capacity):
    return float(sum(int(c) for c in counts if c > capacity))


DROPS_ALL = (Slip(_drops_all_over, "not_equal"),)


def _function(probes, slips=DROPS_ALL) -> Function:
    return Function(qid="ch13-cx1-dropped", points=2, prompt="dropped_tokens(counts, capacity)", reference=_dropped,
                    probes=probes, output=Output("number", tolerance=EXACT), slips=slips)


def test_probes_a_constant_passes_are_refused():
    blind = _function((dict(counts=[3, 2, 4, 1], capacity=4), dict(counts=[1, 0, 2, 4, 5, 6], capacity=6)))
    problems = release.record_problems(Chapter("ch13_walls", "Walls", (blind,)))
    assert any(p.startswith("ch13-cx1-dropped: ") and "cannot tell a constant from the answer" in p
               for p in problems), problems
    seeing = _function((dict(counts=[3, 5, 9, 1], capacity=4), dict(counts=[10, 0, 2, 4, 8, 8], capacity=6)))
    assert release.record_problems(Chapter("ch13_walls", "Walls", (seeing,))) == []


def test_a_function_of_one_probe_is_refused():
    """One probe: a function returning its figures whatever it is given passes it (ch04's decoder layer had one)."""
    alone = _function((dict(counts=[3, 5, 9, 1], capacity=4),))
    problems = release.record_problems(Chapter("ch13_walls", "Walls", (alone,)))
    assert any(p.startswith("ch13-cx1-dropped: ") and "cannot tell a constant from the answer" in p
               for p in problems), problems


# --- a function's slips are judged at release -------------------------------------------------------------

def test_a_function_slip_the_probes_cannot_tell_from_the_model_is_refused():
    q = _function((dict(counts=[3, 5, 9, 1], capacity=4), dict(counts=[10, 0, 2, 4, 8, 8], capacity=6)),
                  slips=(Slip(_dropped, "not_equal"),))
    problems = release.record_problems(Chapter("ch13_walls", "Walls", (q,)))
    assert any(p.startswith("ch13-cx1-dropped: ") and "full marks" in p for p in problems), problems
    q = _function(q.probes, slips=(Slip(_drops_all_over, "ratio:3"),))
    problems = release.record_problems(Chapter("ch13_walls", "Walls", (q,)))
    assert any("diagnosed not_equal" in p and "ratio:3" in p for p in problems), problems


# --- a slip the grader passes is refused at release, in one line, whatever its kind -----------------------

def _copy_of_dropped(counts, capacity):
    return _dropped(counts, capacity)


def _copy_of_split(x, y):
    """The model again, under another name: the grader cannot tell the two apart."""
    import jax
    from jax.sharding import PartitionSpec as P

    def block(x_block, y_block):
        return jax.lax.psum(x_block @ y_block, "X")
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)


def _slip_as_reference(kind: str):
    """A question of ``kind`` whose one slip is its reference, and that slip as the release names it."""
    from course.symbols import B, D

    probes = (dict(counts=[3, 5, 9, 1], capacity=4), dict(counts=[10, 0, 2, 4, 8, 8], capacity=6))
    if kind == "number":
        return Number(qid="ch13-q2-batch", points=1, prompt="A batch.", reference=240.0,
                      tolerance=Tolerance.figures(), slips=(Slip(240.0, "ratio:2", "A multiply-add is 2 FLOPs."),)), \
            "240.0"
    if kind == "formula":
        return Formula(qid="ch13-q1-bytes", points=1, prompt="Bytes.", reference=2 * B * D, symbols="B D",
                       slips=(Slip(2 * B * D, "ratio:2", "bf16 is 2 bytes."),)), "2*B*D"
    if kind == "choice":
        return Choice(qid="ch13-q3-bound", points=1, prompt="Which bound?", options=("compute", "memory"),
                      reference="memory", slips=(Slip("memory", "wrong_option"),)), "'memory'"
    if kind == "function":  # with a hint and a tolerance: its hint's targets are made from the reference's
        return Function(qid="ch13-cx1-dropped", points=2, prompt="dropped_tokens(counts, capacity)",
                        reference=_dropped, probes=probes, output=Output("number", tolerance=ONE_PERCENT),
                        slips=(Slip(_copy_of_dropped, "not_equal", "Count the tokens past capacity."),)), \
            "_copy_of_dropped"
    program = _program(_split)
    return Program(qid=program.qid, points=1, prompt=program.prompt, spec=program.spec, model=_split,
                   slips=(Slip(_copy_of_split, "wrong_values"), Slip(_split_padded, "collectives:all-reduce"))), \
        "_copy_of_split"


@pytest.mark.parametrize("kind", ["number", "formula", "choice", "function", "program"])
def test_a_slip_that_is_its_reference_is_refused_in_one_line(kind, one_chapter, tmp_path, monkeypatch):
    """The release refuses, naming the record and the slip, where the grader would give the slip full marks: a
    function whose hinted slip returns the reference's results stopped it with a traceback (no hint can be told
    apart), where a number's, a formula's and a choice's got this line; a program's slip that is its model is
    told from the code alone (the release runs no program's slips)."""
    monkeypatch.setattr(release, "fingerprint_dir", lambda: tmp_path / "fingerprints")
    q, said = _slip_as_reference(kind)
    one_chapter["now"] = Chapter("ch13_walls", "Walls", (q,))
    with pytest.raises(AuthoringError) as refused:
        release.write_fingerprints("ch13_walls")
    lines = str(refused.value).splitlines()
    assert lines[0] == "solutions/ch13_walls.py:", lines
    assert f"{q.qid}: the slip {said} gets full marks from the grader" in [line.strip() for line in lines[1:]], lines
    assert not (tmp_path / "fingerprints" / "ch13_walls.json").exists()


# --- a factor is a finding of every failing case ----------------------------------------------------------

def test_one_case_off_by_a_factor_is_not_said_to_be_a_factor():
    q = _function((dict(counts=[3, 5, 9, 1], capacity=4), dict(counts=[10, 0, 2, 4, 8, 8], capacity=6)))
    one = function_kind.judge(q, [[_dropped(**q.probes[0])], [3 * _dropped(**q.probes[1])]])
    assert (one.diagnosis, one.score) == ("not_equal", 0.5), one
    assert "factor" not in one.message and "Not the expected value" in one.message
    both = function_kind.judge(q, [[3 * _dropped(**p)] for p in q.probes])
    assert both.diagnosis == "ratio:3" and "every test case" in both.message.lower()
    apart = function_kind.judge(q, [[3 * _dropped(**q.probes[0])], [2 * _dropped(**q.probes[1])]])
    assert apart.diagnosis == "not_equal", apart


# --- what the page promises of the kit and of ``pytest -m chNN`` ----------------------------------------

def test_the_kit_exports_the_names_the_page_lists():
    """Every kit name the page's kit paragraph lists is in ``__all__``, but ``P``, which it says is imported by
    name."""
    import re
    from pathlib import Path

    import solutions._kit as kit

    page = (Path(__file__).resolve().parents[1] / "docs" / "authoring.md").read_text()
    paragraph = page[page.index("- **The kit**"):page.index("- **Ids**")]
    listed = {n for n in re.findall(r"`([A-Za-z_]\w*)", paragraph) if hasattr(kit, n)} - {"P", "__all__"}
    assert listed and listed <= set(kit.__all__), sorted(listed - set(kit.__all__))
    assert "course" not in kit.__all__ and "import course" in paragraph


def test_a_chapter_marker_selects_every_test_parametrized_over_the_chapter():
    import subprocess
    from pathlib import Path

    files = ["tests/test_student_messages.py", "tests/test_release.py"]

    def selected(*how: str) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              *how, *files], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                             text=True, timeout=300).stdout
        return {line for line in out.splitlines() if "::" in line}

    by_name = selected("-k", "ch01")
    assert by_name and selected("-m", "ch01") == by_name


def test_a_chapter_marker_selects_every_check_that_reads_all_chapters_at_once():
    """A check of every chapter's questions at once (a message stating another question's answer, the library
    answering one, a number no setting varies, the README's row) checks a new chapter too: ``-m ch01`` runs it."""
    import subprocess
    from pathlib import Path

    whole = {"tests/test_giveaways.py": ["test_no_question_accepts_the_size_in_a_models_name",
                                        "test_the_name_gets_a_hint_saying_it_is_the_name",
                                        "test_no_message_states_another_questions_answer"],
             "tests/test_library_rule.py": ["test_nothing_in_course_answers_a_question",
                                           "test_no_module_constant_answers_a_question"],
             "tests/test_variants.py": ["test_number_questions_that_no_choice_changes_are_named",
                                        "test_every_number_question_varies_or_is_named"],
             "tests/chapters/test_every_chapter.py": ["test_public_probes_hold_no_answer"],
             "tests/test_docs.py": ["test_readme_chapter_table_counts_the_records",
                                    "test_readme_opens_every_chapter_in_colab",
                                    "test_the_notebooks_state_the_policy_of_docs_feedback"]}
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                          "ch01", *whole], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                         timeout=300).stdout
    selected = {line for line in out.splitlines() if "::" in line}
    assert {f"{f}::{t}" for f, tests in whole.items() for t in tests} <= selected, out[-2000:]
