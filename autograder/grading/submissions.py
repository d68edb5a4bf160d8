"""Submissions: what each student handed in, found whatever shape it arrived in.

A submission is ``submitted/<student>/<assignment>/``. The notebook in it is found by its name (other
notebooks beside it are named in a note, never graded in its place); else it is the one candidate in the
folder or its zips (renamed, moved, or inside an LMS download, extracted safely). Several candidates (two
zips, one zip holding the notebook twice, a renamed notebook beside a zip) are refused and named, as two
renamed notebooks are: choosing among them would be a guess. Work handed in anywhere else under
``submitted/`` is not graded but listed (``misplaced``), never left out in silence. Symbolic links are never
followed: a link could point a grader at a file the student cannot read (another student's zip, say); every
file is opened as a plain file only (files.py). The fingerprint covers everything handed in, so a changed
upload is graded again (results.py). Names in the folder are the student's: the notes that quote them escape
control characters (console.printable), and nothing here raises on a name that is not UTF-8 or a file it
cannot read.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .console import printable
from .files import WALKED_ENTRIES, files_under, opened, read_plain, walk
from .sanitize import MAX_NOTEBOOK_BYTES, hash_files

if TYPE_CHECKING:
    from .pipeline import Assignment

# Part of every fingerprint, so that a new grader grades every submission again.
GRADER_VERSION = "2"  # 2: function answers judged on cases drawn per submission; kernels in private namespaces


def submissions(a: Assignment) -> list[tuple[str, Path]]:
    """(student, submission folder) for every submitted/<student>/<assignment>/ (a hidden student folder, whose
    name starts with ".", is not a student's: ``misplaced`` names it)."""
    out = []
    for student_dir in sorted((a.course_dir / "submitted").iterdir()):
        folder = student_dir / a.name
        if student_dir.is_dir() and not student_dir.name.startswith(".") and folder.is_dir():
            out.append((student_dir.name, folder))
    return out


def handed_in(course_dir: Path, student: str, assignment: str) -> bool:
    """Whether a stored result's submission is still there: grades.csv and the copy reports count a result only
    while it is, so a trial, a dropped student or an id graded under a misspelling leaves them with its folder."""
    return (course_dir / "submitted" / student / assignment).is_dir()


def fingerprint(folder: Path, notebook: str) -> str:
    """Hash of everything submitted (a renamed notebook or a zip counts too) and the grader version. The
    parent computes it (has this submission changed?): a file it cannot read counts as its error."""
    h = hashlib.sha256(f"{GRADER_VERSION}|{notebook}".encode())
    hash_files(h, folder)  # to its caps: a huge file would otherwise be read whole on every rerun
    return h.hexdigest()


TIMESTAMP_BYTES = 256
# What nbgrader's parser (``nbgrader.utils.parse_utc``) reads as the time it means: nbgrader's own form
# (``2026-12-02 10:00:00.000000 UTC``: date, time and a zone name, split at spaces), or ISO 8601 with ``Z`` or an
# offset in hours joined to the time. Not a zone as a bare number after a space (``+0100``: parse_utc takes it for
# seconds), nor a zone name it does not know (it reads the time as UTC). A zone name is a file name for the parser
# (dateutil reads /usr/share/zoneinfo/<name>): letters, "_", "+", "-" and slashes only, no dots.
_ZONE_NAME = r"[A-Za-z][A-Za-z_+-]*(?:/[A-Za-z][A-Za-z_+-]*)*"
_TIMESTAMP = re.compile(r"(?P<stamp>\d{4}-\d{2}-\d{2}(?P<sep>[ T])\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)"
                        rf"(?: (?P<zone>{_ZONE_NAME})|Z|[+-]\d{{2}}:?\d{{2}})?")
# A note that starts so says the time of this hand-in is unknown (``gradebook.unreadable_time``): the worker's, or
# the parent's where nbgrader's parser refuses what the worker let through.
UNREADABLE = "timestamp.txt holds no time the gradebook can read, so none is recorded for this hand-in"


def plausible_time(text: str) -> None:
    """Raise ValueError unless ``text`` is a real date and time (not the 30th of February) in a form that nbgrader's
    parser reads as the time it means (``_TIMESTAMP``). The worker's check: it needs no nbgrader, and it keeps from
    the parser any zone name that is not a plain file name; ``read_time`` then reads it with nbgrader's parser."""
    from dateutil.tz import gettz

    m = _TIMESTAMP.fullmatch(text)
    if not m:
        raise ValueError("not a date and time that nbgrader reads as meant")
    datetime.fromisoformat(m["stamp"])
    if m["zone"] and m["sep"] != " ":
        raise ValueError("a zone name after an ISO 8601 time")  # one word for the parser: the zone name goes unread
    if m["zone"] and gettz(m["zone"]) is None:
        raise ValueError(f"no time zone nbgrader knows is named {m['zone']}")


def read_time(text: str) -> datetime:
    """The UTC time ``text`` means, as nbgrader's gradebook reads it (``nbgrader.utils.parse_utc``, in the parent
    only: importing nbgrader takes a second), once ``plausible_time`` takes it; else ValueError."""
    from nbgrader.utils import parse_utc

    plausible_time(text)
    try:
        return parse_utc(text)
    except Exception as e:  # dateutil raises ValueError, OverflowError and more on some inputs
        raise ValueError(f"{type(e).__name__}: {e}") from None


def timestamp(folder: Path) -> tuple[str | None, str | None]:
    """The submission time the collecting tool wrote in ``timestamp.txt`` (None if there is none, or it is empty,
    as nbgrader reads it), and a note (``UNREADABLE``) where the file is there but holds no time the gradebook can
    read: the file is the student's, and the gradebook reads it in the parent, where an error would stop the class.
    What that means for the grade is the gradebook's to say (``gradebook.settle``)."""
    path = folder / "timestamp.txt"
    try:
        data, cut = read_plain(path, TIMESTAMP_BYTES)
        text = data.decode("utf-8").strip()
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f"{UNREADABLE} (it could not be read: {type(e).__name__})"
    if not text and not cut:
        return None, None
    try:
        if cut:
            raise ValueError("longer than a date and time")
        plausible_time(text)
    except Exception as e:  # dateutil raises ValueError, OverflowError, and more on some inputs
        return None, f"{UNREADABLE} ({printable(str(e))[:100]})"  # the student reads it too: no exception's name
    return text, None


def locate(a: Assignment, student: str, folder: Path, work: Path) -> tuple[Path | None, list[str]]:
    """The notebook to grade for ``student`` (see ``find_notebook``), and what was odd about it."""
    if folder.resolve() != a.course_dir / "submitted" / student / a.name:
        return None, ["the submission folder is a symbolic link, which the grader does not follow"]
    return find_notebook(folder, a.notebook, work)


def notebooks_under(folder: Path, suffix: str = ".ipynb") -> list[Path]:
    """The notebooks (or, with ``suffix``, the zips) handed in under ``folder``, wherever they are, but JupyterLab's
    checkpoints; by the name's ending in any case, as Windows and an LMS may write it (``HW.IPYNB``, ``Work.ZIP``)."""
    return [p for p in files_under(folder) if p.name.lower().endswith(suffix)
            and ".ipynb_checkpoints" not in p.relative_to(folder).parts]


def find_notebook(folder: Path, notebook: str, work: Path) -> tuple[Path | None, list[str]]:
    """The submitted notebook: by its name; else the one candidate, whatever its name or place: a notebook in
    the folder (renamed or moved) or inside a zip (an LMS download, where a member of the assignment's name is
    the zip's candidate, its other notebooks not), extracted safely into ``work``. Copies with the same bytes
    (a zip and its unzipped folder) are one candidate. Several that differ are refused, each named ("which
    one?"), wherever they are: taking the first would be a guess (a draft.zip sorts before final.zip)."""
    path = folder / f"{notebook}.ipynb"
    found = notebooks_under(folder)
    archives = notebooks_under(folder, ".zip")  # in a folder of the upload too (``download/hw.zip``)
    if not path.is_file():  # the assignment's name in other capitals (``CH01_ROOFLINES.IPYNB``) is its name too
        named = [p for p in found if p.parent == folder and p.name.lower() == path.name.lower()]
        path = named[0] if len(named) == 1 else path
    if path.is_file() and not path.is_symlink():
        # Graded by its name, never a guess; work handed in beside it (JupyterLab's Duplicate writes
        # ``<name>-Copy1.ipynb``, and ``nbgrader submit`` sends the whole folder) is named, for the staff.
        others = [p for p in found if p != path] + archives
        return path, ([f"graded {printable(path.name)}; also handed in, not graded: {_names(others, folder)} (if your "
                       "work is there, tell the course staff)"] if others else [])
    candidates = [_Candidate(printable(p.relative_to(folder)), p) for p in found]
    passed_over: list[str] = []  # what a zip holds beside its candidate, and zips with no notebook
    unopened: list[str] = []  # zips too large to look into
    for archive in archives:
        inside, besides = _zipped(archive, notebook)
        candidates += inside
        unopened += besides if not inside else []
        passed_over += besides if inside or besides else [printable(archive.name)]
    candidates, copies = _distinct(candidates)
    if len(candidates) > 1:
        return None, [f"no {notebook}.ipynb in the submission (found {_listed([c.where for c in candidates])}: "
                      "which one?)"]
    if not candidates:
        linked = " (symbolic links are not followed)" if path.is_symlink() else ""
        also = f"; {_listed(unopened)}" if unopened else ""
        # what was handed in instead, named, so a person can see what went wrong (folders too, where it holds no file)
        held = files_under(folder) or sorted(folder.iterdir())[:WALKED]
        held_text = "" if unopened else f"; it holds {_names(held, folder)}" if held else "; the folder is empty"
        return None, [f"no {notebook}.ipynb in the submission{linked}{also}{held_text}"]
    [chosen] = candidates
    aside = copies + passed_over
    also = f"; also handed in, not graded: {_listed(aside)} (if your work is there, tell the course staff)" if aside \
        else ""
    if chosen.member < 0:
        return chosen.path, [f"graded {chosen.where}, expected {notebook}.ipynb (renamed or moved?){also}"]
    data = chosen.read()
    if data is None:
        return None, [f"the notebook inside {printable(chosen.path.name)} is over the {MAX_NOTEBOOK_BYTES // 2**20} "
                      "MiB limit or cannot be read from the zip: graded as empty"]
    work.mkdir(parents=True, exist_ok=True)
    target = work / "submitted-from-zip.ipynb"  # never the member's own path: no traversal
    target.write_bytes(data)
    return target, [f"graded the notebook inside {printable(chosen.path.name)}{also}"]


@dataclass(frozen=True)
class _Candidate:
    """A notebook that may be the submission: a file in the folder, or a zip's member (its index)."""

    where: str  # as the notes name it: ``sub/hw.ipynb``, ``ada/hw.ipynb in download.zip``
    path: Path  # the file, or the zip it is in
    member: int = -1

    def read(self) -> bytes | None:
        """Its bytes, at most ``MAX_NOTEBOOK_BYTES`` (None past them, or where it cannot be read)."""
        import zipfile

        try:
            if self.member < 0:
                data, cut = read_plain(self.path, MAX_NOTEBOOK_BYTES)
                return None if cut else data
            with opened(self.path) as f, zipfile.ZipFile(f) as z, z.open(z.infolist()[self.member]) as member:
                data = member.read(MAX_NOTEBOOK_BYTES + 1)  # what it inflates to, not what its header says
            return data if len(data) <= MAX_NOTEBOOK_BYTES else None
        except Exception:  # whatever a crafted archive makes zipfile or a decompressor raise: nothing read
            return None


DEDUPLICATED = 10  # candidates compared by their bytes at most; more are refused as they are


def _distinct(candidates: list[_Candidate]) -> tuple[list[_Candidate], list[str]]:
    """``candidates`` with copies of the same bytes as one (the first), and the names of the copies left out."""
    if len(candidates) < 2 or len(candidates) > DEDUPLICATED:
        return candidates, []
    digests = []
    for c in candidates:
        data = c.read()
        digests.append(hashlib.sha256(data).digest() if data is not None else c.where)
    firsts = [c for i, c in enumerate(candidates) if digests[i] not in digests[:i]]
    return firsts, [c.where for c in candidates if c not in firsts]


def _zipped(archive: Path, notebook: str) -> tuple[list[_Candidate], list[str]]:
    """The zip's candidates (its member named as the assignment's notebook, wherever in the zip; else every
    notebook in it), and the names of its other notebooks. Nothing from a zip that cannot be read."""
    import zipfile

    try:
        with opened(archive) as f, zipfile.ZipFile(f) as z:  # a link to someone else's zip is no upload
            infos = z.infolist()
            if len(infos) > WALKED_ENTRIES:  # as a folder's walk stops: no upload of work holds that many files
                return [], [f"{printable(archive.name)} (over {WALKED_ENTRIES:,} files: not opened)"]
            members = [(i, m.filename) for i, m in enumerate(infos) if m.filename.lower().endswith(".ipynb")
                       and not m.is_dir() and "__MACOSX" not in m.filename and ".ipynb_checkpoints" not in m.filename]
            # a zip in the zip (an LMS's bulk download zipped again) is not opened: named, so a person finds the work
            zipped = [f"{printable(m.filename)} in {printable(archive.name)} (a zip in a zip: not opened)"
                      for m in infos if m.filename.lower().endswith(".zip") and not m.is_dir()][:5]
    except Exception:  # whatever a crafted archive makes zipfile or a decompressor raise: no notebook
        return [], []
    exact = {i for i, name in members if name.rsplit("/", 1)[-1].lower() == f"{notebook}.ipynb".lower()}
    chosen = exact or {i for i, _ in members}  # a set: a list made this quadratic in the members (100,000: 160 s)
    where = [f"{printable(name)} in {printable(archive.name)}" for _, name in members]
    inside = [_Candidate(w, archive, i) for (i, _), w in zip(members, where, strict=True) if i in chosen]
    return inside, [w for (i, _), w in zip(members, where, strict=True) if i not in chosen] + zipped


def _listed(names: list[str], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _names(paths: list[Path], folder: Path, shown: int = 5) -> str:
    names = [printable(p.relative_to(folder)) + ("/" if p.is_dir() else "") for p in paths[:shown]]
    return ", ".join(names) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


WALKED = 10_000  # entries of a student's folder looked at for misplaced work, at most


def misplaced(a: Assignment) -> dict[str, str]:
    """A note for each place under ``submitted/`` that holds work for this assignment where the grader does not
    look (so it is not graded), by the student folder's name, or the file's for one directly in ``submitted/``:
    a notebook or zip with no ``<assignment>/`` folder around it (``submitted/<id>/<notebook>.ipynb``, an LMS
    zip beside where the folder should be), a folder named like the assignment in another case, the
    assignment's notebook in another folder, an assignment folder in a hidden student folder (``.jdoe/``). A
    student folder holding only other assignments says nothing."""
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
            if entry.is_symlink():
                continue
            if entry.name.startswith("."):
                # A student folder whose name starts with "." (a hidden folder, ``submissions`` does not take it):
                # named, never absent in silence. Jupyter's own (.ipynb_checkpoints) holds no assignment folder.
                if entry.is_dir() and (entry / a.name).is_dir() and not (entry / a.name).is_symlink():
                    notes[entry.name] = (f"not graded: submitted/{where}/ is a hidden folder (its name starts with "
                                         f"\".\"), which the grader does not take for a student's; rename it to the "
                                         "student's id, then grade again")
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
    for here, dirs, files in walk(student_dir):
        dirs[:] = [d for d in dirs if d != ".ipynb_checkpoints"]
        seen += len(dirs) + len(files)
        top = here == student_dir
        found += [here / d for d in dirs if d.casefold() in names]
        dirs[:] = [d for d in dirs if d.casefold() not in names]  # the folder is named: not its contents too
        found += [here / f for f in sorted(files) if f.casefold() in names or
                  (top and Path(f).suffix.lower() in (".ipynb", ".zip") and not f.startswith("."))]
        if seen > WALKED:
            break
    return sorted(set(found))


def same_id(student: str) -> str:
    """What two ids that name one person share: their composed Unicode form (NFC), case folded. ``José`` typed
    and ``José`` decomposed by a file system (a macOS zip writes NFD), or ``Alice`` and ``alice``."""
    return unicodedata.normalize("NFC", student).casefold()


def spelled(student: str) -> str:
    """``student`` as a note shows it, with its escapes where it is not ASCII: two ids that look the same on a
    screen (``José`` composed and decomposed) read differently (``Jos\\xe9``, ``Jose\\u0301``)."""
    shown = printable(student)
    return shown if student.isascii() else f"{shown} ({student.encode('ascii', 'backslashreplace').decode()})"


def near_ids(submitted: list[str], roster: list[str] | None) -> list[str]:
    """A warning for each set of ids, among the submitted folders and the gradebook's roster, that differ only in
    Unicode form or letter case (``same_id``) where at least one was submitted: each is graded as its own
    student, never merged, so the staff must hear that the grades may sit under an id the roster does not
    mean (nbgrader's export then lists a second, nameless student, and the roster's one with 0)."""
    on_roster, handed_in = set(roster or []), set(submitted)
    groups: dict[str, set[str]] = {}
    for student in handed_in | on_roster:
        groups.setdefault(same_id(student), set()).add(student)
    said = []
    for key in sorted(groups):
        ids = sorted(groups[key])
        if len(ids) < 2 or not handed_in & set(ids):
            continue
        named = [(f"submitted/{spelled(s)}/" if s in handed_in else f"the gradebook roster's {spelled(s)}")
                 + (" (on the roster)" if s in handed_in and s in on_roster else "") for s in ids]
        fix = ("rename the folder to the roster's id and grade again" if on_roster & set(ids)
               else "rename one folder to the other's id if they are one student, and grade again")
        said.append(f"Student ids that differ only in Unicode form or letter case: {', '.join(named)}. Each is "
                    f"graded as a different student, never merged (nbgrader's gradebook holds each apart); {fix}.")
    return said
