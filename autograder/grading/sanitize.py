"""Sanitize: rebuild the notebook to execute from the instructor's master and the student's file.

Trust is a stage. Whatever the submission contains, the executed notebook has the master's locked
cells and test cells (hidden tests included), in the master's order, no outputs (a pre-filled
output could pass for an answer record), the master's kernel, and the student's solution cells
(matched by grade_id; a missing one becomes the release stub, never the reference). Ungraded cells
are the student's own (as in nbgrader), each right after the graded cell it followed, so scratch
work an answer depends on still runs. Where a graded cell appears twice, the last copy is graded, as
in the student's kernel run from the top and in nbgrader (``DeduplicateIds``); an earlier copy of an
answer runs before it as the student's own cell. A cell is cut at ``MAX_CELL_CHARS``. A markdown cell
keeps the images pasted into it (its ``attachments``), so that its text renders. Every repair (and
every cut) is reported.

A notebook in an older format (nbformat 3, with its cells in worksheets) is upgraded by nbformat's own
conversion first. The files of a submission are hashed (has it changed since it was graded?) to a cap
(``hash_files``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from ..notebook_json import half_pairs, loads_text
from ..record import RESTORED, SETTING_MIME, TICK
from .files import files_under, opened, read_plain

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_CELL_CHARS = 200_000
# Hashing a submission's files: a file up to HASH_WHOLE_BYTES is read whole (every notebook the grader would grade,
# and the zip it may come in, so "unchanged" is exact for them), a larger one is known by its size, its time of
# change and its first and last HASH_EDGE_BYTES; past HASH_TOTAL_BYTES read for one submission, the files left are
# known by their size and time of change alone.
HASH_WHOLE_BYTES = 2 * MAX_NOTEBOOK_BYTES
HASH_EDGE_BYTES = 2**20
HASH_TOTAL_BYTES = 256 * 2**20


@dataclass
class Sanitized:
    notebook: NotebookNode
    problems: list[str] = field(default_factory=list)
    # The values each exercise setting last showed in the student's saved outputs (``record.SETTING_MIME``): what
    # the notebook was worked with, to compare with what it is graded with. Said by the student: a note, never a score.
    shown: dict[str, Any] = field(default_factory=dict)
    # The questions whose self-check the saved outputs show as passed (``✓ <qid>: correct.``), as the student last
    # ran them: where the graded run scores one less, the student is told why that can be.
    ticked: set[str] = field(default_factory=set)


def grade_id(cell: Any) -> str | None:
    """The cell's nbgrader grade id, where its metadata has one."""
    try:
        gid = cell["metadata"]["nbgrader"]["grade_id"]
    except (KeyError, TypeError):
        return None
    return gid if isinstance(gid, str) else None


def is_solution(cell: dict[str, Any]) -> bool:
    """Whether ``cell`` is an answer (solution) cell, read from a notebook's cells as they come (any JSON)."""
    meta = cell.get("metadata")
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return isinstance(meta, dict) and bool(meta.get("solution"))


def students(cell: dict[str, Any]) -> bool:
    """Whether ``cell`` of a notebook ``sanitize`` rebuilt holds what the student wrote: an answer cell (the master's
    metadata, the student's text), or a cell of the student's own (no metadata: it earns nothing). Every other cell
    is the master's, whatever the submission held in its place."""
    meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
    return not isinstance(meta, dict) or not meta.get("grade_id") or bool(meta.get("solution"))


