"""One module per answer kind, and the one table that chooses between them.

Each kind module holds, in one place, how its answers are judged against the reference by the grader
(``judge``), how the self-check data is made at release (``make_print``) and how the self-check
judges against that data (``selfcheck``). Where both judges diagnose, they share one ``diagnose``
that asks its questions of an oracle: exact in the grader, from hashes in the self-check.

A kind's module is imported the first time the table is asked for it: a kernel that checks a number
never loads the program kind (and JAX's export machinery) or the function kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any

from ..bounds import TooExpensive, bounded
from ..messages import frame, phrase
from ..questions import Question
from ..record import canonical, encode_scalar
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
# Kinds whose answer is a value the book prints: a student dealt other values may type the book's.
SCALAR = ("number", "choice", "formula")


# Diagnoses at the student's own values with evidence as good as the book's answer: a simple factor (ratio:2,
# unit:1000, unit:binary). Said after the book's sentence, as a declared slip's hint is.
_OWN_CAUSES = ("ratio", "unit")


def at_book(v: Verdict, kind: str, setting: str | None, right_at_book: Callable[[], bool]) -> Verdict:
    """The verdict on an answer to a question of exercise ``setting`` (variants.py) at values other than the
    book's: a wrong answer that is right at the book's values is told so first ("close" or "not equal" alone
    would send the student after an error they did not make). Where the answer is also a declared slip at the
    student's own values (its hint) or a simple factor of their answer, that is said after it: both causes fit.
    Both judges ask ``right_at_book`` of the book's self-check data, so they agree on every verdict both can
    reach. The self-check's "edge" is its own (the grader never says it: there the answer is right, or wrong and
    asked the same): it stays "edge", since the grader may credit the answer at the student's own values and
    calling a credited answer the book's would be false; its message says both: the answer is the book's, and
    at the student's own values the self-check cannot tell. An answer right or partly right at the student's
    values keeps its verdict."""
    if setting and kind in SCALAR and v.status is Status.INCORRECT and right_at_book():
        said = phrase("book_value", setting=setting)
        if v.diagnosis == "edge":
            return Verdict(Status.INCORRECT, 0.0, "edge", frame("book_value+own", said, own=v.message))
        if "Hint:" in v.message or v.diagnosis.partition(":")[0] in _OWN_CAUSES:
            said = frame("book_value+own", said, own=v.message)
        return Verdict(Status.INCORRECT, 0.0, "book_value", said)
    return v


_BOOK_PRINTS: dict[str, tuple[Question, dict[str, Any]]] = {}


def _book_print(book: Question) -> dict[str, Any]:
    """The book's self-check data of a question, made once per record (the grader's judging process keeps
    the book's chapter loaded)."""
    held = _BOOK_PRINTS.get(book.qid)
    if held is None or held[0] is not book:
        held = _BOOK_PRINTS[book.qid] = (book, make_print(book))
    return held[1]


def judge(q: Question, answer: Any, seed: str | None = None, book: Question | None = None,
          setting: str | None = None) -> Verdict:
    """The grader's verdict on one recorded answer. ``seed``: the submission's grading seed, from which
    the inputs of function and program answers and a formula's unseen points are drawn (None: a function's
    public test cases, a formula's fixed unseen points).
    ``book``: the question's record at the book's values, where ``q`` is built by exercise ``setting`` for
    the student's own (``at_book``). Text is read in ``record.canonical`` form, as the self-check reads it."""
    answer = canonical(q.kind, answer)
    if q.kind in DRAWN:
        return KINDS[q.kind].judge(q, answer, seed)
    # A formula is also compared at points drawn from the seed, which no student can read (kinds/formula.py).
    v = KINDS[q.kind].judge(q, answer, seed) if q.kind == "formula" else KINDS[q.kind].judge(q, answer)
    if book is None or book == q:
        return v
    return at_book(v, q.kind, setting, lambda: KINDS[q.kind].selfcheck(_book_print(book), q.qid, answer).ok)


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


def selfcheck(fp: dict[str, Any], qid: str, recorded: Any, book: tuple[str, dict[str, Any]] | None = None) -> Verdict:
    """The self-check's verdict on a recorded answer, from the question's self-check data, judged under
    the grader's bound on one answer (``autograder.bounds``): past it, the answer is "too expensive" here
    as it would be in the grade. ``book``: (the exercise setting, the question's self-check data at the
    book's values), where ``fp`` is the data of a student's other values (``at_book``). Text is read in
    ``record.canonical`` form, as the grader reads it."""
    kind = KINDS.get(fp.get("kind", ""))
    recorded = canonical(fp.get("kind", ""), recorded)
    if kind is None or not hasattr(kind, "selfcheck"):
        return Verdict(Status.INVALID, 0.0, "unknown_kind", phrase("unknown_kind", kind=fp.get("kind")))
    try:
        with bounded():
            v = kind.selfcheck(fp, qid, recorded)
            if book is None:
                return v
            setting, book_fp = book
            return at_book(v, fp["kind"], setting, lambda: kind.selfcheck(book_fp, qid, recorded).ok)
    except TooExpensive:
        return too_expensive()
    except Exception as e:  # the reference passes this same path (a release test): the answer is at fault
        return unjudgeable(e)


def unjudgeable(e: Exception) -> Verdict:
    """The verdict on an answer whose judging raised where the reference's does not: the student's to rewrite,
    not the grader's to be flagged for (``grading.judge.fault``)."""
    return Verdict(Status.INVALID, 0.0, "unjudgeable", phrase("unjudgeable", error=type(e).__name__))


def reference_record(q: Question) -> Any:
    """The reference as a student's answer is recorded, for a kind whose answer is one value (else None)."""
    return encode_scalar(q.kind, q.reference) if q.kind in SCALAR else None


_UNRECORDED = object()


def selfcheck_live(fp: dict[str, Any], qid: str, answer: Any, recorded: Any = _UNRECORDED,
                   book: tuple[str, dict[str, Any]] | None = None) -> Verdict:
    """The self-check's verdict on the answer as the student's kernel holds it (``recorded``: its record,
    when already made; ``book``: as ``selfcheck`` takes it). A kind that must run the live object (a
    program) says so with its own ``selfcheck_live``; the others judge the record."""
    kind = KINDS.get(fp.get("kind", ""))
    live = getattr(kind, "selfcheck_live", None)
    if live is not None:
        return live(fp, qid, answer)
    if recorded is _UNRECORDED:
        recorded = encode(fp, answer) if kind else answer
    return selfcheck(fp, qid, recorded, book)


def __getattr__(name: str) -> ModuleType:
    """``kinds.formula`` and the like: the kind's module, imported on first use as ``KINDS`` does."""
    if name in _Kinds.NAMES:
        return KINDS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
