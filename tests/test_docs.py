"""Documentation that must follow the code: the list of diagnoses and the README's chapter links."""

import re

import pytest

from autograder import messages
from autograder.distribution import colab_prefix
from tests.paths import ROOT


def test_every_diagnosis_is_documented_for_students():
    text = (ROOT / "docs" / "feedback.md").read_text()
    codes = set(messages._INVALID) | set(messages._WRONG)
    missing = sorted(c for c in codes if f"`{c}`" not in text)
    assert not missing, f"add these diagnosis codes to docs/feedback.md: {missing}"


@pytest.mark.every_chapter
def test_readme_opens_every_chapter_in_colab():
    readme = (ROOT / "README.md").read_text()
    # The repository of pyproject.toml: `scaling-course release` rewrites the links when it changes.
    linked = set(re.findall(rf"{re.escape(colab_prefix())}release/(ch\d\d_\w+)/\1\.ipynb", readme))
    released = {p.parent.name for p in ROOT.glob("release/ch*/*.ipynb")}
    assert linked == released


# The rules of fair reading, as docs/feedback.md states them and every notebook's first cell repeats
# or points to (Chapter 1 states them; the others say "as in Chapter 1").
POLICY = ["3 significant figures", "exact count", "whole numbers, fractions and short decimals",
          "Exponents may contain symbols", '"1/4"', '"25%"', '"AllReduce"', "never ticks"]


@pytest.mark.every_chapter
def test_the_notebooks_state_the_policy_of_docs_feedback():
    import json

    doc = " ".join((ROOT / "docs" / "feedback.md").read_text().split())
    first = {p.parent.name: "".join(json.loads(p.read_text())["cells"][0]["source"])
             for p in sorted(ROOT.glob("source/ch*/*.ipynb"))}
    ch01 = " ".join(first.pop("ch01_rooflines").split())
    for rule in POLICY:
        assert rule in ch01, f"Chapter 1's 'How answers work' lacks: {rule}"
        assert rule.lower() in doc.lower(), f"docs/feedback.md lacks: {rule}"
    for name, text in first.items():
        assert "How answers work" in text or "Chapter 1" in text, f"{name}: no pointer to how answers are read"
        assert "Exponents must be numbers" not in text, name


@pytest.mark.every_chapter
def test_readme_chapter_table_counts_the_records():
    """The README's table of chapters gives each chapter's questions and points as its records have them."""
    from autograder.questions import chapter_names, load_chapter

    readme = (ROOT / "README.md").read_text()
    for name in chapter_names():
        chapter = load_chapter(name)
        row = re.search(rf"^\| `{name}` \| [^|]+ \| (\d+) \((\d+)\) \|", readme, re.M)
        assert row, f"README: no table row for {name}"
        assert (int(row[1]), float(row[2])) == (len(chapter.questions), chapter.total_points), name
