"""Submissions: what each student handed in, found whatever shape it arrived in.

A submission is ``submitted/<student>/<assignment>/``. The notebook in it is found by its name (other
notebooks beside it are named in a note, never graded in its place); else it is the only notebook in the
folder (renamed or moved); else the only notebook inside a zip (an LMS download), extracted safely. Work
handed in anywhere else under ``submitted/`` is not graded but listed (``misplaced``), never left out in
silence. Symbolic links are never followed: a link could point a grader at a
file the student cannot read (another student's zip, say); every file is opened as a plain file only
(files.py). The fingerprint covers everything handed in, so a changed upload is graded again
(results.py). Names in the folder are the student's: the notes that quote them escape control characters
(console.printable), and nothing here raises on a name that is not UTF-8 or a file it cannot read.
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .console import printable
from .files import opened, read_plain
from .sanitize import MAX_NOTEBOOK_BYTES, hash_files

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
    """Hash of everything submitted (a renamed notebook or a zip counts too) and the grader version. The
    parent computes it (has this submission changed?): a file it cannot read counts as its error."""
    h = hashlib.sha256(f"{GRADER_VERSION}|{notebook}".encode())
    hash_files(h, folder)  # to its caps: a huge file would otherwise be read whole on every rerun
    return h.hexdigest()


TIMESTAMP_BYTES = 256
# What nbgrader writes (``2026-12-02 10:00:00.000000 UTC``, the zone by name or offset) and ISO 8601. A zone
# name is a file name for the parser (dateutil reads /usr/share/zoneinfo/<name>): letters and slashes only.
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
                        r"(Z|[+-]\d{2}:?\d{2}| [+-]?\d{1,5}| [A-Za-z][A-Za-z_+-]*(/[A-Za-z][A-Za-z_+-]*)*)?")


def _plausible_time(text: str) -> None:
    """Raise ValueError unless ``text`` is a real date and time in one of the forms ``_TIMESTAMP`` takes (not
    the 30th of February); its zone is left to the gradebook, whose own reading in the parent drops a time
    it cannot store (``gradebook.write_result``)."""
    if not _TIMESTAMP.fullmatch(text):
        raise ValueError("not a date and time")
    stamp = re.match(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?", text)
    datetime.fromisoformat(stamp.group(0) if stamp else text)


def timestamp(folder: Path) -> tuple[str | None, str | None]:
    """The submission time the collecting tool wrote in ``timestamp.txt`` (None if there is none), and a note
    for the student where the file is there but not a time nbgrader's gradebook can store: the file is the
    student's, and the gradebook parses it in the parent, where an error would stop the class."""
    path = folder / "timestamp.txt"
    try:
        data, cut = read_plain(path, TIMESTAMP_BYTES)
        text = data.decode("utf-8").strip()
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f"timestamp.txt could not be read ({type(e).__name__}): the submission time is not recorded"
    if not text and not cut:
        return None, None
    try:
        if cut:
            raise ValueError("longer than a date and time")
        _plausible_time(text)
    except Exception as e:  # dateutil raises ValueError, OverflowError, and more on some inputs
        return None, (f"timestamp.txt does not hold a date and time the gradebook can store ({type(e).__name__}: "
                      f"{printable(str(e))[:100]}): the submission time is not recorded")
    return text, None


def locate(a: Assignment, student: str, folder: Path, work: Path) -> tuple[Path | None, list[str]]:
    """The notebook to grade for ``student`` (see ``find_notebook``), and what was odd about it."""
    if folder.resolve() != a.course_dir / "submitted" / student / a.name:
        return None, ["the submission folder is a symbolic link, which the grader does not follow"]
    return find_notebook(folder, a.notebook, work)


