"""Chapter 12 (GPUs): CX4's thresholds against the syllabus (test_every_chapter.py runs the records and
the book's and derived answers)."""

import pytest

from autograder.questions import load_chapter
from solutions.ch12_gpus import gpu_intensity

pytestmark = pytest.mark.ch12
CHAPTER = load_chapter("ch12_gpus")

# Thresholds the syllabus pins for CX4 (Q1.3, Q5.1, E8), against the function's reference.
CX4_SYLLABUS = {("H100", "hbm"): 291.2, ("B200", "hbm"): 287.5, ("H100", "nvlink"): 2200, ("B200", "nvlink"): 2556,
                ("H800", "nvlink"): 3300, ("H100", "scaleout"): 2475, ("B200", "scaleout"): 5750}


@pytest.mark.parametrize(("chip", "channel"), sorted(CX4_SYLLABUS))
def test_cx4_matches_the_syllabus(chip, channel):
    assert gpu_intensity(chip, channel) == pytest.approx(CX4_SYLLABUS[chip, channel], rel=0.005)


def test_chapter_size():
    assert CHAPTER.total_points >= 80
