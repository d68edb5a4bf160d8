"""Per-student variants: an exercise's chip, model and sizes dealt to each student from a public hash.

The book prints every answer, so a class graded on the book's own numbers rewards copying. A group of
questions that share one setting (an exercise's chip and batch, say) declares it as a ``Setting``: its
parameters with their allowed values, the book's first, and the function that builds the group's records
from one choice of values. The references are computed from the values, never typed.

Which values a student gets is ``deal``: a sha256 of (course id, assignment, student id, setting),
public on purpose. The student's kernel, the self-check and the grader compute the same deal from the
same released data, so reopening a notebook, checking an answer and grading it all see one setting; the
grader takes the student id from the submission's folder, never from the notebook. Knowing how the deal
works helps no one: the numbers it deals are the question, not its answer.

Values travel as labels (JSON): a chip or a model by its name, a size, a dtype or a mesh shape as
itself. ``course.setting`` turns them back into the objects of ``course.hardware`` and ``course.models``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .questions import AuthoringError, Number, Question

KINDS = ("chip", "model", "value")
Labels = dict[str, Any]  # parameter -> label of its value
Choice = Mapping[str, Mapping[str, Any]]  # setting name -> its labels; a setting not named takes the book's


def label(kind: str, value: Any) -> Any:
    """The JSON form of one value: a chip or model by name, a tuple (a mesh shape) as a list."""
    if kind in ("chip", "model"):
        return value.name
    return list(value) if isinstance(value, tuple) else value


def _key(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


@dataclass(frozen=True)
class Param:
    """The values one parameter may take, the book's first (what self-study and the book agree on)."""

    values: tuple[Any, ...]
    kind: str = "value"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AuthoringError(f"a parameter's kind is one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.values:
            raise AuthoringError("a parameter needs at least one value (the book's)")
        labels = [_key(label(self.kind, v)) for v in self.values]
        if len(set(labels)) < len(labels):
            raise AuthoringError(f"a parameter lists one value twice: {labels}")

    @property
    def labels(self) -> list[Any]:
        return [label(self.kind, v) for v in self.values]

    def value_of(self, lab: Any) -> Any:
        for v in self.values:
            if _key(label(self.kind, v)) == _key(lab):
                return v
        raise KeyError(f"{lab!r} is not one of the allowed values {self.labels}")


def chips(*values: Any) -> Param:
    """Chips of ``course.hardware`` (their records), the book's first."""
    return Param(tuple(values), "chip")


def models(*values: Any) -> Param:
    """Model configs of ``course.models``, the book's first."""
    return Param(tuple(values), "model")


def values(*values: Any) -> Param:
    """Plain values (sizes, dtypes, mesh shapes as tuples), the book's first."""
    return Param(tuple(values))


@dataclass(frozen=True)
class Setting:
    """What one exercise's questions share, and how their records are built from it.

    ``name`` is what the notebook asks for (``course.setting("ch01-e3")``) and starts with the chapter's
    prefix. ``build(**values)`` returns the group's records for one choice of values; every choice gives
    the same question ids, kinds and points. ``valid(**values)``, if given, keeps the choices that stay a
    sensible question (the same regime as the book's, say); the book's own choice must be one."""

    name: str
    build: Callable[..., Sequence[Question]]
    params: Mapping[str, Param]
    valid: Callable[..., bool] | None = None
    _book: tuple[Question, ...] = field(init=False, repr=False, compare=False)
    _built: dict[tuple, tuple[Question, ...]] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self.params:
            raise AuthoringError(f"setting {self.name}: declare at least one parameter")
        if self.valid is not None and not self.valid(**self.book):
            raise AuthoringError(f"setting {self.name}: the book's own values are not valid")
        object.__setattr__(self, "_book", self.records(self.book))
        if not self._book:
            raise AuthoringError(f"setting {self.name}: build() returned no question")
        for q in self._book:
            if not q.qid.startswith(self.name.split("-", 1)[0] + "-"):
                raise AuthoringError(f"setting {self.name}: {q.qid} belongs to another chapter")

    @property
    def book(self) -> dict[str, Any]:
        return {n: p.values[0] for n, p in self.params.items()}

    @property
    def qids(self) -> tuple[str, ...]:
        return tuple(q.qid for q in self._book)

    def labels(self, values: Mapping[str, Any]) -> Labels:
        return {n: label(p.kind, values[n]) for n, p in self.params.items()}

    def records(self, values: Mapping[str, Any]) -> tuple[Question, ...]:
        """The group's records built for ``values``. A build that raises at some values (a division by a value of
        0, a record refused at a negative one) is the author's mistake, named with the setting and the values."""
        try:
            return tuple(self.build(**values))
        except Exception as e:
            raise AuthoringError(f"setting {self.name}: building its records at {describe(self.labels(values))} "
                                 f"raised {type(e).__name__}: {e}") from None

    def combos(self, allowed: Mapping[str, Sequence[Any]] | None = None) -> list[dict[str, Any]]:
        """Every valid choice of values, in declaration order (the book's first where it is allowed).
        ``allowed``: labels per parameter an instructor keeps (course_config.py); others are dropped."""
        allowed = allowed or {}
        unknown = sorted(set(allowed) - set(self.params))
        if unknown:
            raise KeyError(f"setting {self.name} has no parameter {unknown[0]!r} (it has {', '.join(self.params)})")
        lists = []
        for n, p in self.params.items():
            kept = [p.value_of(lab) for lab in allowed[n]] if n in allowed else list(p.values)
            lists.append([v for v in p.values if any(v is k for k in kept)])
        out = [dict(zip(self.params, vs, strict=True)) for vs in itertools.product(*lists)]
        out = [c for c in out if self.valid is None or self.valid(**c)]
        if not out:
            raise KeyError(f"setting {self.name}: no valid choice of values is left")
        return out

    def book_answers(self, combos: Sequence[Mapping[str, Any]]) -> list[int]:
        """The choices (indices into ``combos``) at which one of the setting's number questions has the answer the
        book prints: the student's values differ from the book's, but not those that question depends on (a
        minimum width that depends on the mesh alone, where only the model changed), so typing the book's answer
        earns its point. Questions whose answer is the book's at every choice are left out: no deal avoids them."""
        book = {q.qid: q for q in self._book if isinstance(q, Number)}
        built = [{q.qid: q for q in self.records(c) if q.qid in book} for c in combos]

        def printed(q: Question) -> bool:
            return q.tolerance.accepts(q.reference, book[q.qid].reference)  # type: ignore[attr-defined]
        varying = {qid for qid in book if not all(printed(qs[qid]) for qs in built)}
        return [i for i, qs in enumerate(built) if any(printed(qs[qid]) for qid in varying)]

    def questions(self, labels: Mapping[str, Any] | None = None) -> tuple[Question, ...]:
        """The group's records for the values named by ``labels`` (None: the book's)."""
        if labels is None:
            return self._book
        if set(labels) != set(self.params):
            raise KeyError(f"setting {self.name}: values for {sorted(labels)}, parameters {sorted(self.params)}")
        key = tuple(_key(labels[n]) for n in self.params)
        if key in self._built:  # records are immutable: a class's notebooks, judged one by one, share them
            return self._built[key]
        chosen = {n: p.value_of(labels[n]) for n, p in self.params.items()}
        if self.valid is not None and not self.valid(**chosen):
            raise KeyError(f"setting {self.name}: {labels} is not a valid choice")
        built = self.records(chosen)
        shape = [(q.qid, q.kind, q.points) for q in built]
        if shape != [(q.qid, q.kind, q.points) for q in self._book]:
            raise AuthoringError(f"setting {self.name}: the values {labels} build other questions "
                                 f"({shape}) than the book's")
        self._built[key] = built
        return built


def vary(name: str, build: Callable[..., Sequence[Question]], *, valid: Callable[..., bool] | None = None,
         **params: Param) -> Setting:
    """``Setting`` with its parameters as keywords: ``vary("ch01-e3", e3, chip=chips(V5E, V5P))``."""
    return Setting(name, build, params, valid)


def settings_block(settings: Sequence[Setting], allowed: Mapping[str, Mapping[str, Sequence[Any]]]) -> dict[str, Any]:
    """What a chapter's released data says of its settings: for each, the book's values, every choice a
    student can be dealt (``allowed``: what the instructor keeps, by setting), its questions, and its
    parameters in declaration order; and the settings' own order (JSON files sort their keys)."""
    known = {s.name for s in settings}
    unknown = sorted(set(allowed) - known)
    if unknown:
        raise KeyError(f"c.ScalingCourse.variant_values names {unknown[0]!r}, which is not a setting here "
                       f"(settings: {', '.join(sorted(known)) or 'none'})")
    out: dict[str, Any] = {}
    for s in settings:
        combos = s.combos(allowed.get(s.name))
        out[s.name] = {"book": s.labels(s.book), "questions": list(s.qids), "combos": [s.labels(c) for c in combos],
                       "params": [[n, p.kind] for n, p in s.params.items()]}
        if at_book := s.book_answers(combos):
            out[s.name]["book_answers"] = at_book
    return {"order": [s.name for s in settings], "settings": out}


def deal(course: str, assignment: str, student: str, setting: str, count: int) -> int:
    """Which of a setting's ``count`` choices a student gets: the same everywhere it is computed. The parts are
    hashed in Unicode's composed form (NFC): ``José`` typed on one machine and the same name decomposed by
    another's file system (a macOS zip writes NFD) are one student, dealt one setting."""
    parts = (unicodedata.normalize("NFC", part) for part in (course, assignment, student, setting))
    digest = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def dealt(data: Mapping[str, Any], student: str | None) -> dict[str, Labels]:
    """A student's labels for every setting of a chapter's released self-check data (``fingerprint``'s
    ``variants`` block): the book's where variants are off or no student is known."""
    block = data.get("variants") or {}
    out = {}
    for name in block.get("order") or []:
        s = block["settings"][name]
        book = student is None or not block.get("enabled")
        labels = s["book"] if book else s["combos"][pick(data, name, student)]  # type: ignore[arg-type]
        out[name] = ordered(s, labels)
    return out


def pick(data: Mapping[str, Any], name: str, student: str) -> int:
    """Which of setting ``name``'s released choices ``student`` is dealt. Never the book's while two others are
    allowed: the book prints the answers at its own values (they stay the values of a notebook that has no
    student, for self-study). With one other, both are dealt, so that classmates do not all share one. Nor, while
    two others are left, a choice at which a question's answer is still the book's (``Setting.book_answers``)."""
    others = dealable(data, name)
    return others[deal(data["variants"]["course"], data["chapter"], student, name, len(others))]


def dealable(data: Mapping[str, Any], name: str) -> list[int]:
    """The released choices of setting ``name`` that ``pick`` deals to some student, in order: every choice but
    the book's while two others are allowed, and of those, while two are left, the ones at which no question's
    answer is still the book's."""
    s = data["variants"]["settings"][name]
    book = ordered(s, s["book"])
    others = [i for i, c in enumerate(s["combos"]) if ordered(s, c) != book]
    if len(others) < 2:
        others = list(range(len(s["combos"])))
    fresh = [i for i in others if i not in s.get("book_answers", ())]  # no question's answer the book's printed one
    return fresh if len(fresh) >= 2 else others


def ordered(released: Mapping[str, Any], labels: Mapping[str, Any]) -> Labels:
    """``labels`` in the order the setting declares its parameters (JSON files sort them by name)."""
    return {n: labels[n] for n, _ in released["params"]}


def describe(labels: Mapping[str, Any]) -> str:
    """``chip = TPU v5p, B = 384``: a setting as feedback and the notebook show it."""
    def text(v: Any) -> str:
        if isinstance(v, list):
            return "x".join(map(text, v))
        return format(v, "g") if isinstance(v, float) else str(v)
    return ", ".join(f"{n} = {text(v)}" for n, v in labels.items())


def diff(book: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """What ``other`` changes in ``book`` (a removed key: None), for small per-variant self-check data."""
    return {k: other.get(k) for k in set(book) | set(other) if _key(book.get(k)) != _key(other.get(k))}


def merge(book: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``book`` with a variant's ``diff`` applied."""
    out = {**book, **changes}
    return {k: v for k, v in out.items() if v is not None}
