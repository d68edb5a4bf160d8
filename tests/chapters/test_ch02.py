"""Chapter 2 (TPUs): E3's reference against the syllabus's table (test_every_chapter.py runs the records
and the book's answers)."""

import pytest

from autograder.questions import load_chapter
from solutions.ch02_tpus import E3_PROBES, E3_SYLLABUS, channel_intensity
from tests.chapter_checks import both_judges

pytestmark = pytest.mark.ch02
CHAPTER = load_chapter("ch02_tpus")


@pytest.mark.parametrize(("chip", "channel"), sorted(E3_SYLLABUS), ids=lambda p: str(p))
def test_e3_matches_the_syllabus_table(chip, channel):
    """E3's reference, chip by chip, against the syllabus's table (0.5%, the question's tolerance), public cases and
    drawn ones alike."""
    assert channel_intensity(chip, channel) == pytest.approx(E3_SYLLABUS[chip, channel], rel=0.005)


def test_e3_public_cases_are_in_the_syllabus_table():
    assert all((p["chip"], p["channel"]) in E3_SYLLABUS for p in E3_PROBES)


def test_chapter_size():
    assert CHAPTER.total_points >= 35


Q5 = next(s for s in CHAPTER.settings if s.name == "ch02-q5")


@pytest.mark.parametrize("i", range(len(Q5.combos())))
def test_q5_a_total_without_the_latency_is_refused_at_every_choice(i):
    """The latency is 0.6-3% of the total: under a 2% tolerance, leaving it out passed at 9 of the 12 choices and
    failed at 3 (the book's among them). Now it fails at every one, with its hint, and the total rounded to 3
    figures passes at every one."""
    combo = Q5.combos()[i]
    qs = {q.qid: q for q in Q5.questions(Q5.labels(combo))}
    total, streaming = qs["ch02-q5-total"], qs["ch02-q5-bandwidth-time"].reference
    for v in both_judges(total, streaming):
        assert not v.ok and "first byte" in v.message, (combo, v.message)
    assert all(v.ok for v in both_judges(total, float(f"{total.reference:.2e}"))), combo


# A student's answer at the book's values, and the words of the hint it gets (None: right). From a review of honest
# students: the book's own rounding of Q5's array, and the slips each question's hint now names.
STUDENTS = [
    ("ch02-q5-bandwidth-time", "189 us", None),  # the erratum's 1.7e7 bytes over 2 links of 4.5e10 B/s
    ("ch02-q5-bandwidth-time", "1.9e-4", None),
    ("ch02-q5-bandwidth-time", 1.924e-4, "latency"),  # nearer the latency added than the book's rounding
    ("ch02-q6-ici", 16e9 / (2 * 4.5e10), "own share"),  # the ring's 15/16 left out
    ("ch02-cx4-bisection-pod", 1.44e12, "both directions"),
    ("ch02-cx4-bisection-pod", 1.44e12, "wraparound"),
    ("ch02-e4-hops-slice", 2, "no wraparound"),
    ("ch02-q5-first-byte", 2e-6, "no wraparound"),
]


@pytest.mark.parametrize(("qid", "answer", "words"), STUDENTS)
def test_a_students_answer_gets_the_verdict_and_hint_of_its_cause(qid, answer, words):
    for v in both_judges(CHAPTER[qid], answer):
        assert v.ok if words is None else (not v.ok and words in v.message), (qid, answer, v.message)
