"""The result of judging one answer: what the student sees and what the gradebook stores."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    CORRECT = "correct"
    PARTIAL = "partial"
    INCORRECT = "incorrect"
    # The answer could not be read (bad syntax, unknown name, wrong type). It earns nothing but
    # is not a wrong answer: the self-check asks the student to fix it and costs no attempt.
    INVALID = "invalid"


@dataclass(frozen=True)
class Verdict:
    status: Status
    score: float  # fraction of the question's points, in [0, 1]
    diagnosis: str  # machine-readable code, e.g. "ratio:2", "extra_symbol:F", "syntax"
    message: str  # one or two sentences for the student; never contains the reference answer
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.CORRECT

    def to_json(self) -> dict[str, Any]:
        return {"status": str(self.status), "score": self.score, "diagnosis": self.diagnosis,
                "message": self.message, "data": self.data}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Verdict:
        return cls(Status(d["status"]), float(d["score"]), d["diagnosis"], d["message"], d.get("data", {}))


_PASSING_ONLY: ContextVar[bool] = ContextVar("passing_only", default=False)


@contextmanager
def passing_only() -> Iterator[None]:
    """Within it a judge may refuse a wrong answer without saying why (``REFUSED``): for callers that ask only
    whether answers pass, many times over. The grader's draw tries the reference with each input written in, and the
    diagnosis of a wrong array (its order, a factor of each element) cost 20-40 s of one student's draw of Chapter 1's
    attainable FLOP/s; only whether it passed was read. Scores are the same: a function's score is its share of
    passing cases."""
    token = _PASSING_ONLY.set(True)
    try:
        yield
    finally:
        _PASSING_ONLY.reset(token)


def only_passing() -> bool:
    """Whether a caller asked only whether answers pass (``passing_only``)."""
    return _PASSING_ONLY.get()


REFUSED = Verdict(Status.INCORRECT, 0.0, "refused", "")  # a wrong answer whose diagnosis nobody reads