def find_notebook(folder: Path, notebook: str, work: Path) -> tuple[Path | None, list[str]]:
    """The submitted notebook: by its name; else the only notebook in the folder (renamed or moved);
    else the only notebook inside a zip (an LMS download), extracted safely into ``work``."""
    path = folder / f"{notebook}.ipynb"
    found = [p for p in sorted(folder.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts and
             p.is_file() and not p.is_symlink()]
    if path.is_file() and not path.is_symlink():
        # Graded by its name, never a guess; work handed in beside it (JupyterLab's Duplicate writes
        # ``<name>-Copy1.ipynb``, and ``nbgrader submit`` sends the whole folder) is named, for the staff.
        others = [p for p in found if p != path] + sorted(p for p in folder.glob("*.zip") if not p.is_symlink())
        return path, ([f"graded {notebook}.ipynb; also handed in, not graded: {_names(others, folder)} (if your "
                       "work is there, tell the course staff)"] if others else [])
    if len(found) == 1:
        return found[0], [f"graded {printable(found[0].relative_to(folder))}, expected {notebook}.ipynb "
                          "(renamed or moved?)"]
    for archive in sorted(folder.glob("*.zip")):
        extracted = _notebook_from_zip(archive, notebook, work)
        if extracted:
            return extracted, [f"graded the notebook inside {printable(archive.name)}"]
    names = ", ".join(printable(p.relative_to(folder)) for p in found)
    linked = " (symbolic links are not followed)" if path.is_symlink() else ""
    return None, [f"no {notebook}.ipynb in the submission{linked}" + (f" (found {names}: which one?)" if found
                                                                         else "")]


def _names(paths: list[Path], folder: Path, shown: int = 5) -> str:
    names = [printable(p.relative_to(folder)) + ("/" if p.is_dir() else "") for p in paths[:shown]]
    return ", ".join(names) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


WALKED = 10_000  # entries of a student's folder looked at for misplaced work, at most


def misplaced(a: Assignment) -> dict[str, str]:
    """A note for each place under ``submitted/`` that holds work for this assignment where the grader does not
    look (so it is not graded), by the student folder's name, or the file's for one directly in ``submitted/``:
    a notebook or zip with no ``<assignment>/`` folder around it (``submitted/<id>/<notebook>.ipynb``, an LMS
    zip beside where the folder should be), a folder named like the assignment in another case, the
    assignment's notebook in another folder. A student folder holding only other assignments says nothing."""
    submitted = a.course_dir / "submitted"
    expected = f"{a.name}/{a.notebook}.ipynb"
    notes = {}
    try:
        entries = sorted(submitted.iterdir())
    except OSError:
        return {}
    for entry in entries:
        where = printable(entry.name)
        try:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_file() and entry.suffix.lower() in (".ipynb", ".zip"):
                notes[entry.name] = (f"not graded: submitted/{where} is in no student's folder; "
                                     f"expected submitted/<student>/{expected}")
            elif entry.is_dir() and not (entry / a.name).is_dir() and (found := _misplaced_in(entry, a)):
                notes[entry.name] = (f"not graded: found {_names(found, entry)} in submitted/{where}/; "
                                     f"expected submitted/{where}/{expected}")
        except OSError:  # a folder the grader may not read: it holds nothing the grader could grade either
            continue
    return notes


def _misplaced_in(student_dir: Path, a: Assignment) -> list[Path]:
    """What in ``student_dir`` (which has no ``<assignment>/`` folder) looks like this assignment's work: notebooks
    and zips directly in it, a folder named like the assignment, the assignment's notebook anywhere (links are
    not followed; at most ``WALKED`` entries are looked at)."""
    found, seen = [], 0
    names = {a.name.casefold(), f"{a.notebook}.ipynb".casefold()}
    for root, dirs, files in os.walk(student_dir, onerror=lambda e: None):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints" and not (here / d).is_symlink())
        seen += len(dirs) + len(files)
        top = here == student_dir
        found += [here / d for d in dirs if d.casefold() in names]
        dirs[:] = [d for d in dirs if d.casefold() not in names]  # the folder is named: not its contents too
        found += [here / f for f in sorted(files) if f.casefold() in names or
                  (top and Path(f).suffix.lower() in (".ipynb", ".zip") and not f.startswith("."))]
        if seen > WALKED:
            break
    return sorted(set(found))


def _notebook_from_zip(archive: Path, notebook: str, work: Path) -> Path | None:
    import zipfile

    try:
        with opened(archive) as f, zipfile.ZipFile(f) as z:  # a link to someone else's zip is no upload
            members = [m for m in z.infolist() if m.filename.endswith(".ipynb") and "__MACOSX" not in m.filename
                       and ".ipynb_checkpoints" not in m.filename]
            exact = [m for m in members if Path(m.filename).name == f"{notebook}.ipynb"]
            chosen = exact[:1] or (members if len(members) == 1 else [])
            if not chosen or chosen[0].file_size > MAX_NOTEBOOK_BYTES:
                return None
            target = work / "submitted-from-zip.ipynb"  # never the member's own path: no traversal
            target.write_bytes(z.read(chosen[0]))
            return target
    except Exception:  # whatever a crafted archive makes zipfile or a decompressor raise: no notebook
        return None
