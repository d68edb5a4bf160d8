"""The compilation cache a blank notebook fills for a class (autograder/grading/warmup.py)."""

from pathlib import Path

import pytest

from autograder.grading import warmup
from autograder.grading.pipeline import Assignment


@pytest.fixture(autouse=True)
def warm_any_chapter(monkeypatch):
    monkeypatch.setattr(warmup, "MIN_PROGRAMS", 1)  # Chapter 1 has one program question


@pytest.fixture
def assignment(tmp_path) -> Assignment:
    master = tmp_path / "source" / "ch01_rooflines" / "ch01_rooflines.ipynb"
    master.parent.mkdir(parents=True)
    master.write_text("{}")
    return Assignment(tmp_path, "ch01_rooflines", "ch01_rooflines", master, {}, {})


@pytest.fixture
def runs(monkeypatch) -> list[Path]:
    calls: list[Path] = []

    def fake_reference(a, cache, timeout):
        calls.append(cache)
        (cache / "jit_f-0-cache").write_bytes(b"compiled")

    monkeypatch.setattr(warmup, "_run_blank", fake_reference)
    monkeypatch.setattr(warmup, "landlock_abi", lambda: 6)
    return calls


def _warm(a: Assignment, notebooks: int) -> tuple[Assignment, str]:
    """warm() and its closing line, once the blank run (if any) has finished."""
    a, warming = warmup.warm(a, notebooks)
    return a, warming.finish()


def test_filled_once_then_reused_until_the_source_changes(assignment, runs):
    a, note = _warm(assignment, 30)
    assert warmup.ready_cache(a) is not None and (a.jax_cache / "jit_f-0-cache").exists() and "filled" in note
    again, note = _warm(assignment, 30)
    assert again.jax_cache == a.jax_cache and note.endswith("reused") and len(runs) == 1
    assignment.master.write_text('{"changed": 1}')
    _warm(assignment, 30)
    assert len(runs) == 2


def test_kernels_get_the_cache_only_once_the_reference_run_finished(assignment, monkeypatch):
    import threading

    release = threading.Event()

    def slow_reference(a, cache, timeout):
        (cache / "jit_f-0-cache").write_bytes(b"half written")
        release.wait(10)

    monkeypatch.setattr(warmup, "_run_blank", slow_reference)
    monkeypatch.setattr(warmup, "landlock_abi", lambda: 6)
    a, warming = warmup.warm(assignment, 30)
    assert a.jax_cache is not None and warmup.ready_cache(a) is None  # grading starts meanwhile
    release.set()
    assert "filled" in warming.finish() and warmup.ready_cache(a) == a.jax_cache


def test_small_classes_skip_the_reference_run_but_reuse_a_ready_cache(assignment, runs):
    a, note = _warm(assignment, 3)
    assert a.jax_cache is None and "not worth" in note and not runs
    _warm(assignment, 30)
    a, note = _warm(assignment, 1)
    assert warmup.ready_cache(a) is not None and note.endswith("reused")


def test_assignments_with_few_programs_skip_the_reference_run(assignment, runs, monkeypatch):
    """Their kernels compile mostly on cases drawn per submission, which no cache holds."""
    monkeypatch.setattr(warmup, "MIN_PROGRAMS", 2)
    a, note = _warm(assignment, 30)
    assert a.jax_cache is None and "compile too little" in note and not runs
    assert warmup._programs("ch03_sharding") >= warmup.MIN_PROGRAMS > warmup._programs("ch01_rooflines")
    assert warmup._programs("not_a_chapter") == warmup.MIN_PROGRAMS  # an instructor's own assignment: warmed


def test_no_cache_without_landlock(assignment, runs, monkeypatch):
    monkeypatch.setattr(warmup, "landlock_abi", lambda: 0)
    a, note = _warm(assignment, 30)
    assert a.jax_cache is None and "could not be kept from writing" in note and not runs


def test_a_failing_reference_means_no_cache_not_a_failed_class(assignment, monkeypatch):
    def broken(*args):
        raise RuntimeError("kernel died")

    monkeypatch.setattr(warmup, "_run_blank", broken)
    monkeypatch.setattr(warmup, "landlock_abi", lambda: 6)
    a, note = _warm(assignment, 30)
    assert warmup.ready_cache(a) is None and "did not run" in note
    assert not (assignment.course_dir / ".scaling-course" / "jax-cache" / "ch01_rooflines").exists()


def test_the_cache_is_filled_by_a_notebook_that_holds_no_solution(tmp_path, monkeypatch):
    """Every kernel may read every entry, and an entry can be loaded and printed as HLO, or run: a cache filled by the
    source notebook held the reference programs compiled (Chapter 3's, read in a student's kernel), and a hit told a
    student by the time it saved that a program was the reference's to the letter. What fills it is the notebook a
    blank submission is graded as: the hidden tests run, no solution cell does."""
    import nbformat

    from autograder.demo import copy_course
    from autograder.grading import execute
    from autograder.grading.pipeline import prepare
    from autograder.grading.sanitize import grade_id, is_solution

    course = copy_course(Path(__file__).resolve().parents[2], tmp_path / "course", ["ch03_sharding"])
    (course / "submitted").mkdir()
    a = prepare(course, "ch03_sharding")
    ran = []
    monkeypatch.setattr(execute, "execute", lambda nb, *args, **kwargs: ran.append(nb) or execute.Execution(nb))
    warmup._run_blank(a, tmp_path / "cache", timeout=60)
    source = nbformat.read(a.master, as_version=4)
    solutions = {grade_id(c): c.source for c in source.cells if grade_id(c) and is_solution(c)}
    tests = {grade_id(c): c.source for c in source.cells if grade_id(c) and not is_solution(c)}
    cells = {grade_id(c): c.source for c in ran[0].cells if grade_id(c)}
    assert solutions and all(cells[gid] == a.stubs[gid] != text for gid, text in solutions.items())
    assert all(cells[gid] == text for gid, text in tests.items())  # the hidden tests, as a graded notebook runs them
    assert not [c.source for c in ran[0].cells if any(text in c.source for text in solutions.values())]
