"""What a grading kernel is given of the chapters' self-check data: what recording an answer needs, nothing that
judges one.

Why: the self-check's data (``course/fingerprints/``) judges any answer it is shown, so a notebook that can read it
at grading time can search for its own answers (a number in about ten tries, a choice in as many as it has options)
and score without deriving anything, the same solver cell for every student. So no grading kernel can read that
folder (``grading.jail.isolation_paths``); each is handed this public part instead, in its own work folder
(``record.CHAPTER_DATA_ENV``): per question its kind, points, prompt, link and setting, and what ``kinds.encode``
reads to record an answer (a number's unit, a choice's options, a function's probes and output kinds, a program's
spec), and per chapter the variant plan that deals a student's values. A self-check asked to judge there says the
grader judges it (``course.answers.verdict``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

# The keys of a question's data that recording an answer (or showing the question) reads.
PUBLIC_KEYS = frozenset({"kind", "points", "prompt", "url", "setting", "unit", "options", "builder", "probes",
                         "program", "symbols"})
# The keys of a chapter's file beside its questions: its name, the answers' names and the plan of its settings.
CHAPTER_KEYS = frozenset({"chapter", "title", "format", "answers", "variants"})


def public_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One question's data (or one variant's changes to it) without what judges an answer: a function's outputs
    keep only their kinds (what its results are recorded as)."""
    out = {k: v for k, v in entry.items() if k in PUBLIC_KEYS}
    if isinstance(entry.get("outputs"), list) and entry["outputs"]:
        out["outputs"] = [[{"kind": o.get("kind")} for o in entry["outputs"][0]]]
    if isinstance(entry.get("variants"), list):
        out["variants"] = [public_entry(v) for v in entry["variants"]]
    return out


def public_chapter(data: Mapping[str, Any]) -> dict[str, Any]:
    """A chapter's self-check file as a grading kernel is given it."""
    out = {k: v for k, v in data.items() if k in CHAPTER_KEYS}
    out["questions"] = {qid: public_entry(e) for qid, e in data["questions"].items()}
    out["public"] = True  # ``course.answers.verdict`` judges nothing with it
    return out


@cache
def _public_files() -> tuple[tuple[str, bytes], ...]:
    """Every released chapter's public part, as file names and bytes (read once per grading process)."""
    folder = resources.files("course") / "fingerprints"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    return tuple((f.name, json.dumps(public_chapter(json.loads(f.read_text())), sort_keys=True).encode())
                 for f in files)


def write_public(folder: Path) -> Path:
    """Writes every chapter's public part into ``folder`` (a kernel's own), for ``record.CHAPTER_DATA_ENV``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in _public_files():
        (folder / name).write_bytes(data)
    return folder
