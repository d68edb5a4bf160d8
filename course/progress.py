"""A learner's progress across sessions: which questions are solved, and how many tries each took.

Every self-check in a notebook records its verdict here, so that a learner who closes the laptop
finds their progress again (``scaling-course progress``), hints stay unlocked, and
``scaling-course selfcheck`` can report on a notebook it just ran. The file is small JSON under the
user's data folder (``SCALING_COURSE_PROGRESS`` overrides the path). Progress is a convenience,
never a grade: nothing is recorded while nbgrader executes a notebook, and a file that cannot be
written is ignored rather than allowed to break a self-check. A file that cannot be read (a comma
too many, after an edit by hand) is never written over: the next check moves it aside, keeping its
bytes, says where, and starts a new one; where it cannot be moved, nothing is saved.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENV_PATH = "SCALING_COURSE_PROGRESS"
ENV_RUN = "SCALING_COURSE_RUN"  # set by `scaling-course selfcheck` to tell its run's records apart


def path() -> Path:
    if os.environ.get(ENV_PATH):
        return Path(os.environ[ENV_PATH])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "scaling-course" / "progress.json"


def enabled() -> bool:
    """Off while nbgrader validates or grades: a grading kernel must not write outside its folder."""
    return not os.environ.get("NBGRADER_EXECUTION")


def _read() -> tuple[dict[str, dict[str, Any]], str | None]:
    """The records, and why the file cannot be read (None where it can, or there is none, or it is empty:
    then nothing would be lost by writing it)."""
    try:
        text = path().read_text()
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as e:  # ValueError: bytes that are no UTF-8
        return {}, f"{type(e).__name__}: {e}"
    if not text.strip():
        return {}, None
    try:
        data = json.loads(text)
    except ValueError as e:
        return {}, f"not valid JSON: {e}"
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, dict) or not all(isinstance(v, dict) for v in questions.values()):
        return {}, "not a progress file: no table of questions"
    return questions, None


def load() -> dict[str, dict[str, Any]]:
    """Question id -> its record; empty when there is no readable file."""
    return _read()[0]


def problem() -> str | None:
    """Why the progress file cannot be read, or None where it can (or there is none)."""
    return _read()[1]


# What the last attempt to record found wrong with the file, for the check to say (``take_notice``), and the
# unreadable files that could not be moved aside, already said.
_notices: list[str] = []
_stuck: set[str] = set()


def take_notice() -> str | None:
    """The sentence about an unreadable progress file that the last ``record`` or ``set_aside`` left, once."""
    notice = "\n".join(_notices) or None
    _notices.clear()
    return notice


def set_aside() -> bool:
    """Move an unreadable progress file aside (its bytes kept, under a name that says so) so that a new one can
    be started; ``take_notice`` says where. False where it is unreadable and could not be moved: then nothing may
    be written to it."""
    with _locked():
        return _set_aside()


def _set_aside() -> bool:
    from autograder.messages import phrase

    why = problem()
    if why is None:
        return True
    target = path()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        kept = target.with_name(f"{target.stem}.unreadable-{stamp}{'' if n == 1 else f'-{n}'}{target.suffix}")
        if not kept.exists():
            break
    try:
        os.rename(target, kept)
    except OSError as e:
        if str(target) not in _stuck:  # said once a kernel: every later check would only repeat it
            _stuck.add(str(target))
            _notices.append(phrase("progress:stuck", path=target, why=why, error=f"{type(e).__name__}: {e}"))
        return False
    _notices.append(phrase("progress:moved", path=target, why=why, kept=kept))
    return True


# This kernel's own records: hints unlock even where the file cannot be written.
_memory: dict[str, dict[str, Any]] = {}


def get(qid: str) -> dict[str, Any]:
    """The record of one question: the file's when there is one, else this kernel's."""
    return (load() if enabled() else {}).get(qid) or _memory.get(qid) or {}


def record(qid: str, status: str, score: float, message: str = "") -> dict[str, Any]:
    """Add one attempt's verdict; returns the question's updated record (also when not saved)."""
    with _locked():
        writable = enabled() and _set_aside()  # an unreadable file is moved aside first, never written over
        questions = load() if writable else {}
        entry = dict(questions.get(qid) or _memory.get(qid) or {})
        now = time.strftime("%Y-%m-%dT%H:%M:%S")
        entry["attempts"] = int(entry.get("attempts", 0)) + (status != "invalid")
        entry["wrong"] = int(entry.get("wrong", 0)) + (status in ("incorrect", "partial"))
        entry.update(status=status, score=float(score), last=now, run=os.environ.get(ENV_RUN, ""),
                     message=message[:300])
        if status == "correct":
            entry.setdefault("solved", now)
        _memory[qid] = questions[qid] = entry
        if writable:
            _save(questions)
    return entry


def _save(questions: dict[str, Any]) -> None:
    target = path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": 1, "questions": questions}, indent=1, sort_keys=True))
        os.replace(tmp, target)  # a reader never sees half a file
    except OSError:
        pass


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Two kernels checking at once must not lose each other's attempts."""
    if not enabled():
        yield
        return
    try:
        import fcntl

        path().parent.mkdir(parents=True, exist_ok=True)
        handle = open(path().with_name(".progress.lock"), "w")  # noqa: SIM115
    except (ImportError, OSError):
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def solved(questions: dict[str, dict[str, Any]], qid: str) -> bool:
    return (questions.get(qid) or {}).get("solved") is not None
