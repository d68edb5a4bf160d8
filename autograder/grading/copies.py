"""Copies: students of one assignment whose written cells are the same, named for the staff. A hint for a person to
look at, never a verdict: no grade, gradebook entry or feedback changes.

Variants deal each student their own values, which protects typed numbers only: code that computes from the dealt
values (``e1.flops / hw.H100.bf16_flops_per_s``) earns a classmate's full marks on anyone's values. So after every
run, from every stored result of the assignment (students graded by earlier runs too), the cells each student wrote
are compared, wherever they stand:

    read      -> autograded/<student>/<assignment>/<notebook>.ipynb: the notebook as ``sanitize`` rebuilt it and it
                 was graded (a result the grader failed on, with no fingerprint, is left out). Its cells are the
                 master's but for what the student wrote (``sanitize.students``): the answer cells, and the
                 student's own code cells, where they followed. So work moved out of the answer cells into cells of
                 one's own, or a notebook whose nbgrader metadata is gone (every cell of it the student's own, every
                 answer cell restored from the release), is read where it ran, as the grader read it
    normalise -> each written cell's first CELL_CHARS characters as tokens, without comments, blank lines, spacing
                 or notebook commands (``%env``, ``!pip``), a string's text kept as written, names as Python reads
                 them (NFKC), and each change of indentation level a token (``normalised``); outputs and the
                 student's markdown are not read. A cell is not compared where it is everyone's: its tokens are those
                 of a cell the assignment gave (an answer cell's placeholder, the setup cell, a setting, a test, a
                 plot: untouched, or only restyled), or fewer than MIN_CELL_TOKENS (``pass``, ``print(t_h100)``,
                 ``q4_bound = "never"``). What is left is the student's set of written cells
    compare   -> each pair of students: ``copied`` below
    report    -> lines for the run's summary, and .scaling-course/copies/<assignment>.csv, one row per pair

The rule (``copied``): two students are named when the written cells they have the same are at least MIN_CELLS, at
least SHARE of the written cells of one of the two and OF_THE_OTHER of the other's, and hold at least MIN_TOKENS
tokens between them. SHARE of one, not of each: cells of one's own count, so a copy padded with cells of the
copier's (or a notebook that copies most of another, and only that) must not hide behind them; half of the other's,
so that a student who wrote a few answers the way everyone does is not paired with every classmate who wrote those
and more. Untouched notebooks write nothing, so they are never named; a few short lines that
everyone right writes alike (a question with no variant, ``gpu_batch = q5.gpu.bf16_flops_per_s / ...``) are under
MIN_TOKENS; two whole notebooks of one author are far over it. A cell is read as the program it is where it parses
(``canonical``): a copy put through a formatter, its functions' local names changed or its lines reordered, is the
same cell. The course's reference answers are compared as one more student (``REFERENCE``). A copy whose code was
rewritten (expressions rearranged, an answer split over cells or joined into one) is not found.

The cost is one read of each graded notebook (JSON, its outputs included), its written cells' text tokenized (a cell
as the assignment gave it, character for character, is known without), and a set intersection for each pair of
students: 300 stored results took 0.5 s of CPU of Chapter 1, 1.4 s of Chapter 10, and 0.8 s where 225 of them are
one notebook (25,200 pairs), when cells were read as tokens alone; read as programs (``canonical``), 300 of Chapter
1, 200 of them one notebook (20,100 pairs), take 1.5 s. A cell's text is cut
at CELL_CHARS and a notebook at NOTEBOOK_BYTES; a notebook that holds more than MAX_CELLS written cells or
MAX_CODE_CHARS characters of them is not compared but named, so a hostile one costs at most about its size in JSON
parsing and cannot hide from the check by its bulk.
"""

from __future__ import annotations

import ast
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
from .results import handed_in_results
from .sanitize import grade_id, is_solution, students

if TYPE_CHECKING:
    from .pipeline import Assignment

