"""Submissions: what each student handed in, found whatever shape it arrived in.

A submission is ``submitted/<student>/<assignment>/``. The notebook in it is found by its name; else
it is the only notebook in the folder (renamed or moved); else the only notebook inside a zip (an
LMS download), extracted safely. Symbolic links are never followed: a link could point a grader at a
file the student cannot read. The fingerprint covers everything handed in, so a changed upload is
graded again (results.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from .sanitize import MAX_NOTEBOOK_BYTES

if TYPE_CHECKING:
    from .pipeline import Assignment

# Part of every fingerprint, so that a new grader grades every submission again.
GRADER_VERSION = "2"  # 2: function answers judged on cases drawn per submission; kernels in private namespaces


def submissions(a: Assignment) -> list[tuple[str, Path]]:
    """(student, submission folder) for every submitted/<student>/<assignment>/."""
    out = []
    for student_dir in sorted((a.course_dir / "submitted").iterdir()):
        folder = student_dir / a.name
        if student_dir.is_dir() and not student_dir.name.startswith(".") and folder.is_dir():
            out.append((student_dir.name, folder))
    return out


def fingerprint(folder: Path, notebook: str) -> str:
    """Hash of everything submitted (a renamed notebook or a zip counts too) and the grader version."""
    h = hashlib.sha256(f"{GRADER_VERSION}|{notebook}".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def timestamp(folder: Path) -> str | None:
    """The submission time the collecting tool wrote, if any (at most 64 characters of it)."""
    path = folder / "timestamp.txt"
    try:
        return path.read_text().strip()[:64] or None
    except OSError:
        return None


def locate(a: Assignment, student: str, folder: Path, work: Path) -> tuple[Path | None, list[str]]:
    """The notebook to grade for ``student`` (see ``find_notebook``), and what was odd about it."""
    if folder.resolve() != a.course_dir / "submitted" / student / a.name:
        return None, ["the submission folder is a symbolic link, which the grader does not follow"]
    return find_notebook(folder, a.notebook, work)


def find_notebook(folder: Path, notebook: str, work: Path) -> tuple[Path | None, list[str]]:
    """The submitted notebook: by its name; else the only notebook in the folder (renamed or moved);
    else the only notebook inside a zip (an LMS download), extracted safely into ``work``."""
    path = folder / f"{notebook}.ipynb"
    if path.is_file() and not path.is_symlink():
        return path, []
    found = [p for p in sorted(folder.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts and
             p.is_file() and not p.is_symlink()]
    if len(found) == 1:
        return found[0], [f"graded {found[0].relative_to(folder)}, expected {notebook}.ipynb (renamed or moved?)"]
    for archive in sorted(folder.glob("*.zip")):
        extracted = _notebook_from_zip(archive, notebook, work)
        if extracted:
            return extracted, [f"graded the notebook inside {archive.name}"]
    names = ", ".join(str(p.relative_to(folder)) for p in found)
    linked = " (symbolic links are not followed)" if path.is_symlink() else ""
    return None, [f"no {notebook}.ipynb in the submission{linked}" + (f" (found {names}: which one?)" if found
                                                                         else "")]


def _notebook_from_zip(archive: Path, notebook: str, work: Path) -> Path | None:
    import zipfile

    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if m.filename.endswith(".ipynb") and "__MACOSX" not in m.filename
                       and ".ipynb_checkpoints" not in m.filename]
            exact = [m for m in members if Path(m.filename).name == f"{notebook}.ipynb"]
            chosen = exact[:1] or (members if len(members) == 1 else [])
            if not chosen or chosen[0].file_size > MAX_NOTEBOOK_BYTES:
                return None
            target = work / "submitted-from-zip.ipynb"  # never the member's own path: no traversal
            target.write_bytes(z.read(chosen[0]))
            return target
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return None
