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