MIN_CELLS = 3  # written cells the same, at least: one or two can agree by chance
SHARE = 0.9  # of one of the two students' written cells, at least: 12 of 13 is named, 11 of 13 is not
# ... and of the other's, at least: a copy padded with cells of the copier's own is named, while a student who wrote
# a few answers the way everyone does is not paired with each classmate who wrote those and more.
OF_THE_OTHER = 0.5
MIN_TOKENS = 200  # of the cells the same, at least: Chapter 1's reference answers hold 847, its three shortest 74
# A written cell with fewer tokens is not compared: what everyone writes alike (``pass``, ``print(t_h100)``,
# ``import numpy as np``, ``q4_bound = "never"``); the course's shortest reference answers (``e1_choice = "b"``) too.
MIN_CELL_TOKENS = 8
CELL_CHARS = 20_000  # of each written cell compared: the longest reference answer of the course has 2,777
# A graded notebook with more written cells, or more characters in them (each cut at CELL_CHARS), is named, not
# compared: its cost stays bounded, and bulk put before a copy does not hide it. The course's reference notebooks
# hold at most 38 code cells of the student's (Chapter 12) and 28,319 characters in them (Chapter 10).
MAX_CELLS = 1_000
MAX_CODE_CHARS = 1_000_000
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
    """The tokens of ``text`` as Python reads them, but for comments, blank lines, spacing and notebook commands (a
    line that starts with ``%`` or ``!``, as no Python line does: ``%env ...``, ``!pip install ...``, alike in every
    notebook run where the course is not installed): names NFKC-normalised (``ｅ１`` is ``e1``), and a token for each
    change of indentation level at the start of a logical line (outside brackets, not after a backslash), as
    Python's INDENT and DEDENT: how far a block is indented is style, which block a line is in is meaning. One
    regular expression, not Python's tokenizer: its cost is linear, and text that is no Python (a cell cut
    mid-string) is read the same way."""
    out: list[str] = []
    levels, depth, command = [0], 0, False
    text = "\n" + text.replace("\r\n", "\n").replace("\r", "\n")
    for m in _TOKEN.finditer(text):
        if m["line"] is not None:
            command = depth == 0 and text[m.end():m.end() + 1] in ("%", "!")  # IPython's, not Python: skipped
            if depth == 0 and text[m.end():m.end() + 1] not in ("", "\n", "#", "%", "!"):  # a logical line with code
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
        elif m["joined"] is None and m["comment"] is None and not command:
            t = m.group()
            if m["word"] is not None:
                t = unicodedata.normalize("NFKC", t)
            elif m["string"] is None:
                depth = max(depth + (t in "([{") - (t in ")]}"), 0)
            out.append(t)
    return out


def normalised(text: str) -> tuple[str, int]:
    """(a digest of the ``tokens`` of ``text``'s first CELL_CHARS characters, read as ``canonical`` code, how many
    tokens): comments, blank lines and spacing are not part of it, so ``x=1  # mine`` is ``x = 1``, and a block
    indented by two spaces is the same block indented by four."""
    found = tokens(canonical(text[:CELL_CHARS]))
    digest = hashlib.sha256("\0".join(found).encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:32], len(found)


# A cell read as Python (``canonical``) is this long at most: a longer one, or one that does not parse, is read as
# tokens alone. The course's longest reference answer has 2,777 characters; parsing costs more than tokens, and a
# class of hostile notebooks of huge cells must not slow the check.
CANONICAL_CHARS = 6_000


def canonical(text: str) -> str:
    """``text`` as the program it is, where it parses: written out by ``ast.unparse`` (so quotes, brackets and line
    breaks are the parser's), the names a function binds (its arguments, what it assigns, loops over or imports)
    renamed in the order they first appear, and the cell's statements in sorted order. A copy retyped through a
    formatter, with its local names changed, or with two independent lines swapped (each a full copy, handed in for
    full marks) read as a new cell; names the notebook shares (answers, settings, modules) stay as written. Text
    that does not parse is returned as it is."""
    if len(text) > CANONICAL_CHARS:
        return text
    try:
        tree = ast.parse(_COMMAND_LINES.sub("", text))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                _Locals(node).rename()
        return "\n".join(sorted(ast.unparse(s) for s in tree.body))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text


