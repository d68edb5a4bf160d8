"""Every chapter's records against the engine: each reference passes the grader and the self-check,
each listed slip fails both with the diagnosis its record names (a program's with the score and message
that say why), the book's printed answers lie within tolerance and the syllabus's own answers are met. Each
case carries its chapter's marker (``pytest -m ch03``); what is particular to a chapter is in its
``test_chNN.py``."""

import dataclasses
import importlib
import json
import math
import re
from pathlib import Path

import pytest

from autograder import kinds, model_traffic
from autograder.checks import judge
from autograder.kinds.common import diagnosed_as
from autograder.programs import wrong_numbers
from autograder.questions import Function, Number, Program, chapter_names, load_chapter
from autograder.verdict import Status
from course import hardware, models
from tests.chapter_checks import inspected, outside_at_book_values, printed, recorded, reference_answer

CHAPTERS = {name: load_chapter(name) for name in chapter_names()}
QUESTIONS = [q for chapter in CHAPTERS.values() for q in chapter.questions]
PROGRAMS = [q for q in QUESTIONS if isinstance(q, Program)]

# Programs a rule does not fit, and why.
NO_WRONG_NUMBERS_SLIP = {"ch09-cx4-fix-constraint"}  # the numbers come out right either way: it asks for a sharding
NO_WASTEFUL_SLIP = {"ch10-q3-mlp-block"}  # its only collectives are its two matmuls', whose wasteful forms are asked
UNSIZED = {"ch09-cx4-fix-constraint", "ch10-q1-shard-sums"}  # jit places their collectives: counted, not sized
# What the collective inspector reports of model solutions whose notebooks quote its report.
INSPECTED = json.loads(Path(__file__).with_name("inspected.json").read_text())
# The syllabus's own answers where the course computes its own, and how closely each reference must meet them.
SYLLABUS = json.loads(Path(__file__).with_name("syllabus_answers.json").read_text())


def _marked(values, chapter: str, case_id: str):
    """A case marked with its chapter's marker (``ch03``), so that ``pytest -m ch03`` runs it."""
    return pytest.param(*values, marks=getattr(pytest.mark, chapter[:4]), id=case_id)


def _printed_answers(table: str) -> list:
    """(chapter, qid, answer) for each entry of every solutions module's ``table`` (BOOK: the book's
    printed answers; DERIVED: the syllabus's, derived from them)."""
    return [_marked((name, qid, answer), name, qid) for name in CHAPTERS
            for qid, answer in sorted(getattr(importlib.import_module(f"solutions.{name}"), table, {}).items())]


@pytest.mark.parametrize("q", [_marked((q,), q.chapter, q.qid) for q in QUESTIONS])
def test_reference_passes(q):
    answer = recorded(q, reference_answer(q))
    v = judge(q, answer)
    assert v.ok, f"{q.qid}: grader rejects the reference: {v}"
    if isinstance(q, Program):  # the yardstick of wasteful programs is what the model moves and computes now
        spec = q.spec.at(q.spec.mesh) if q.spec.mesh_choices else q.spec
        stored = model_traffic.at(model_traffic.expected(q), spec) or {}
        flops = stored.pop(model_traffic.MATMUL_FLOPS, None)
        assert v.data.get("traffic", {}) == pytest.approx(stored), f"{q.qid}: run scaling-course release"
        assert v.data.get("flops") == pytest.approx(flops), f"{q.qid}: run scaling-course release"
    s = kinds.selfcheck_live(printed(q), q.qid, reference_answer(q), answer)
    assert s.ok, f"{q.qid}: self-check rejects the reference: {s}"


@pytest.mark.parametrize(("q", "i"), [_marked((q, i), q.chapter, f"{q.qid}-slip{i}")
                                      for q in QUESTIONS for i in range(len(q.slips))])
