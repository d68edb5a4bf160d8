"""The grading seed: what function and program answers are judged on is drawn from it, per submission.

The self-check data lists the public test cases of every function question, so a function could replay
a table of their expected outputs; and a program's inputs drawn from a seed in public code could be
computed in advance. Each submission is therefore judged on inputs drawn from a seed its notebook never
sees: an HMAC, under a secret kept in the course directory (which no kernel can read, see jail.py), of
the assignment, the student and the hash of what was submitted. Regrading a submission draws the same
inputs, so it gets the same grade; a changed submission draws new ones, so cases named in its feedback
are no use to the next one.

The grader's judging process draws a function's cases (the records' ``draw``, in ``solutions/``, which
kernels cannot read) and the worker hands them to the kernel in a file named by ``record.DRAWN_ENV``;
when judging, it draws them again from the seed and never reads them back from the kernel.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import STATE

if TYPE_CHECKING:
    from ..questions import Chapter

SECRET = Path(STATE) / "secret"  # inside the course directory, which kernels cannot read
CASES_FILE = ".drawn-cases.json"  # in the kernel's work folder


def secret(course_dir: Path) -> bytes:
    """The course's grading secret, made on first use (readable by its owner only). Made whole or not
    at all: workers that start together all read the same one."""
    path = course_dir / SECRET
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        try:
            os.link(draft, path)  # fails if another process got there first: theirs stands
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_bytes().strip()


def submission_seed(course_dir: Path, assignment: str, student: str, sha: str) -> str:
    """The grading seed of one submission (``sha``: the hash of what was submitted)."""
    message = "\0".join((assignment, student, sha)).encode()
    return hmac.new(secret(course_dir), message, hashlib.sha256).hexdigest()


def drawn_cases(chapter: Chapter, seed: str) -> dict[str, list[dict[str, Any]]]:
    """The test cases of every function question of ``chapter`` (a student's, variants.py) drawn for
    ``seed``, by question id. Called in the judging process (judge.draw_cases), which loads the references
    the judge uses: the course's own solutions where it has them."""
    from ..kinds.function import DrawFailed, drawn_probes
    from ..questions import Function

    cases = {}
    for q in chapter.questions:
        if isinstance(q, Function):
            try:
                cases[q.qid] = drawn_probes(q, seed)
            except DrawFailed:  # that question alone is the grader's fault: judging it raises again (judge.fault)
                continue
    return cases


def write_cases(work: Path, cases: dict[str, list[dict[str, Any]]]) -> Path:
    """The file the kernel reads the drawn cases from (its own work folder, which it may read)."""
    path = work / CASES_FILE
    path.write_text(json.dumps(cases))
    return path