# A notebook command (``%env ...``, ``!pip install \``, ``%time x = 1``) and the lines it continues with a backslash:
# no Python, and alike in every notebook run where the course is not installed (``tokens`` skips them too).
_COMMAND_LINES = re.compile(r"^[ \t]*[%!](?:[^\n]*\\\n)*[^\n]*$", re.M)


class _Locals(ast.NodeTransformer):
    """The names a function binds, renamed ``_0``, ``_1``, ... in the order they first appear in it."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        self.fn, self.names = fn, {}
        args = fn.args
        bound = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        bound += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        for node in (n for stmt in body for n in ast.walk(stmt)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.append(node.id)
        for name in bound:
            self.names.setdefault(name, f"_{len(self.names)}")

    def rename(self) -> None:
        for a in ast.walk(self.fn.args):
            if isinstance(a, ast.arg) and a.arg in self.names:
                a.arg = self.names[a.arg]
        body = self.fn.body if isinstance(self.fn.body, list) else [self.fn.body]
        for stmt in body:
            self.visit(stmt)

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node


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


Written = dict[str, tuple[int, str]]  # a student's written cells: digest -> (tokens, where the first one stands)


def _cells(path: Path) -> list[Any] | None:
    """The cells of the notebook at ``path``, or None where it cannot be read (or is over NOTEBOOK_BYTES)."""
    try:
        raw, cut = read_plain(path, NOTEBOOK_BYTES)
        cells = None if cut else json.loads(raw).get("cells")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else None


@dataclass(frozen=True)
class Given:
    """The cells the assignment gives each student (``given``), which are everyone's."""
    texts: frozenset[str]  # as given, character for character: known without tokenizing, as most copies of them are
    digests: frozenset[str]  # ``normalised``: restyled too


def given(a: Assignment) -> Given:
    """Every cell the assignment gives each student: each answer cell's release text (its placeholder), each locked
    cell's release text (setup, settings, tests), and each other code cell of the master (plots, helpers: sanitize
    leaves them to the student's own copies)."""
    texts = [*a.stubs.values(), *(text for text, _ in a.locked.values())]
    texts += [_text(c.get("source")) for c in _cells(a.master) or [] if c.get("cell_type") == "code"
              and grade_id(c) not in a.stubs and not is_solution(c)]  # never a reference answer
    return Given(frozenset(texts), frozenset(normalised(text)[0] for text in texts))


def written(a: Assignment, student: str, everyones: Given) -> Written | None:
    """The written cells of ``student``'s graded notebook, or None where there is no readable one (or it is over
    MAX_CELLS or MAX_CODE_CHARS). A written cell stands at its answer cell's grade id, or ``after <grade id>``, the
    graded cell above it (as sanitize placed it: after the graded cell it followed). ``everyones``: ``given``."""
    cells = _cells(a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb")
    if cells is None:
        return None
    found: Written = {}
    above, chars = "", 0
    for cell in cells:
        gid = grade_id(cell)
        if not students(cell):
            above = gid or above
            continue
        if gid is None and cell.get("cell_type") != "code":
            continue  # the student's markdown: notes, not work
        text = _text(cell.get("source"))
        chars += len(text)
        digest, n = normalised(text) if text not in everyones.texts else ("", 0)
        if n >= MIN_CELL_TOKENS and digest not in everyones.digests and digest not in found:
            found[digest] = (n, gid or (f"after {above}" if above else "at the top"))
        if gid:
            above = gid
        if len(found) > MAX_CELLS or chars > MAX_CODE_CHARS:
            return None
    return found


@dataclass(frozen=True)
class Pair:
    a: str  # the two students, in order
    b: str
    same: int  # written cells the same
    written_a: int
    written_b: int
    tokens: int  # in the cells the same
    cells_a: tuple[str, ...]  # where they stand in a's notebook (a grade id, or "after <grade id>"), in its order
    cells_b: tuple[str, ...]  # where the same cells stand in b's


def copied(same: int, written_a: int, written_b: int, tokens: int) -> bool:
    """The rule of the module docstring."""
    return (same >= MIN_CELLS and same >= SHARE * min(written_a, written_b)
            and same >= OF_THE_OTHER * max(written_a, written_b) and tokens >= MIN_TOKENS)


def graded(a: Assignment) -> list[str]:
    """The students with a stored result of ``a`` the grader did not fail on (it has a fingerprint), whose
    submission is still there (``results.handed_in_results``: as grades.csv counts them)."""
    return [r["student"] for r in handed_in_results(a) if r.get("sha256")]


def find(a: Assignment) -> list[Pair]:
    """Every pair of students of ``a`` that ``copied`` names, from the stored results."""
    return compare(a)[0]


# The course's own answers, compared as one more student: the source's solution cells are public (the repository
# and the package hold them), and one student who pasted them had no classmate to be paired with.
REFERENCE = "(the course's reference answers)"
_SOLUTION_MARKS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)


