"""Chapter 2 (TPUs): every record against the engine, and the book's printed answers."""

import pytest

from autograder.questions import load_chapter
from solutions.ch02_tpus import BOOK, DERIVED, E3_PROBES, E3_SYLLABUS, channel_intensity
from tests.chapter_checks import assert_book_answer, assert_reference_passes, assert_slip_fails

pytestmark = pytest.mark.ch02
CHAPTER = load_chapter("ch02_tpus")
SLIPS = [(q, i) for q in CHAPTER.questions for i in range(len(q.slips))]


@pytest.mark.parametrize("q", CHAPTER.questions, ids=lambda q: q.qid)
def test_reference_passes(q):
    assert_reference_passes(CHAPTER, q)


@pytest.mark.parametrize(("q", "i"), SLIPS, ids=[f"{q.qid}-slip{i}" for q, i in SLIPS])
def test_slip_fails(q, i):
    assert_slip_fails(CHAPTER, q, i)


@pytest.mark.parametrize("qid", sorted(BOOK))
def test_book_answer_within_tolerance(qid):
    assert_book_answer(CHAPTER[qid], BOOK[qid])


@pytest.mark.parametrize("qid", sorted(DERIVED))
def test_syllabus_derived_answer_within_tolerance(qid):
    assert_book_answer(CHAPTER[qid], DERIVED[qid])


@pytest.mark.parametrize("probe", E3_PROBES, ids=lambda p: f"{p['chip']}-{p['channel']}")
def test_e3_matches_the_syllabus_table(probe):
    """E3's reference, chip by chip, against the syllabus's table (0.5%, the question's tolerance)."""
    assert channel_intensity(**probe) == pytest.approx(E3_SYLLABUS[probe["chip"], probe["channel"]], rel=0.005)


def test_every_book_answer_names_a_question():
    assert set(BOOK) | set(DERIVED) <= {q.qid for q in CHAPTER.questions}


def test_every_question_has_points_and_a_section():
    assert CHAPTER.total_points >= 35
    assert all(q.section for q in CHAPTER.questions)
