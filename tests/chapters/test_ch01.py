"""Chapter 1 (Rooflines): what is particular to the chapter (test_every_chapter.py runs its records)."""

import pytest

from autograder.questions import load_chapter

pytestmark = pytest.mark.ch01
CHAPTER = load_chapter("ch01_rooflines")


def test_chapter_size():
    assert CHAPTER.total_points >= 35