def reference(a: Assignment, everyones: Given) -> Written:
    """The written cells of the source notebook's solutions, as a student who pasted them wrote them."""
    found: Written = {}
    for cell in _cells(a.master) or []:
        gid = grade_id(cell)
        if gid and is_solution(cell):
            text = _SOLUTION_MARKS.sub("", _text(cell.get("source")))
            digest, n = normalised(text)
            if n >= MIN_CELL_TOKENS and digest not in everyones.digests:
                found.setdefault(digest, (n, gid))
    return found


def compare(a: Assignment) -> tuple[list[Pair], list[str]]:
    """``find``'s pairs, and the graded students whose notebook could not be compared: a notebook the check skips in
    silence would be a way to hide from it, so the summary names them. The course's reference answers are compared
    as one more student (``REFERENCE``)."""
    everyones = given(a)
    read: dict[str, Written | None] = {s: written(a, s, everyones) for s in graded(a)}
    read[REFERENCE] = reference(a, everyones)
    unread = sorted(s for s, found in read.items() if found is None and s != REFERENCE)
    work = {s: found for s, found in read.items() if found and len(found) >= MIN_CELLS}
    names = sorted(work)
    pairs = []
    for i, s in enumerate(names):
        mine = work[s]
        for t in names[i + 1:]:
            same = mine.keys() & work[t].keys()
            tokens = sum(mine[d][0] for d in same)
            if copied(len(same), len(mine), len(work[t]), tokens):
                ordered = [d for d in mine if d in same]  # in s's notebook order
                pairs.append(Pair(s, t, len(same), len(mine), len(work[t]), tokens,
                                  tuple(mine[d][1] for d in ordered), tuple(work[t][d][1] for d in ordered)))
    return pairs, unread


def path(a: Assignment) -> Path:
    return a.course_dir / STATE / "copies" / f"{a.name}.csv"


def write(a: Assignment, pairs: list[Pair]) -> Path:
    """The file the staff open: one row per pair (a header alone where none is found), rewritten each run."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student_a", "student_b", "identical_cells", "written_a", "written_b", "identical_tokens", "cells_a",
                "cells_b"])
    for p in pairs:
        w.writerow([p.a, p.b, p.same, p.written_a, p.written_b, p.tokens, "; ".join(p.cells_a), "; ".join(p.cells_b)])
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
    fewest = min(min(p.written_a, p.written_b) for p in group)
    most = max(max(p.written_a, p.written_b) for p in group)
    same = f"{low}" if low == high else f"{low} to {high}"
    of = f"{fewest}" if fewest == most else f"{fewest} to {most}"
    each = "" if len(group) == 1 else ", pair by pair"
    listed = ", ".join(printable(s) for s in names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN
                                                                  else "")
    return f"  {listed} ({same} of {of} written cells identical{each})"


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
        lines.append(f"Copies of {a.name}: {listed} not compared (the graded notebook could not be read, is over "
                     f"{NOTEBOOK_BYTES // 2**20} MiB, or holds over {MAX_CELLS:,} written cells or {MAX_CODE_CHARS:,} "
                     "characters of them: look at it in autograded/)")
    if not pairs:
        return lines
    found = groups(pairs)
    more = f"; {len(found) - SHOWN} more groups there" if len(found) > SHOWN else ""
    return [*lines, f"Possible copies of {a.name} (cells written the same, wherever they stand, but for spacing and "
            "comments; a hint to look at, not a verdict: no grade or feedback was changed; each pair in "
            f"{where}{more}):",
            *(_line(g) for g in found[:SHOWN])]
