"""Build an nbgrader source notebook from Python, with the course's cell conventions.

The committed ``source/chNN_*/chNN_*.ipynb`` is the source of truth (edit it in JupyterLab with
nbgrader's "Create Assignment" toolbar, or regenerate it with this builder from a script); this
module only guarantees that generated cells carry exactly the metadata the course expects:

    b = NotebookBuilder("ch13_example")
    b.md("# Chapter 13 ...")
    b.setup("from course import check, grade")
    b.answer("ch13-q1-answer", "q1_intensity = 2*B*D*F / (2*B*D + 2*D*F + 2*B*F)")
    b.test("ch13-q1-intensity", "q1_intensity")  # the check line; the release writes the rest
    b.write("source/ch13_example/ch13_example.ipynb")
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from .built_so_far import complete_built_cell
from .questions import AuthoringError, load_chapter
from .release import complete_cells, nbgrader_meta


class NotebookBuilder:
    def __init__(self, chapter: str):
        self.chapter = load_chapter(chapter)
        self.cells: list = []

    def md(self, text: str) -> None:
        self.cells.append(new_markdown_cell(text.strip("\n")))

    def code(self, source: str) -> None:
        """An ordinary cell (plots, demonstrations): not graded, editable."""
        self.cells.append(new_code_cell(source.strip("\n")))

    def setup(self, source: str) -> None:
        """The locked first code cell: the bootstrap (install if missing, course.setup() before anything
        touches JAX; ``write`` completes it, as the release does), then ``source``, the chapter's imports."""
        cell = new_code_cell(source.strip("\n"))
        cell.metadata.update(nbgrader=nbgrader_meta("setup", grade=False, solution=False, locked=True),
                             deletable=False, editable=False)
        self.cells.append(cell)

    def setting(self, name: str, variable: str) -> None:
        """Show a varied exercise's values (``variable = course.setting(name)``), before its questions;
        ``write`` locks the cell."""
        self.cells.append(new_code_cell(f'{variable} = course.setting("{name}")'))

    def answer(self, cell_id: str, solution: str, before: str = "") -> None:
        """A solution cell: ``before`` stays visible to students, ``solution`` becomes the stub."""
        head = before.strip("\n") + "\n" if before else ""
        cell = new_code_cell(f"{head}### BEGIN SOLUTION\n{solution.strip(chr(10))}\n### END SOLUTION")
        cell.metadata.update(nbgrader=nbgrader_meta(cell_id, grade=False, solution=True, locked=False))
        self.cells.append(cell)

    def test(self, qid: str, variable: str) -> None:
        """A question's check line, as an author writes it; ``write`` completes the cell from the record."""
        self.cells.append(new_code_cell(f'check("{qid}", {variable})'))

    def write(self, path: str | Path) -> None:
        nb = new_notebook(cells=self.cells)
        # The course directory holds source/<chapter>/<chapter>.ipynb: its earlier chapters are listed in the
        # "What you have built so far" cell, as the release lists them.
        course_dir = Path(path).resolve().parent.parent.parent
        problems = complete_cells(self.chapter, nb) + complete_built_cell(course_dir, self.chapter, nb)
        if problems:
            raise AuthoringError(f"the notebook does not match solutions/{self.chapter.name}.py:\n  "
                                 + "\n  ".join(problems))
        nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
        nb.metadata["language_info"] = {"name": "python"}
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{i:03d}"  # stable ids keep diffs small
        nbformat.validate(nb)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
