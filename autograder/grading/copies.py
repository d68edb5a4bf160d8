"""Copies: students of one assignment whose answers are the same, named for the staff. A hint for a person to look
at, never a verdict: no grade, gradebook entry or feedback changes.

Variants deal each student their own values, which protects typed numbers only: code that computes from the dealt
values (``e1.flops / hw.H100.bf16_flops_per_s``) earns a classmate's full marks on anyone's values. So after every
run, from every stored result of the assignment (students graded by earlier runs too), the answer cells of each
graded notebook are compared:

    read      -> autograded/<student>/<assignment>/<notebook>.ipynb: the master's cells with the student's answer
                 cells, as graded (a result the grader failed on, with no fingerprint, is left out)
    normalise -> each answer cell's first CELL_CHARS characters as tokens, without comments, blank lines or
                 spacing, a string's text kept as written, names as Python reads them (NFKC), and each change of
                 indentation level a token (``normalised``); outputs, locked cells and the student's
                 own extra cells are not read. A cell whose tokens are the release's (untouched, or only restyled)
                 or none is not answered
    compare   -> each pair of students: ``copied`` below
    report    -> lines for the run's summary, and .scaling-course/copies/<assignment>.csv, one row per pair

The rule (``copied``): two students are named when the answered cells they have the same are at least MIN_CELLS,
at least SHARE of the answered cells of each, and hold at least MIN_TOKENS tokens between them. Untouched notebooks
answer nothing, so they are never named; a few short lines that everyone right writes alike (a question with no
variant, ``q4_limit = 2.0``) are under MIN_TOKENS; two whole notebooks of one author are far over it. A copy whose
code was rewritten (other names, another order) is not found: this catches the copy handed in as it was, or
restyled.

The cost is one read of each graded notebook (JSON, its outputs included) and a comparison of each pair of students
whose numbers of answered cells are within SHARE of each other: 300 stored results take about a second (0.5 s
of Chapter 1, 1 s of Chapter 10; 2 s where 225 of them are one notebook, 25,200 pairs). A cell's text is cut at
CELL_CHARS and a notebook at NOTEBOOK_BYTES, so a hostile one costs at most about its size in JSON parsing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import STATE
from .console import printable
from .feedback import write_atomic
from .files import read_plain

if TYPE_CHECKING:
    from .pipeline import Assignment

MIN_CELLS = 3  # answered cells the same, at least: one or two can agree by chance
SHARE = 0.9  # of each student's answered cells, at least: 12 of 13 is named, 11 of 13 is not
MIN_TOKENS = 200  # of the cells the same, at least: Chapter 1's reference answers hold 849, its three shortest 68
CELL_CHARS = 20_000  # of each answer cell compared: the longest reference answer of the course has 2,777
# An autograded notebook larger than this is not compared (and is named so): a submission of up to 20 MiB
# (sanitize.MAX_NOTEBOOK_BYTES, pasted images included, which sanitize keeps), its outputs (5 MB) and records (16 MB).
NOTEBOOK_BYTES = 64 * 2**20
SHOWN = 10  # groups named in the summary, and students in a group's line; the file has every pair

# A line break with the next line's indentation, a line joined by a backslash, a comment (dropped), a string (one
# token, so a "#" in it is no comment: triple-quoted over lines, or on one line; one left open runs to the end of its
# line, or of the text, so each is read once: a lone backslash at the end is in it too), a word or number, a sign.
_TOKEN = re.compile(r"""(?P<line>\n[ \t\f]*)|(?P<joined>\\\n)|(?P<comment>#[^\n]*)"""
                    r"""|(?P<string>"{3}(?:\\[\s\S]|[^\\])*?(?:"{3}|\\?\Z)|'{3}(?:\\[\s\S]|[^\\])*?(?:'{3}|\\?\Z)"""
                    r"""|"(?:\\[\s\S]|[^"\\\n])*(?:"|(?=\n)|\\?\Z)|'(?:\\[\s\S]|[^'\\\n])*(?:'|(?=\n)|\\?\Z))"""
                    r"""|(?P<word>\w+)|[^\w\s]""")
INDENT, DEDENT = "\n>", "\n<"  # tokens no text makes: a line break is in no other token but a string, after its quote


