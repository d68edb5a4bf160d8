"""Helpers for the chapter tests: a question's self-check data, what a notebook records for an answer,
and a program question's inputs and collectives as the inspector sees them.

``tests/chapters/test_every_chapter.py`` runs the checks common to every chapter; each
``tests/chapters/test_chNN.py`` holds what is particular to its chapter.
"""

from __future__ import annotations

from typing import Any

from autograder import fingerprint, kinds
from autograder.questions import Chapter, Function, Program, Question

_PRINTS: dict[tuple[str, int], tuple[Question, dict]] = {}


def printed(q: Question) -> dict:
    """The question's self-check data, made once per question object. The cache holds the question too:
    the records of a setting's choices are built and dropped, and a dropped object's id may be reused."""
    key = (q.qid, id(q))
    if key not in _PRINTS or _PRINTS[key][0] is not q:
        _PRINTS[key] = (q, fingerprint.make(q))
    return _PRINTS[key][1]


def recorded(q: Question, answer: Any) -> Any:
    """What ``grade(qid, answer)`` would record for this answer in a student's notebook."""
    return kinds.encode(printed(q), answer)


def both_judges(q: Question, answer: Any) -> tuple[Any, Any]:
    """The grader's verdict (the record through JSON, as it travels) and the self-check's, on one answer."""
    import json

    from autograder.checks import judge

    rec = recorded(q, answer)
    return judge(q, json.loads(json.dumps(rec))), kinds.selfcheck_live(printed(q), q.qid, answer, rec)


def assert_size(chapter: Chapter, least_points: float, programs: tuple[int, int]) -> None:
    """The chapter keeps at least ``least_points`` points, and between ``programs[0]`` and ``programs[1]``
    program questions: each costs one to two seconds to check."""
    assert chapter.total_points >= least_points
    low, high = programs
    assert low <= sum(isinstance(q, Program) for q in chapter.questions) <= high


def reference_answer(q: Question) -> Any:
    return q.solution if isinstance(q, Function | Program) else q.reference


def program_inputs(q: Program, seed: int = 7) -> list:
    """Random operands of the program's shapes, placed on its mesh with its shardings."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    from course.devices import mesh

    rng = np.random.default_rng(seed)
    m = mesh(**dict(q.spec.mesh))
    return [jax.device_put(rng.standard_normal(op.shape).astype(op.dtype), NamedSharding(m, PartitionSpec(*op.spec)))
            for op in q.spec.operands]


def inspected(q: Program) -> list[str]:
    """The collectives of the question's model solution, as the inspector describes them."""
    from course import comms

    return [c.describe() for c in comms.inspect(q.model, *program_inputs(q))]


# Every Number of a chapter (every choice of every setting) as (reference, low, high), computed in a fresh
# interpreter once with the course's constants and once for each combination of a chip's values in
# hw.BOOK_VALUES, each swapped in before the chapter is imported again, so that it reaches every derivation.
_AT_BOOK_VALUES = """
import importlib, itertools, json, sys
from course import hardware as hw
from autograder.questions import Number

def numbers(chapter):
    for name in [m for m in sys.modules if m.split(".")[0] == "solutions"
                 or (m.startswith("course.") and m != "course.hardware")]:
        del sys.modules[name]
    ch = importlib.import_module("solutions." + chapter).CHAPTER
    out = {}
    for s in ch.settings:
        for combo in s.combos():
            key = json.dumps(s.labels(combo), sort_keys=True, default=str)
            out |= {q.qid + " " + key: [q.reference, *q.tolerance.bounds(q.reference)]
                    for q in s.build(**combo) if isinstance(q, Number)}
    out |= {q.qid: [q.reference, *q.tolerance.bounds(q.reference)] for q in ch.questions if isinstance(q, Number)}
    return out

chapter, runs = sys.argv[1], []
ours = numbers(chapter)
for name in sorted({c for c, _ in hw.BOOK_VALUES}):
    chip = hw.by_name(name)
    fields = [f for c, f in hw.BOOK_VALUES if c == name]
    kept = {f: getattr(chip, f) for f in fields}
    for pick in itertools.product(*([kept[f], *hw.BOOK_VALUES[name, f]] for f in fields)):
        if list(pick) == list(kept.values()):
            continue
        for f, v in zip(fields, pick):
            object.__setattr__(chip, f, v)
        try:
            runs.append([f"{name} {dict(zip(fields, pick))}", numbers(chapter)])
        finally:
            for f, v in kept.items():
                object.__setattr__(chip, f, v)
print(json.dumps([ours, runs]))
"""


def outside_at_book_values(chapter: str) -> list[str]:
    """The number questions of ``chapter`` (every choice of every setting) whose answer, computed with the book's
    own rounded constants (``hw.BOOK_VALUES``, in every combination) in place of the course's, falls outside
    their tolerance: one line each, "qid {setting's labels} at chip {constants}: +x.xx%"."""
    import json
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _AT_BOOK_VALUES, chapter], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, f"{chapter} at the book's values: {done.stderr.strip().splitlines()[-1:]}"
    ours, runs = json.loads(done.stdout)
    return [f"{key} at {swap}: {value / ours[key][0] - 1:+.2%}" for swap, theirs in runs
            for key, (value, *_) in theirs.items() if key in ours and not ours[key][1] <= value <= ours[key][2]]