def read_submission(path: Path | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The student's cells as plain dicts, tolerating what JSON and nbformat would reject."""
    if path is None:
        return [], []
    raw = b""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return [], [f"the notebook is {path.stat().st_size / 2**20:.0f} MiB, over the "
                        f"{MAX_NOTEBOOK_BYTES // 2**20} MiB limit: graded as empty"]
        raw, cut = read_plain(path, MAX_NOTEBOOK_BYTES)  # a plain file, and no more than that however it grew
        if cut:
            return [], [f"the notebook is over the {MAX_NOTEBOOK_BYTES // 2**20} MiB limit: graded as empty"]
        text, decoded = _text(raw)
        data, halves = loads_text(text)
    except (OSError, ValueError, RecursionError) as e:
        return [], [f"the notebook cannot be read ({type(e).__name__}{_encoding(raw)}): graded as empty"]
    problems = ([decoded] if decoded else []) + ([f"{half_pairs(halves)} replaced by \ufffd"] if halves else [])
    version = data.get("nbformat") if isinstance(data, dict) else None
    if type(version) is int and version < 4 and not isinstance(data.get("cells"), list):
        data, upgraded = _upgraded(data, version)
        problems.append(upgraded)
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return [], [*problems, "the notebook has no list of cells: graded as empty"]
    good = [c for c in cells if isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw")]
    problems += [] if len(good) == len(cells) else [f"{len(cells) - len(good)} malformed cells ignored"]
    return good, problems


def _saved_outputs(cells: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each output the student's file saved in its code cells, as it is (their own, untrusted: notes only)."""
    for cell in cells:
        outputs = cell.get("outputs") if cell.get("cell_type") == "code" else None
        yield from (out for out in (outputs if isinstance(outputs, list) else []) if isinstance(out, dict))


def shown_settings(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Setting name -> the values its last display in the saved outputs showed (well-formed ones only)."""
    shown: dict[str, Any] = {}
    for out in _saved_outputs(cells):
        data = out.get("data")
        setting = data.get(SETTING_MIME) if isinstance(data, dict) else None
        if isinstance(setting, dict) and isinstance(setting.get("name"), str) \
                and isinstance(setting.get("values"), dict) and len(setting["name"]) <= 100:
            shown[setting["name"]] = setting["values"]
    return shown


def ticked_questions(cells: list[dict[str, Any]]) -> set[str]:
    """The question ids the saved stream outputs show a passed self-check for (``record.TICK``)."""
    ticked: set[str] = set()
    for out in _saved_outputs(cells):
        text = out.get("text") if out.get("output_type") == "stream" else None
        text = "".join(t for t in text if isinstance(t, str)) if isinstance(text, list) else text
        if isinstance(text, str):
            ticked.update(TICK.findall(text[:100_000]))
    return ticked


def _text(raw: bytes) -> tuple[str, str]:
    """The file's text, and a note where it is not the UTF-8 Jupyter writes and reads: a byte-order mark, UTF-16, or
    bytes that are no UTF-8 (replaced by \ufffd). Each is graded with the note, as Jupyter cannot open the file as
    it is but its cells are all there; a zero for an encoding would be a regrade by hand every time."""
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", errors="replace"), ("the notebook starts with a byte-order mark, which Jupyter "
                                                          "cannot open: read without it (save it as UTF-8 without one)")
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16", errors="replace"), ("the notebook is saved as UTF-16, which Jupyter cannot "
                                                        "open: read as UTF-16 (save it as UTF-8)")
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - raw.count("\ufffd".encode())
    return text, (f"the notebook holds bytes that are not UTF-8 ({bad} place{'s' if bad != 1 else ''}), which Jupyter "
                  "cannot open: each read as \ufffd (save it as UTF-8)") if bad > 0 else ""


def _encoding(raw: bytes) -> str:
    """Why a file JSON cannot read is no notebook, where its first bytes say it is text in another encoding than
    the UTF-8 Jupyter writes (and reads): how to save it."""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in raw[:4]:
        return "; it is saved as UTF-16, which Jupyter cannot open either: save it as UTF-8"
    if raw.startswith(b"\xef\xbb\xbf"):
        return "; it starts with a byte-order mark, which Jupyter cannot open either: save it as UTF-8 without one"
    return ""


def _upgraded(data: dict[str, Any], version: int) -> tuple[Any, str]:
    """A notebook in an older format (``version`` 3 and before: its cells in ``worksheets``) upgraded to nbformat 4
    by nbformat's own conversion, and a note that says so; unchanged where the conversion fails."""
    try:
        old = nbformat.from_dict({"metadata": {}, **data})  # the one key the conversion cannot do without
        return nbformat.convert(old, 4), f"the notebook is in nbformat {version}: upgraded to 4"
    except Exception as e:  # whatever a malformed old notebook makes the conversion raise: graded as empty
        return data, f"the notebook is in nbformat {version} and cannot be upgraded ({type(e).__name__})"


def hash_files(h: Any, folder: Path) -> None:
    """Update the hash ``h`` with every file under ``folder`` (links not followed), in order of their paths: its
    path, and its bytes read to the caps above. A file it cannot read counts as its error. Within the caps, this is
    the hash of every file's path and all its bytes (so fingerprints stored before the caps still match)."""
    budget = HASH_TOTAL_BYTES
    for path in files_under(folder):
        h.update(os.fsencode(path.relative_to(folder)) + b"\0")
        try:
            with opened(path) as f:
                budget -= _hash_file(h, f, budget)
        except OSError as e:
            h.update(f"\0unreadable: {type(e).__name__} {e.errno}\0".encode())


def _hash_file(h: Any, f: Any, budget: int) -> int:
    """Hash the open file ``f`` (whole, by its edges, or by its size and time alone: see above) with at most
    ``budget`` bytes read if it can; return how many were read."""
    info = os.fstat(f.fileno())
    size, read = info.st_size, 0
    if size <= min(HASH_WHOLE_BYTES, budget):
        while block := f.read(min(1 << 20, HASH_WHOLE_BYTES + 1 - read)):  # one more: a file that grows is seen
            h.update(block)
            read += len(block)
            if read > HASH_WHOLE_BYTES:
                break
        return read
    h.update(f"\0{size} bytes, changed at {info.st_mtime_ns}\0".encode())
    if budget >= 2 * HASH_EDGE_BYTES:
        head = f.read(HASH_EDGE_BYTES)
        f.seek(max(len(head), size - HASH_EDGE_BYTES))
        tail = f.read(HASH_EDGE_BYTES)
        h.update(head + b"\0" + tail)
        read = len(head) + len(tail)
    return read


def _attachments(cell: dict[str, Any]) -> dict[str, dict[str, str]] | None:
    """A markdown cell's pasted images (name -> MIME type -> base64 text), where they are shaped as nbformat
    says; anything else is none."""
    found = cell.get("attachments")
    if not isinstance(found, dict) or not found:
        return None
    out = {}
    for name, bundle in found.items():
        if not isinstance(name, str) or not isinstance(bundle, dict) or not bundle:
            return None
        data = {mime: "".join(v) if isinstance(v, list) else v for mime, v in bundle.items()}
        if not all(isinstance(m, str) and isinstance(v, str) for m, v in data.items()):
            return None
        out[name] = data
    return out


def _markdown(source: str, theirs: dict[str, Any]) -> NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    if (attached := _attachments(theirs)) is not None:
        cell["attachments"] = attached
    return cell


def _full_source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _source(cell: dict[str, Any], where: str, cut: list[str]) -> str:
    """The cell's text, at most ``MAX_CELL_CHARS`` of it; a cut one is named (``where``) in ``cut``."""
    src = _full_source(cell)
    if len(src) > MAX_CELL_CHARS:
        cut.append(f"{where} was cut to its first {MAX_CELL_CHARS:,} characters (it had {len(src):,}): the rest "
                   "of it was not run")
    return src[:MAX_CELL_CHARS]


def sanitize(master: NotebookNode, stubs: dict[str, str], submission: Path | None,
             locked: dict[str, tuple[str, str]] | None = None) -> Sanitized:
    """``master``: the source notebook (solutions, hidden tests); ``stubs``: the release text of
    each solution cell by grade_id; ``submission``: the student's file; ``locked``: the release text and checksum
    of each other graded cell (its tests), by grade_id, to name the ones a student edited (None: not compared)."""
    cells, problems = read_submission(submission)
    by_id = {grade_id(c): c for c in master.cells if grade_id(c)}
    # The last copy of a graded cell is the graded one: run from the top, the student's kernel ends with
    # what it set, and nbgrader keeps the last copy too.
    last = {gid: i for i, c in enumerate(cells) if (gid := grade_id(c)) in by_id}
    taken: dict[str, dict[str, Any]] = {}
    extra_after: dict[str | None, list[NotebookNode]] = {}
    anchor: str | None = None
    duplicated: list[str] = []
    cut: list[str] = []
    for i, cell in enumerate(cells):
        gid = grade_id(cell)
        if gid in by_id and last[gid] == i:
            taken[gid] = cell
            anchor = gid
            continue
        if gid in by_id:
            if gid not in duplicated:
                duplicated.append(gid)
            if not is_solution(by_id[gid]):
                continue  # an earlier copy of the assignment's own cell: the master's copy stands for it
        if cell.get("cell_type") in ("code", "markdown") and _full_source(cell).strip():
            # Ungraded cells are the student's, as in nbgrader: their own version runs, where they
            # put it (after the graded cell it followed), and so does an earlier copy of an answer, which
            # the kernel ran too. Metadata is dropped: it earns nothing.
            where = f"your {cell['cell_type']} cell " + (f"after {anchor}" if anchor else "before the graded cells")
            source = _source(cell, where, cut)
            made = nbformat.v4.new_code_cell(source) if cell["cell_type"] == "code" else _markdown(source, cell)
            extra_after.setdefault(anchor, []).append(made)
    if duplicated:
        problems.append(f"duplicated graded cells: {', '.join(duplicated)} (the last copy of each is graded, as when "
                        "the notebook runs from the top; an earlier copy of an answer runs before it as your own cell)")
    out = list(extra_after.get(None, []))
    missing, retyped, edited, earlier = [], [], [], []
    for cell in master.cells:
        gid = grade_id(cell)
        if not gid:
            continue  # the master's ungraded cells: the student's own copies (above) stand for them
        new = nbformat.from_dict(json.loads(json.dumps(cell)))
        new.pop("outputs", None)
        if new.cell_type == "code":
            new.outputs, new.execution_count = [], None
        if gid and is_solution(cell):
            theirs = taken.get(gid)
            if theirs is None:
                missing.append(gid)
                new.source = stubs.get(gid, "")
                new.metadata[RESTORED] = True  # why its test recorded nothing says so (``record.why_no_record``)
            else:
                if theirs.get("cell_type") != cell.cell_type:
                    retyped.append(gid)
                new.source = _source(theirs, f"cell {gid}", cut)
                if new.cell_type == "markdown" and (attached := _attachments(theirs)) is not None:
                    new["attachments"] = attached
        elif gid and gid not in taken:
            missing.append(gid)
        elif how := _edited(taken[gid], cell, locked):
            (edited if how == EDITED else earlier).append(gid)
        out.append(new)
        out.extend(extra_after.get(gid, []))
    if missing and not taken:
        # no notebook found, unreadable, or no cells: the note that says "no notebook" or "graded as empty" is enough
        if submission is not None and (cells or not problems):
            problems.append(f"none of the assignment's {len(missing)} cells were found in the notebook: all restored "
                            "from the assignment (was it made from the released notebook?)")
    elif missing:
        problems.append(f"cells restored from the assignment: {', '.join(missing)}")
    if retyped:
        problems.append(f"cells changed back to their original type: {', '.join(retyped)}")
    if edited:
        problems.append(f"locked cells whose text or points the notebook had changed, restored from the assignment: "
                        f"{', '.join(edited)}")
    if earlier:
        problems.append(f"test cells that changed since this notebook was made (the assignment was released again, "
                        f"with a correction), graded as the new release has them: {', '.join(earlier)}")
    once = sorted((g for g in taken if g not in duplicated), key=last.__getitem__)  # a duplicate has its own note
    if moved := _moved(once, [g for c in master.cells if (g := grade_id(c))]):
        problems.append(f"graded cells in another order than the assignment's: {', '.join(moved)} graded in the "
                        "assignment's order (where a cell uses what a later one sets, the result can differ from "
                        "your run)")
    problems += cut
    nb = nbformat.v4.new_notebook(cells=out, metadata=json.loads(json.dumps(master.metadata)))
    for i, c in enumerate(nb.cells):
        c["id"] = f"graded-{i:03d}"
    return Sanitized(nb, problems, shown_settings(cells), ticked_questions(cells))


EDITED, EARLIER = "edited", "earlier"


def _edited(theirs: dict[str, Any], cell: NotebookNode, locked: dict[str, tuple[str, str]] | None) -> str:
    """How a student's copy of a locked graded cell differs from the assignment's, its points or its text: EDITED
    where it carries the release's checksum (or none), EARLIER where it carries another (nbgrader's checksum covers
    the text and points, so that is the cell of an earlier release: an erratum since, no edit of the student's);
    "" where it does not differ. Either way the assignment's copy is what runs; this only names it."""
    meta = theirs.get("metadata") if isinstance(theirs.get("metadata"), dict) else {}
    theirs_nb = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
    points = theirs_nb.get("points")
    text, checksum = (locked or {}).get(grade_id(cell) or "", ("", ""))
    other_points = points is not None and points != cell.metadata.get("nbgrader", {}).get("points")
    other_text = bool(checksum) and _full_source(theirs).strip() != text.strip()
    if checksum and theirs_nb.get("checksum") not in (None, checksum):
        return EARLIER if other_points or other_text else ""
    return EDITED if other_points or (other_text and theirs_nb.get("checksum") == checksum) else ""


def _moved(theirs: list[str], master: list[str]) -> list[str]:
    """The fewest of the student's graded cells that, put back, restore the assignment's order: those outside a
    longest run of cells already in that order (the student dragged those, or swapped their grade ids)."""
    rank = {gid: i for i, gid in enumerate(master)}
    best: list[list[str]] = []  # best[k]: an in-order run of length k+1 ending at the lowest rank
    for gid in theirs:
        k = next((k for k, run in enumerate(best) if rank[run[-1]] > rank[gid]), len(best))
        run = (best[k - 1] if k else []) + [gid]
        best[k:k + 1] = [run]
    kept = set(best[-1]) if best else set()
    return [gid for gid in theirs if gid not in kept]


def release_stubs(release_nb: NotebookNode) -> dict[str, str]:
    return {gid: c.source for c in release_nb.cells if (gid := grade_id(c)) and is_solution(c)}


def release_locked(release_nb: NotebookNode) -> dict[str, tuple[str, str]]:
    """The release text and checksum of each graded cell that is not an answer (its tests, as students got them)."""
    return {gid: (c.source, str(c.metadata.get("nbgrader", {}).get("checksum") or ""))
            for c in release_nb.cells if (gid := grade_id(c)) and not is_solution(c)}