def tokens(text: str) -> list[str]:
    """The tokens of ``text`` as Python reads them, but for comments, blank lines and spacing: names NFKC-normalised
    (``ｅ１`` is ``e1``), and a token for each change of indentation level at the start of a logical line (outside
    brackets, not after a backslash), as Python's INDENT and DEDENT: how far a block is indented is style, which
    block a line is in is meaning. One regular expression, not Python's tokenizer: its cost is linear, and text that
    is no Python (a cell cut mid-string) is read the same way."""
    out: list[str] = []
    levels, depth = [0], 0
    text = "\n" + text.replace("\r\n", "\n").replace("\r", "\n")
    for m in _TOKEN.finditer(text):
        if m["line"] is not None:
            if depth == 0 and text[m.end():m.end() + 1] not in ("", "\n", "#"):  # a logical line with code
                width = len(m["line"][1:].replace("\f", "").expandtabs(8))
                if width > levels[-1]:
                    levels.append(width)
                    out.append(INDENT)
                while width < levels[-1]:
                    levels.pop()
                    out.append(DEDENT)
                if width > levels[-1]:  # back to no level that was opened (an error to Python): a level of its own
                    levels.append(width)
                    out.append(INDENT)
        elif m["joined"] is None and m["comment"] is None:
            t = m.group()
            if m["word"] is not None:
                t = unicodedata.normalize("NFKC", t)
            elif m["string"] is None:
                depth = max(depth + (t in "([{") - (t in ")]}"), 0)
            out.append(t)
    return out


def normalised(text: str) -> tuple[str, int]:
    """(a digest of the ``tokens`` of ``text``'s first CELL_CHARS characters, how many tokens): comments, blank lines
    and spacing are not part of it, so ``x=1  # mine`` is ``x = 1``, and a block indented by two spaces is the same
    block indented by four."""
    found = tokens(text[:CELL_CHARS])
    digest = hashlib.sha256("\0".join(found).encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:32], len(found)


def _text(value: Any) -> str:
    """A cell's source (a string, or nbformat's list of lines) to its first CELL_CHARS characters."""
    if isinstance(value, str):
        return value[:CELL_CHARS]
    parts, size = [], 0
    for i, part in enumerate(value if isinstance(value, list) else []):
        if isinstance(part, str):
            parts.append(part)
            size += len(part)
        if size >= CELL_CHARS or i >= CELL_CHARS:
            break
    return "".join(parts)[:CELL_CHARS]


def answers(a: Assignment, student: str, released: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]] | None:
    """The answered cells of ``student``'s graded notebook (grade id -> ``normalised``), or None where there is no
    readable one. ``released``: each answer cell's release text, normalised."""
    path = a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb"
    try:
        raw, cut = read_plain(path, NOTEBOOK_BYTES)
        cells = None if cut else json.loads(raw).get("cells")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    found: dict[str, tuple[str, int]] = {}
    for cell in cells if isinstance(cells, list) else []:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        gid = (meta.get("nbgrader") or {}).get("grade_id") if isinstance(meta, dict) else None
        if not isinstance(gid, str) or gid not in released or gid in found:
            continue
        digest, tokens = normalised(_text(cell.get("source")))
        if tokens and digest != released[gid][0]:
            found[gid] = (digest, tokens)
    return found


@dataclass(frozen=True)
class Pair:
    a: str  # the two students, in order
    b: str
    same: int  # answered cells the same
    answered_a: int
    answered_b: int
    tokens: int  # in the cells the same
    cells: tuple[str, ...]  # their grade ids, in notebook order


def copied(same: int, answered_a: int, answered_b: int, tokens: int) -> bool:
    """The rule of the module docstring."""
    return same >= MIN_CELLS and same >= SHARE * max(answered_a, answered_b) and tokens >= MIN_TOKENS


