"""Chapter 12 (GPUs): every record against the engine, and the book's printed answers."""

import pytest

from autograder.questions import load_chapter
from solutions.ch12_gpus import BOOK, DERIVED, gpu_intensity
from tests.chapter_checks import assert_book_answer, assert_reference_passes, assert_slip_fails

pytestmark = pytest.mark.ch12
CHAPTER = load_chapter("ch12_gpus")
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


# Thresholds the syllabus pins for CX4 (Q1.3, Q5.1, E8), against the function's reference.
CX4_SYLLABUS = {("H100", "hbm"): 291.2, ("B200", "hbm"): 287.5, ("H100", "nvlink"): 2200, ("B200", "nvlink"): 2556,
                ("H800", "nvlink"): 3300, ("H100", "scaleout"): 2475, ("B200", "scaleout"): 5750}


@pytest.mark.parametrize(("chip", "channel"), sorted(CX4_SYLLABUS))
def test_cx4_matches_the_syllabus(chip, channel):
    assert gpu_intensity(chip, channel) == pytest.approx(CX4_SYLLABUS[chip, channel], rel=0.005)


def test_every_book_answer_names_a_question():
    assert set(BOOK) | set(DERIVED) <= {q.qid for q in CHAPTER.questions}


def test_every_question_has_points_and_a_section():
    assert CHAPTER.total_points >= 80
    assert all(q.section for q in CHAPTER.questions)