def test_slip_fails(q, i):
    slip = q.slips[i]
    answer = recorded(q, slip.answer)
    v = judge(q, answer)
    assert not v.ok and v.score < 1, f"{q.qid}: slip {slip.answer!r} passes the grader"
    assert diagnosed_as(v.diagnosis, slip.diagnosis), \
        f"{q.qid}: slip {slip.answer!r}: grader says {v.diagnosis}: {v.message}"
    s = kinds.selfcheck_live(printed(q), q.qid, slip.answer, answer)
    assert not s.ok, f"{q.qid}: slip {slip.answer!r} passes the self-check"
    if not isinstance(q, Program):  # a program's self-check runs on other inputs than the grader's
        assert (s.diagnosis, s.message) == (v.diagnosis, v.message), \
            f"{q.qid}: self-check says {s.diagnosis}, grader {v.diagnosis}"
    if slip.hint:
        assert slip.hint in v.message and slip.hint in s.message, f"{q.qid}: hint not shown"
    if isinstance(q, Program):
        _assert_program_verdict(q, slip.diagnosis, v)


def _assert_program_verdict(q, code, v):
    """Wrong numbers score 0; right numbers with the wrong sharding or collectives score half. Either
    message says what was expected; a wasteful program's names each collective it ran, with its bytes."""
    assert "expected" in v.message, v.message
    if wrong_numbers(code):
        assert (v.status, v.score) == (Status.INCORRECT, 0.0), v
        assert code != "wrong_values" or "differs from" in v.message, v.message
        assert "lower precision" not in v.message, v.message  # wrong by its logic (test_lower_precision.py)
        return
    assert (v.status, v.score) == (Status.PARTIAL, 0.5), v
    assert v.message.startswith("Right numbers, but "), v.message
    if code.startswith("collectives:"):
        assert v.message.startswith("Right numbers, but your program runs"), v.message
        for kind in code.split(":", 1)[1].split(","):
            assert kind in v.message, v.message
        assert q.qid in UNSIZED or "bytes moved per device" in v.message, v.message


@pytest.mark.parametrize("q", [_marked((q,), q.chapter, q.qid) for q in PROGRAMS])
def test_program_has_a_wrong_and_a_wasteful_slip(q):
    codes = [s.diagnosis for s in q.slips]
    assert q.qid in NO_WRONG_NUMBERS_SLIP or any(wrong_numbers(c) for c in codes), f"{q.qid}: no wrong-numerics slip"
    assert q.qid in NO_WASTEFUL_SLIP or any(c.startswith("collectives:") for c in codes), f"{q.qid}: no wasteful slip"


@pytest.mark.parametrize(("name", "qid", "book"), _printed_answers("BOOK"))
def test_book_answer_within_tolerance(name, qid, book):
    _assert_within_tolerance(CHAPTERS[name], qid, book)


@pytest.mark.parametrize(("name", "qid", "derived"), _printed_answers("DERIVED"))
def test_syllabus_derived_answer_within_tolerance(name, qid, derived):
    _assert_within_tolerance(CHAPTERS[name], qid, derived)


@pytest.mark.parametrize(("name", "qid", "answer"), [_marked((name, qid, answer), name, qid)
                                                      for name, table in SYLLABUS["answers"].items()
                                                      for qid, answer in table.items()])
def test_reference_is_the_syllabus_answer(name, qid, answer):
    rel = SYLLABUS["looser"].get(qid, SYLLABUS["looser"].get(name, SYLLABUS["rel"]))
    assert float(CHAPTERS[name][qid].reference) == pytest.approx(answer, rel=rel), qid


def _assert_within_tolerance(chapter, qid, printed_answer):
    assert qid in {q.qid for q in chapter.questions}, f"{qid}: names no question of {chapter.name}"
    q = chapter[qid]
    assert isinstance(q, Number)
    lo, hi = q.tolerance.bounds(float(q.reference))
    assert lo <= printed_answer <= hi, f"{qid}: {printed_answer} is outside [{lo}, {hi}] around {q.reference}"


# Number questions whose answer at the book's rounded constants (hw.BOOK_VALUES) may fall outside, and why.
AT_COURSE_VALUES_ONLY = {
    # An exact count whose prompt names the rate (v5e.bf16_flops_per_s, as decode_step does): at 2e14 the largest
    # batch within the limit is another whole number (143 -> 144), and a count has no tolerance to widen.
    "ch08-w3-batch-flops": "an exact count at the rate its prompt names",
}