def graded(a: Assignment) -> list[str]:
    """The students with a stored result of ``a`` the grader did not fail on (it has a fingerprint)."""
    out = []
    for path in sorted((a.course_dir / STATE / "results" / a.name).glob("*.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(result, dict) and result.get("sha256") and isinstance(result.get("student"), str):
            out.append(result["student"])
    return out


def find(a: Assignment) -> list[Pair]:
    """Every pair of students of ``a`` that ``copied`` names, from the stored results."""
    return compare(a)[0]


def compare(a: Assignment) -> tuple[list[Pair], list[str]]:
    """``find``'s pairs, and the graded students whose notebook could not be read: a notebook the check skips in
    silence would be a way to hide from it, so the summary names them."""
    released = {gid: normalised(text) for gid, text in a.stubs.items()}
    order = {gid: i for i, gid in enumerate(a.stubs)}
    read = {s: answers(a, s, released) for s in graded(a)}
    unread = sorted(s for s, found in read.items() if found is None)
    work = {s: found for s, found in read.items() if found and len(found) >= MIN_CELLS}
    students = sorted(work, key=lambda s: (len(work[s]), s))  # fewest answered first
    pairs = []
    for i, s in enumerate(students):
        mine = work[s].items()
        for t in students[i + 1:]:
            if len(work[s]) < SHARE * len(work[t]):
                break  # every later student answered more still: too many for the cells s has
            same = sorted((gid for gid, _ in mine & work[t].items()), key=order.__getitem__)
            tokens = sum(work[s][gid][1] for gid in same)
            if copied(len(same), len(work[s]), len(work[t]), tokens):
                x, y = sorted((s, t))
                pairs.append(Pair(x, y, len(same), len(work[x]), len(work[y]), tokens, tuple(same)))
    return sorted(pairs, key=lambda p: (p.a, p.b)), unread


def path(a: Assignment) -> Path:
    return a.course_dir / STATE / "copies" / f"{a.name}.csv"


def write(a: Assignment, pairs: list[Pair]) -> Path:
    """The file the staff open: one row per pair (a header alone where none is found), rewritten each run."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student_a", "student_b", "identical_cells", "answered_a", "answered_b", "identical_tokens", "cells"])
    for p in pairs:
        w.writerow([p.a, p.b, p.same, p.answered_a, p.answered_b, p.tokens, " ".join(p.cells)])
    write_atomic(path(a), buf.getvalue())
    return path(a)


def groups(pairs: list[Pair]) -> list[list[Pair]]:
    """The pairs by group of students linked through them (three who share one notebook are one group)."""
    root: dict[str, str] = {}

    def find_root(s: str) -> str:
        while root.setdefault(s, s) != s:
            root[s] = s = root[root[s]]  # halve the path: a group of hundreds stays cheap
        return s

    for p in pairs:
        if (x := find_root(p.a)) != (y := find_root(p.b)):
            root[x] = y
    by: dict[str, list[Pair]] = {}
    for p in pairs:
        by.setdefault(find_root(p.a), []).append(p)
    return sorted(by.values(), key=lambda g: (-len(g), g[0].a))


def _line(group: list[Pair]) -> str:
    names = sorted({s for p in group for s in (p.a, p.b)})
    low, high = min(p.same for p in group), max(p.same for p in group)
    most = max(max(p.answered_a, p.answered_b) for p in group)
    same = f"{low}" if low == high else f"{low} to {high}"
    each = "" if len(group) == 1 else ", pair by pair"
    listed = ", ".join(printable(s) for s in names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN
                                                                  else "")
    return f"  {listed} ({same} of {most} answered cells identical{each})"


def report(a: Assignment) -> list[str]:
    """What the run's summary says of copies: a line naming the notebooks it could not read, if any; then nothing
    where no pair is found, else a header and a line per group. The file is written either way. A note for the staff:
    nothing here may stop what was graded."""
    try:
        pairs, unread = compare(a)
        where = write(a, pairs).relative_to(a.course_dir)
    except Exception as e:
        return [f"Possible copies of {a.name}: not checked ({type(e).__name__}: {printable(str(e))[:200]})"]
    lines = []
    if unread:
        listed = ", ".join(printable(s) for s in unread[:SHOWN]) + (f" and {len(unread) - SHOWN} more"
                                                                   if len(unread) > SHOWN else "")
        lines.append(f"Copies of {a.name}: {listed} not compared (the graded notebook could not be read, or is over "
                     f"{NOTEBOOK_BYTES // 2**20} MiB: look at it in autograded/)")
    if not pairs:
        return lines
    found = groups(pairs)
    more = f"; {len(found) - SHOWN} more groups there" if len(found) > SHOWN else ""
    return [*lines, f"Possible copies of {a.name} (answer cells the same but for spacing and comments; a hint to look "
            f"at, not a verdict: no grade or feedback was changed; each pair in {where}{more}):",
            *(_line(g) for g in found[:SHOWN])]
