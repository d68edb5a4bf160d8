"""Where the tests find the course: the repository root, and its chapters as the release sees them."""

from pathlib import Path

from autograder.release import source_chapters

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = source_chapters(ROOT)