@pytest.mark.parametrize("name", [_marked((name,), name, name) for name in CHAPTERS])
def test_the_book_constants_pass_every_question_that_depends_on_them(name):
    """A number computed with the book's own rounded constants (the H100's 1e15 FLOP/s and 3.35e12 B/s, the
    v5e's 2e14, ...), at every choice of every setting, passes as it does in every other chapter
    (solutions/_kit.py, rate_tolerance): ch01-q5's H100 batch at 1e15 / 3.35e12 as ch12-q13's."""
    outside = outside_at_book_values(name)
    excepted = {qid for qid in AT_COURSE_VALUES_ONLY if qid.startswith(name[:4] + "-")}
    assert not [line for line in outside if line.split()[0] not in excepted], "\n".join(outside)
    assert not excepted - {line.split()[0] for line in outside}, "an exception no longer needed"


LARGEST_DEGREE = re.compile(r"\blargest\b.*\b(degree|parallelism|TP)\b", re.IGNORECASE)


@pytest.mark.parametrize("name", [_marked((name,), name, name) for name in CHAPTERS])
def test_a_largest_degree_passes_as_the_whole_number_below_its_bound(name):
    """A degree of parallelism is a whole number: a student who gives the largest whole degree under the bound (20
    for a bound of 20.9) has the idea. It was refused as "close" in 4 questions at some or all of their choices."""
    chapter, asked = CHAPTERS[name], 0
    built = [*chapter.questions, *(q for s in chapter.settings for c in s.combos() for q in s.build(**c))]
    for q in built:
        if isinstance(q, Number) and LARGEST_DEGREE.search(q.prompt) and q.reference < 1e4:  # not a size
            asked += 1
            assert q.tolerance.accepts(q.reference, math.floor(q.reference)), q.qid
            assert not q.tolerance.accepts(q.reference, math.floor(q.reference) - 1), q.qid
    assert asked or name not in {"ch05_training", "ch06_applied_training", "ch07_inference", "ch12_gpus"}


@pytest.mark.parametrize("name", [_marked((name,), name, name) for name in CHAPTERS])
def test_every_question_has_a_section(name):
    missing = [q.qid for q in CHAPTERS[name].questions if not q.section]
    assert not missing, f"no book section: {missing}"


def _specific(x: float) -> bool:
    """A value too particular to match an answer by chance: not small, not a power of two, not one or two
    significant figures (shapes, chip counts and round budgets recur everywhere by design)."""
    return abs(x) >= 1000 and not (x == int(x) and int(x) & (int(x) - 1) == 0) and float(f"{x:.2g}") != x


def _probe_numbers(value):
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _probe_numbers(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _probe_numbers(v)


def _public_constants() -> set[float]:
    """Every number the course's public tables hold (chips, nodes, model configurations): a probe may pass
    those, since a student has them anyway."""
    found: set[float] = set()
    for module in (hardware, models):
        for value in vars(module).values():
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                found.update(_probe_numbers([getattr(value, f.name) for f in dataclasses.fields(value)]))
    return found


@pytest.mark.every_chapter
def test_public_probes_hold_no_answer():
    """A function question's probes are public (the self-check data carries them): none of their inputs may
    be the answer to a number question of the same chapter, or a student reads it there. Values from the
    public tables, and small or round ones (shapes, chip counts), do not count."""
    public = _public_constants()
    leaks = []
    for chapter in CHAPTERS.values():
        answers = [(q.qid, q.tolerance.bounds(float(q.reference))) for q in chapter.questions if isinstance(q, Number)]
        leaks += [f"{q.qid} probe {i} {key}={x:g} is {qid}'s answer"
                  for q in chapter.questions if isinstance(q, Function) for i, probe in enumerate(q.probes)
                  for key, value in probe.items() for x in _probe_numbers(value) if _specific(x) and x not in public
                  for qid, (lo, hi) in answers if min(lo, hi) <= x <= max(lo, hi)]
    assert not leaks, "\n".join(sorted(set(leaks)))


@pytest.mark.parametrize("q", [_marked((q,), q.chapter, q.qid) for q in PROGRAMS if q.qid in INSPECTED])
def test_inspector_reads_each_quoted_model(q):
    assert inspected(q) == INSPECTED[q.qid]


def test_every_quoted_inspection_is_of_a_program():
    assert set(INSPECTED) <= {q.qid for q in PROGRAMS}
