"""Chapter 1 (Rooflines): every record against the engine, and the book's printed answers."""

import pytest

from autograder.questions import load_chapter
from solutions.ch01_rooflines import BOOK
from tests.chapter_checks import assert_book_answer, assert_reference_passes, assert_slip_fails

pytestmark = pytest.mark.ch01
CHAPTER = load_chapter("ch01_rooflines")
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


def test_every_question_has_points_and_a_section():
    assert CHAPTER.total_points >= 35
    assert all(q.section for q in CHAPTER.questions)
