"""Chapter 2 (TPUs): E3's reference against the syllabus's table (test_every_chapter.py runs the records
and the book's answers)."""

import pytest

from autograder.questions import load_chapter
from solutions.ch02_tpus import E3_PROBES, E3_SYLLABUS, channel_intensity

pytestmark = pytest.mark.ch02
CHAPTER = load_chapter("ch02_tpus")


@pytest.mark.parametrize("probe", E3_PROBES, ids=lambda p: f"{p['chip']}-{p['channel']}")
def test_e3_matches_the_syllabus_table(probe):
    """E3's reference, chip by chip, against the syllabus's table (0.5%, the question's tolerance)."""
    assert channel_intensity(**probe) == pytest.approx(E3_SYLLABUS[probe["chip"], probe["channel"]], rel=0.005)


def test_chapter_size():
    assert CHAPTER.total_points >= 35
