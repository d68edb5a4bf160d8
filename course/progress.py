"""A learner's progress across sessions: which questions are solved, and how many tries each took.

Every self-check in a notebook records its verdict here, so that a learner who closes the laptop
finds their progress again (``scaling-course progress``), hints stay unlocked, and
``scaling-course selfcheck`` can report on a notebook it just ran. The file is small JSON under the
user's data folder (``SCALING_COURSE_PROGRESS`` overrides the path). Progress is a convenience,
never a grade: nothing is recorded while nbgrader executes a notebook, and a file that cannot be
read or written is ignored rather than allowed to break a self-check.
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


def load() -> dict[str, dict[str, Any]]:
    """Question id -> its record; empty when there is no readable file."""
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    questions = data.get("questions") if isinstance(data, dict) else None
    return questions if isinstance(questions, dict) else {}


# This kernel's own records: hints unlock even where the file cannot be written.
_memory: dict[str, dict[str, Any]] = {}


def get(qid: str) -> dict[str, Any]:
    """The record of one question: the file's when there is one, else this kernel's."""
    return (load() if enabled() else {}).get(qid) or _memory.get(qid) or {}


def record(qid: str, status: str, score: float, message: str = "") -> dict[str, Any]:
    """Add one attempt's verdict; returns the question's updated record (also when not saved)."""
    with _locked():
        questions = load() if enabled() else {}
        entry = dict(questions.get(qid) or _memory.get(qid) or {})
        now = time.strftime("%Y-%m-%dT%H:%M:%S")
        entry["attempts"] = int(entry.get("attempts", 0)) + (status != "invalid")
        entry["wrong"] = int(entry.get("wrong", 0)) + (status in ("incorrect", "partial"))
        entry.update(status=status, score=float(score), last=now, run=os.environ.get(ENV_RUN, ""),
                     message=message[:300])
        if status == "correct":
            entry.setdefault("solved", now)
        _memory[qid] = questions[qid] = entry
        if enabled():
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
