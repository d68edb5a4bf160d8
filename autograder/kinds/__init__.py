"""One module per answer kind, and the one table that chooses between them.

Each kind module holds, in one place, how its answers are judged against the reference by the grader
(``judge``), how the self-check data is made at release (``make_print``) and how the self-check
judges against that data (``selfcheck``). Where both judges diagnose, they share one ``diagnose``
that asks its questions of an oracle: exact in the grader, from hashes in the self-check.

A kind's module is imported the first time the table is asked for it: a kernel that checks a number
never loads the program kind (and JAX's export machinery) or the function kind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any

from ..bounds import TooExpensive, bounded
from ..messages import phrase
from ..questions import Question
from ..verdict import Status, Verdict
from .common import too_expensive


class _Kinds(Mapping[str, ModuleType]):
    """Kind name -> its module, imported on first use."""

    NAMES = ("formula", "number", "choice", "function", "program")

    def __getitem__(self, name: str) -> ModuleType:
        if name not in self.NAMES:
            raise KeyError(name)
        return import_module(f"{__name__}.{name}")

    def __iter__(self) -> Iterator[str]:
        return iter(self.NAMES)

    def __len__(self) -> int:
        return len(self.NAMES)


KINDS: Mapping[str, ModuleType] = _Kinds()
# Kinds judged on inputs drawn at grading time from the submission's seed, never on public ones.
DRAWN = {"function", "program"}


def judge(q: Question, answer: Any, seed: str | None = None) -> Verdict:
    """The grader's verdict on one recorded answer. ``seed``: the submission's grading seed, from which
    the inputs of function and program answers are drawn (None: a function's public test cases)."""
    if q.kind in DRAWN:
        return KINDS[q.kind].judge(q, answer, seed)
    return KINDS[q.kind].judge(q, answer)


def hint(q: Question) -> str:
    """What a first wrong attempt unlocks: the author's hint, or one derived from the record that tells
    no more than the diagnoses of later wrong attempts would."""
    return q.hint or KINDS[q.kind].hint(q)


def make_print(q: Question) -> dict[str, Any]:
    """The self-check data of one question (no answer in plain text)."""
    base = {"kind": q.kind, "points": q.points, "prompt": q.prompt, "url": q.url, "hint": hint(q)}
    return base | KINDS[q.kind].make_print(q)


def encode(fp: dict[str, Any], answer: Any, drawn: list[dict[str, Any]] | None = None) -> Any:
    """The answer as data, as the kernel records it for the grader. ``drawn``: at grading time, the
    test cases the grader drew for this submission, on which a function answer is called instead."""
    if drawn is not None and fp["kind"] == "function":
        return KINDS["function"].encode_drawn(fp, answer, drawn)
    return KINDS[fp["kind"]].encode(fp, answer)


def selfcheck(fp: dict[str, Any], qid: str, recorded: Any) -> Verdict:
    """The self-check's verdict on a recorded answer, from the question's self-check data, judged under
    the grader's bound on one answer (``autograder.bounds``): past it, the answer is "too expensive" here
    as it would be in the grade."""
    kind = KINDS.get(fp.get("kind", ""))
    if kind is None or not hasattr(kind, "selfcheck"):
        return Verdict(Status.INVALID, 0.0, "unknown_kind", phrase("unknown_kind", kind=fp.get("kind")))
    try:
        with bounded():
            return kind.selfcheck(fp, qid, recorded)
    except TooExpensive:
        return too_expensive()


_UNRECORDED = object()


def selfcheck_live(fp: dict[str, Any], qid: str, answer: Any, recorded: Any = _UNRECORDED) -> Verdict:
    """The self-check's verdict on the answer as the student's kernel holds it (``recorded``: its record,
    when already made). A kind that must run the live object (a program) says so with its own
    ``selfcheck_live``; the others judge the record."""
    kind = KINDS.get(fp.get("kind", ""))
    live = getattr(kind, "selfcheck_live", None)
    if live is not None:
        return live(fp, qid, answer)
    if recorded is _UNRECORDED:
        recorded = encode(fp, answer) if kind else answer
    return selfcheck(fp, qid, recorded)


def __getattr__(name: str) -> ModuleType:
    """``kinds.formula`` and the like: the kind's module, imported on first use as ``KINDS`` does."""
    if name in _Kinds.NAMES:
        return KINDS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
