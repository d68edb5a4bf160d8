"""Every chapter notebook says what the student has built so far, as the release writes it from the records:
the programs of each chapter up to this one, named by the headings their test cells sit under."""

import shutil
from dataclasses import replace
from functools import cache
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder import built_so_far as built
from autograder import release
from autograder.questions import Chapter, load_chapter
from tests.paths import CHAPTERS, ROOT


def _read(course: Path, folder: str, chapter: str):
    return nbformat.read(course / folder / chapter / f"{chapter}.ipynb", as_version=4)


@cache
def _nb(chapter: str, folder: str = "source"):
    """A committed notebook (read once: the tests copy it before changing it)."""
    return _read(ROOT, folder, chapter)


def _cell(nb) -> int:
    marked = [i for i, c in enumerate(nb.cells) if built.is_built_cell(c)]
    assert len(marked) == 1, f"{len(marked)} cells 'What you have built so far': run 'scaling-course release'"
    return marked[0]


def _unlisted(chapter: str, text: str, course: Path = ROOT, records=load_chapter) -> list[str]:
    """The programs of ``chapter`` and the chapters before it that ``text`` does not name on their chapter's
    line by the heading their test cell sits under (this test's own reading of the notebooks)."""
    missing = []
    for name in [c for c in CHAPTERS if c <= chapter]:
        section, where = None, {}
        for cell in (_nb(name) if course == ROOT else _read(course, "source", name)).cells:
            if cell.cell_type == "markdown":
                section = ([line.lstrip("#").strip() for line in cell.source.splitlines() if line.startswith("#")]
                           or [section])[-1]
            where[cell.metadata.get("nbgrader", {}).get("grade_id")] = section
        line = next((line for line in text.splitlines() if line.startswith(f"- **Chapter {int(name[2:4])} — ")), "")
        missing += [f"{name}: {q.qid} under {where.get(q.qid)!r}" for q in records(name).questions
                    if q.kind == "program" and (where.get(q.qid) or "?") not in line]
        if line and ("(this chapter)" in line) != (name == chapter):
            missing.append(f"{name}: marked (this chapter) wrongly")
    return missing


@pytest.mark.parametrize("folder", ["source", "release"])
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_notebook_lists_what_was_built_just_before_its_summary(chapter, folder):
    nb = _nb(chapter, folder)
    at = _cell(nb)
    written, problems = built.built_so_far(ROOT, load_chapter(chapter), _nb(chapter))
    assert problems == []
    assert nb.cells[at].source == written, f"{folder}/{chapter}: the list is stale: run 'scaling-course release'"
    assert at + 1 == len(nb.cells) or nb.cells[at + 1].source.startswith("## Summary")
    assert _unlisted(chapter, written) == []


def test_a_moved_test_cell_or_a_new_program_makes_later_lists_stale(tmp_path, monkeypatch):
    """The check above fails when a program's test cell moves under another heading, or a program record
    (with its test cell) is added, in an earlier chapter whose later chapters were not released again."""
    for name in [c for c in CHAPTERS if c <= "ch05_training"]:
        shutil.copytree(ROOT / "source" / name, tmp_path / "source" / name)
    ch05 = load_chapter("ch05_training")
    committed = _nb("ch05_training").cells[_cell(_nb("ch05_training"))].source
    assert built.built_so_far(tmp_path, ch05, _nb("ch05_training"))[0] == committed
    path = tmp_path / "source" / "ch03_sharding" / "ch03_sharding.ipynb"
    nb = nbformat.read(path, as_version=4)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ch03-cx6-alltoall")
    nb.cells.remove(test)
    q10 = next(i for i, c in enumerate(nb.cells) if c.source.startswith("### Q10 — "))
    nb.cells.insert(q10 + 1, test)
    nbformat.write(nb, path)
    text = built.built_so_far(tmp_path, ch05, _nb("ch05_training"))[0]
    assert text != committed and "CX6 — AllToAll" not in text and "Q10 — why an AllToAll is cheaper" in text
    assert _unlisted("ch05_training", committed, tmp_path) == [
        "ch03_sharding: ch03-cx6-alltoall under 'Q10 — why an AllToAll is cheaper'"]

    ch03 = load_chapter("ch03_sharding")
    extra = replace(ch03["ch03-cx6-alltoall"], qid="ch03-cx9-extra")
    records = {"ch03_sharding": Chapter(ch03.name, ch03.title, ch03.items + (extra,))}
    monkeypatch.setattr(built, "load_chapter", lambda name: records.get(name) or load_chapter(name))
    nb.cells.insert(q10 + 2, new_markdown_cell("### CX9 — one more program"))
    nb.cells.insert(q10 + 3, new_code_cell(release.test_cell_source("ch03-cx9-extra", "alltoall"),
                                           metadata=release.test_cell_metadata("ch03-cx9-extra", 1)))
    nbformat.write(nb, path)
    assert "CX9 — one more program" in built.built_so_far(tmp_path, ch05, _nb("ch05_training"))[0]
    assert "ch03_sharding: ch03-cx9-extra under 'CX9 — one more program'" in _unlisted(
        "ch05_training", committed, tmp_path, lambda name: records.get(name) or load_chapter(name))


def test_the_release_inserts_moves_and_rewrites_the_cell_and_nothing_else(tmp_path):
    chapter = load_chapter("ch01_rooflines")
    committed = _nb("ch01_rooflines")
    nb = nbformat.from_dict(committed)
    written = nb.cells.pop(_cell(nb))
    assert built.complete_built_cell(ROOT, chapter, nb) == []  # missing: inserted, with its id
    assert nb == committed
    nb.cells.insert(3, nb.cells.pop(_cell(nb)))  # moved, and a copy pasted: back before the summary, once
    nb.cells.insert(7, nbformat.from_dict(written))
    nb.cells[3].source = "edited by hand"
    assert built.complete_built_cell(ROOT, chapter, nb) == []
    assert nb == committed
    summary = nb.cells.pop(_cell(nb) + 1)  # no summary: at the end
    built.complete_built_cell(ROOT, chapter, nb)
    assert built.is_built_cell(nb.cells[-1]) and summary.source.startswith("## Summary")
