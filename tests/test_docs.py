"""Documentation that must follow the code: the list of diagnoses and the README's chapter links."""

import re
from pathlib import Path

from autograder import messages
from autograder.authoring import REPOSITORY

ROOT = Path(__file__).resolve().parent.parent


def test_every_diagnosis_is_documented_for_students():
    text = (ROOT / "docs" / "feedback.md").read_text()
    codes = set(messages._INVALID) | set(messages._WRONG)
    missing = sorted(c for c in codes if f"`{c}`" not in text)
    assert not missing, f"add these diagnosis codes to docs/feedback.md: {missing}"


def test_readme_opens_every_chapter_in_colab():
    readme = (ROOT / "README.md").read_text()
    slug = REPOSITORY.removeprefix("https://github.com/")
    linked = set(re.findall(rf"https://colab\.research\.google\.com/github/{re.escape(slug)}/blob/main/"
                            r"release/(ch\d\d_\w+)/\1\.ipynb", readme))
    released = {p.parent.name for p in ROOT.glob("release/ch*/*.ipynb")}
    assert linked == released
