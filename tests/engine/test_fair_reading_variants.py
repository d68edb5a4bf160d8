"""Number readings at every variant, as a fair-reading review found them wanting. Each test runs both
judges the way the real paths call them, at every combination of every exercise setting (and at the book's
values for questions in no setting):

- the grader: ``kinds.judge(q, record through JSON, None, book_q, setting)``, as ``grading.judge.handle`` does;
- the self-check: ``kinds.selfcheck_live(merged print, qid, answer, record, book=(setting, book print))``, as
  ``course.answers.verdict`` does.

Classes pinned here:
1. a range whose end is a computed value accepts that end rounded to 3 significant figures, and a value just
   outside a range is "close", never a factor of the point reference the student did not make;
2. a size written with a decimal prefix that is the answer read with the binary one (GB for GiB, and the other
   way round) is named so (``unit:binary``), without giving the answer;
3. an answer that is the book's and also a declared slip at the student's own values keeps the slip's hint;
4. both judges apply ``at_book`` to the same verdicts ("edge" exists only in the self-check);
5. a slip by a power of 1000 is named a unit slip only where a unit of that size exists.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from autograder import kinds, variants
from autograder.kinds.common import WITHHELD
from autograder.numbers import UNITS, round_figures
from autograder.questions import Question, chapter_names, load_chapter
from autograder.release import released
from autograder.verdict import Verdict
from tests.chapter_checks import printed, recorded

CHAPTERS = chapter_names()


@cache
def _chapter(name: str):
    return load_chapter(name)


def _book_entry(base: dict) -> dict:
    return {k: v for k, v in base.items() if k not in ("setting", "variants")}


class Case:
    """One question at one combination of its setting's values (or at the book's, ``setting`` None)."""

    def __init__(self, chapter: str, q: Question, setting: str | None = None, fp: dict | None = None,
                 book_fp: dict | None = None, index: int = 0, combo: dict | None = None):
        self.chapter, self.q, self.setting, self.index = chapter, q, setting, index
        self.combo = combo or {}  # the setting's values, as released: a combo's index moves when a choice is added
        self.book_q = _chapter(chapter)[q.qid]
        self.fp = printed(q) if fp is None else fp
        self.book_fp = book_fp

    def __repr__(self) -> str:
        return f"{self.q.qid}@{self.setting}[{self.index}]"

    def both(self, answer: Any, book: bool = True) -> tuple[Verdict, Verdict]:
        """The grader's verdict and the self-check's (``book``: with the book's data, as the real paths do)."""
        rec = recorded(self.q, answer)
        travelled = json.loads(json.dumps(rec))
        if self.setting is None or not book:
            return kinds.judge(self.q, travelled), kinds.selfcheck_live(self.fp, self.q.qid, answer, rec)
        graded = kinds.judge(self.q, travelled, None, self.book_q, self.setting)
        checked = kinds.selfcheck_live(self.fp, self.q.qid, answer, rec, book=(self.setting, self.book_fp))
        return graded, checked


def cases(chapter: str, kind: str | None = None) -> Iterator[Case]:
    """Every scalar question of ``chapter`` at every combination of its setting, and once at the book's
    values where it is in no setting."""
    book = _chapter(chapter)
    data = released(chapter)
    in_settings = set()
    for s in book.settings:
        combos = data["variants"]["settings"][s.name]["combos"]
        for i, labels in enumerate(combos):
            for q in s.questions(labels):
                in_settings.add(q.qid)
                if q.kind not in kinds.SCALAR or (kind and q.kind != kind):
                    continue
                base = data["questions"][q.qid]
                be = _book_entry(base)
                yield Case(chapter, q, s.name, variants.merge(be, base["variants"][i]), be, i, labels)
    for q in book.questions:
        if q.qid not in in_settings and q.kind in kinds.SCALAR and (not kind or q.kind == kind):
            yield Case(chapter, q)


def case_at(chapter: str, qid: str, **values: Any) -> Case:
    """The one case of ``qid`` at the setting's ``values``, named by value: a new choice in a setting reorders its
    combos, and a case found by index then silently becomes another student's."""
    found = [c for c in cases(chapter, "number") if c.q.qid == qid and c.combo == values]
    assert len(found) == 1, (qid, values, found)
    return found[0]


def _said(graded: Verdict, checked: Verdict) -> tuple[str, str]:
    return ("correct" if graded.ok else graded.diagnosis), ("correct" if checked.ok else checked.diagnosis)


# --- 1. the ends of a range ---------------------------------------------------------------------------

@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_range_end_rounded_to_3_figures_is_right_at_every_variant(chapter):
    """ch02-q6-total's range ends at the no-overlap sum, a computed value: that sum rounded to 3 figures (0.125
    for 0.124882 s at TPU v6e 4x4) is right, as is the low end's rounding, in both judges."""
    failures = []
    for c in cases(chapter, "number"):
        t = c.q.tolerance
        if not t.is_range or t.of_counts or t.kept_ends:  # kept ends lie half way to a mistake: no one computes them
            continue
        for end in (t.low, t.high):
            v = round_figures(end, 3)
            said = _said(*c.both(v))
            if said != ("correct", "correct"):
                failures.append((repr(c), end, v, said))
    assert not failures, failures[:10]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_value_just_outside_a_range_is_close_not_a_factor(chapter):
    """1% past either end of a range (after its 3-figure rounding) is "close" in both judges: never a factor of
    the point reference (0.126 s at ch02-q6-total, TPU v6e 4x4, was "3/2 times the expected value")."""
    failures = []
    for c in cases(chapter, "number"):
        t = c.q.tolerance
        if not t.is_range or t.of_counts:
            continue
        lo, hi = t.bounds(float(c.q.reference))
        for v in (lo * 0.99, hi * 1.01):
            graded, checked = c.both(v, book=False)
            if not (graded.diagnosis == checked.diagnosis == "close"):
                failures.append((repr(c), v, graded.diagnosis, checked.diagnosis))
    assert not failures, failures[:10]


def test_the_review_s_range_cases():
    """The review's own examples: at the book's values, whose range reaches the no-overlap sum, a sum of 3-figure
    stage answers and that sum rounded. At other values the prompt's pipeline alone is right (a range up to the sum
    held classmates' totals): the rounded no-overlap sum (0.125 s at TPU v6e 4x4) is refused with a hint."""
    chapter = "ch02_tpus"
    want = {(("chip", "TPU v6e"), ("shape", (4, 4))): [(0.125, False)],
            (("chip", "TPU v5e"), ("shape", (4, 4))): [(0.0625 + 0.167 + 0.0195 + 0.0014, True), (0.25, True)]}
    seen = 0
    for c in cases(chapter, "number"):
        if c.q.qid != "ch02-q6-total" or c.setting is None:
            continue
        key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in c.combo.items()))
        for v, right in want.get(key, []):
            seen += 1
            graded, checked = c.both(v)
            if right:
                assert _said(graded, checked) == ("correct", "correct"), (c, v)
            else:
                assert not graded.ok and not checked.ok and "pipeline" in graded.message, (c, v, graded.message)
    assert seen == 3


# --- 2. binary and decimal prefixes ---------------------------------------------------------------------

_PREFIXES = (("k", 1), ("K", 1), ("M", 2), ("G", 3), ("T", 4))


def _prefix_slips(reference: float, unit: str) -> list[tuple[str, str]]:
    """(the answer, the unit written) for the reference read with the wrong kind of prefix: its value in GiB
    written as GB, and its value in GB written as GiB, at the prefixes that give a number from 1 to 10^4."""
    suffix = UNITS[unit][0] == "bytes/s" and "/s" or ""
    out = []
    for p, n in _PREFIXES:
        binary, decimal = reference / 2.0 ** (10 * n), reference / 10.0 ** (3 * n)
        if 1 <= binary < 1e4:
            out.append((f"{binary:.6g} {p}B{suffix}", f"{p}B{suffix}"))
        if 1 <= decimal < 1e4 and p != "k":
            out.append((f"{decimal:.6g} {p.upper()}iB{suffix}", f"{p.upper()}iB{suffix}"))
    return out


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_binary_prefix_read_as_decimal_is_named_so(chapter):
    """4096 B written "4 KB", 16 MiB written "16 MB", 17.2 GB written "17.2 GiB": ``unit:binary`` in both judges,
    with a sentence that says how the two prefixes differ and gives no number of the answer."""
    failures, seen = [], 0
    for c in cases(chapter, "number"):
        if UNITS[c.q.unit][0] not in ("bytes", "bytes/s") or not float(c.q.reference) > 0:
            continue
        for answer, written in _prefix_slips(float(c.q.reference), c.q.unit):
            graded, checked = c.both(answer, book=False)
            if graded.ok:  # a tolerance wide enough for the 2.4% of KiB
                continue
            seen += 1
            ok = graded.diagnosis == checked.diagnosis == "unit:binary" and graded.message == checked.message
            other = written.replace("iB", "B") if "iB" in written else written[:1].upper() + "iB"
            said = graded.message.split(" Hint: ")[0]  # a declared slip's hint may follow, with its own numbers
            numbers = re.sub(r"(?:10|2)\^[0-9]+", "", said)  # the prefixes' powers, and no other number
            if not (ok and written.split("/")[0] in graded.message and other.split("/")[0] in graded.message
                    and not re.search(r"[0-9]", numbers)):
                failures.append((repr(c), answer, graded.diagnosis, checked.diagnosis, graded.message))
    assert not failures, failures[:10]
    if chapter == "ch03_sharding":
        assert seen


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_size_written_in_bits_is_named_so(chapter):
    """141 GB written "141 Gb" reads as 17.6 GB: ``unit:bits`` in both judges, a sentence with no number of the
    answer, and the bits read as bits (an answer right in bits is right)."""
    failures, seen = [], 0
    for c in cases(chapter, "number"):
        dim = UNITS[c.q.unit][0]
        if dim not in ("bytes", "bytes/s") or not float(c.q.reference) > 0:
            continue
        suffix = "/s" if dim == "bytes/s" else ""
        n = max(0, min(8, int(math.log10(float(c.q.reference)) // 3)))
        prefix = ("", "k", "M", "G", "T", "P", "E", "Z", "Y")[n]
        number = float(c.q.reference) / 10.0 ** (3 * n)
        graded, checked = c.both(f"{number!r} {prefix}b{suffix}", book=False)
        if graded.ok:  # a range wide enough for a factor of 8
            continue
        seen += 1
        said = graded.message.split(" Hint: ")[0]
        if not (graded.diagnosis == checked.diagnosis == "unit:bits" and graded.message == checked.message
                and f"'{prefix}b{suffix}'" in said and not re.search(r"[0-9]", said)):
            failures.append((repr(c), number, graded.diagnosis, checked.diagnosis, graded.message))
        assert _said(*c.both(f"{number * 8!r} {prefix}b{suffix}", book=False)) == ("correct", "correct"), c
    assert not failures, failures[:10]
    if chapter == "ch03_sharding":
        assert seen


def test_the_review_s_prefix_cases():
    c = next(c for c in cases("ch03_sharding", "number") if c.q.qid == "ch03-e1-a-bytes" and c.setting
             and float(c.q.reference) == 4096)
    graded, checked = c.both("4 KB")
    assert graded.diagnosis == checked.diagnosis == "unit:binary", (graded.message, checked.message)
    assert "KB is 10^3 bytes" in graded.message and "KiB" in graded.message and "significant" not in graded.message
    assert _said(*c.both("4 KiB")) == ("correct", "correct")


def test_a_bare_number_or_a_unit_without_prefix_is_not_a_prefix_slip():
    """Only a prefix the student wrote can be the wrong kind: a bare 4000 for 4096 B is "close"."""
    c = next(c for c in cases("ch03_sharding", "number") if c.q.qid == "ch03-e1-a-bytes" and c.setting
             and float(c.q.reference) == 4096)
    for answer in (4000, "4000 B", "4000 bytes"):
        graded, checked = c.both(answer)
        assert graded.diagnosis == checked.diagnosis == "close", answer


# --- 3 and 4. the book's answer at other values ------------------------------------------------------------

@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_slip_that_is_also_the_book_s_answer_keeps_its_hint(chapter):
    """ch04-q1-total-params at LLaMA 3-8B: twice the parameters (bf16 bytes) is inside the book's range. The
    answer is the book's, and the slip's hint is still said, in both judges alike."""
    failures, seen = [], 0
    for c in cases(chapter):
        if c.setting is None:
            continue
        for slip in c.q.slips:
            if not slip.hint:
                continue
            graded, checked = c.both(slip.answer)
            if graded.diagnosis != "book_value":
                continue
            seen += 1
            if not (slip.hint in graded.message and (checked.diagnosis, checked.message) == (
                    graded.diagnosis, graded.message)):
                failures.append((repr(c), slip.answer, graded.message, checked.diagnosis, checked.message))
    assert not failures, failures[:5]


def test_the_review_s_slip_case():
    c = next(c for c in cases("ch04_transformers", "number") if c.q.qid == "ch04-q1-total-params" and c.setting
             and c.q.reference == 8030126080)
    graded, checked = c.both(2 * 8030126080)
    assert graded.diagnosis == "book_value" and "bf16 bytes" in graded.message
    assert (checked.diagnosis, checked.message) == (graded.diagnosis, graded.message)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_book_s_answer_gets_one_diagnosis_in_both_judges(chapter):
    """The book's reference, and its 3-figure form, typed at every other combination: the self-check's "edge"
    is asked of the book's data as the grader's wrong answers are (ch02-q6-ici at TPU v5e 4x8 with 0.167): it stays
    "edge" (the grader may credit it at the student's values), and says first that it is the book's answer."""
    from autograder.messages import phrase

    failures = []
    for c in cases(chapter):
        if c.setting is None or c.q.kind != "number":
            continue
        r = float(c.book_q.reference)
        for v in {r, round_figures(r, 3)}:
            graded, checked = c.both(v)
            if (graded.ok, graded.diagnosis, graded.message) != (checked.ok, checked.diagnosis, checked.message) \
                    and not (checked.diagnosis == "edge" and (graded.ok or graded.diagnosis == "book_value"
                             and checked.message.startswith(phrase("book_value", setting=c.setting)))):
                failures.append((repr(c), v, graded.diagnosis, checked.diagnosis))
    assert not failures, failures[:10]


# --- 5. a unit slip names a unit that exists ----------------------------------------------------------

@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_slip_by_a_power_of_1000_is_a_unit_only_where_such_a_unit_exists(chapter):
    """1000 times an answer in days is no answer "in units 1000 times smaller than days" (there are none): it is
    named as the factor it is. Where the unit exists (ms for s, kB for B), the slip names that unit."""
    failures = []
    for c in cases(chapter, "number"):
        if c.q.unit not in UNITS or not c.q.unit:
            continue
        dimension, scale = UNITS[c.q.unit]
        declared = [float(s.answer) for s in c.q.slips if isinstance(s.answer, int | float)]
        for k in (1000, 1e-3, 1e6, 1e-6):
            wrong = float(c.q.reference) * k
            if any(math.isclose(wrong, d, rel_tol=1e-6) for d in declared):
                continue  # a declared slip speaks for itself
            exists = any(d == dimension and math.isclose(s, scale / k, rel_tol=1e-9) for d, s in UNITS.values())
            graded, checked = c.both(wrong, book=False)
            said = (graded.diagnosis, checked.diagnosis)
            named = [d.startswith("unit:") for d in said]
            ok = all(named) if exists else not any(named) and "times smaller than" not in graded.message
            ok = ok or said == (WITHHELD, WITHHELD)  # a simple answer's factor is not said (kinds/number.py)
            if not ok or graded.message != checked.message:
                failures.append((repr(c), k, said))
    assert not failures, failures[:10]


# --- 6. a reading of the book's follows the quantity, not the whole setting ---------------------------------------

def _book_printed(chapter: str) -> dict[str, Any]:
    """The book's printed answers of a chapter (``BOOK`` in its solutions module)."""
    import importlib

    return getattr(importlib.import_module(f"solutions.{chapter}"), "BOOK", {})


def _same_reference(c: Case) -> bool:
    return c.setting is not None and c.q.kind == "number" and c.q.unit == c.book_q.unit \
        and math.isclose(float(c.q.reference), float(c.book_q.reference), rel_tol=1e-12)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_reference_that_is_the_book_s_has_the_book_s_bounds(chapter):
    """A student dealt values that do not reach a question (its reference is the book's, to float noise) gets the
    book's tolerance for it: a range that accepts the book's printed value ("about 9 s", 0.3e9, 11 us) is keyed to
    the quantity's own inputs, never to the whole setting (ch07-e5-vocab-params at LLaMA 2-13B with another
    context, ch08-iq6-decode-time at 512 tokens with another context, ch08-iq9-t-ici at batch 64 with Y = 16,
    ch08-iq9-t-math at B / Y = 2). There the book's printed answer, where the book's record accepts it, is right
    in both judges, and never "the answer at the book's values"."""
    printed_answers = _book_printed(chapter)
    failures = []
    for c in cases(chapter, "number"):
        if not _same_reference(c):
            continue
        r = float(c.q.reference)
        if c.q.tolerance.bounds(r) != c.book_q.tolerance.bounds(float(c.book_q.reference)):
            failures.append((repr(c), "bounds", c.q.tolerance, c.book_q.tolerance))
        book = printed_answers.get(c.q.qid)
        if book is not None and c.book_q.tolerance.accepts(float(c.book_q.reference), float(book)):
            said = _said(*c.both(book))
            if said != ("correct", "correct"):
                failures.append((repr(c), book, said))
    assert not failures, failures[:10]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_book_value_is_never_said_where_the_reference_is_the_book_s(chapter):
    """"That is the answer at the book's values; your setting uses other values" is false by construction where
    the student's reference is the book's: around the book's range ends and its printed answer, neither judge
    says it there."""
    printed_answers = _book_printed(chapter)
    failures = []
    for c in cases(chapter, "number"):
        if not _same_reference(c):
            continue
        lo, hi = c.book_q.tolerance.bounds(float(c.book_q.reference))
        answers = [x * (1 + e) for x in (lo, hi) for e in (0, 1e-7, -1e-7, 1e-3, -1e-3)]
        if c.q.qid in printed_answers:
            answers.append(printed_answers[c.q.qid])
        for a in answers:
            graded, checked = c.both(a)
            if "book_value" in (graded.diagnosis, checked.diagnosis):
                failures.append((repr(c), a, _said(graded, checked)))
    assert not failures, failures[:10]


def test_the_review_s_book_readings_at_other_values():
    """The review's five (question, combo) pairs: the book's printed answer, refused with "book_value" before."""
    for chapter, qid, values, answer in (
            ("ch07_inference", "ch07-e5-vocab-params", {"context": 2048, "model": "LLaMA 2-13B"}, 3e8),
            ("ch08_applied_inference", "ch08-iq6-decode-time", {"context": 4096, "decode": 512}, "9 s"),
            ("ch08_applied_inference", "ch08-iq6-decode-time", {"context": 16384, "decode": 512}, "9 s"),
            ("ch08_applied_inference", "ch08-iq9-t-ici", {"B": 64, "Y": 16}, "11 us"),
            ("ch08_applied_inference", "ch08-iq9-t-math", {"B": 32, "Y": 16}, "4 us")):
        c = case_at(chapter, qid, **values)
        assert float(c.q.reference) == float(c.book_q.reference), c
        assert _said(*c.both(answer)) == ("correct", "correct"), (c, answer)


# --- 7. the self-check's "edge" stays an edge --------------------------------------------------------------

EDGE_SCANNED = ("ch07_inference", "ch08_applied_inference", "ch11_capstone", "ch12_gpus")
_NEAR_END = (0, 1e-7, -1e-7, 1e-6, -1e-6)  # the self-check's edge: a 2000th of the interval at most


def test_the_review_s_edges_are_not_called_the_book_s_answer():
    """ch07-e5-vocab-params at its exact low end and ch08-iq9-t-math within a hair of its own: the grader credits
    both; the self-check cannot tell on which side of its edge they lie, and says so ("edge"), not "that is the
    answer at the book's values"."""
    for chapter, qid, values, answer in (
            ("ch07_inference", "ch07-e5-vocab-params", {"context": 2048, "model": "LLaMA 2-13B"}, 324403200),
            ("ch08_applied_inference", "ch08-iq9-t-math", {"B": 32, "Y": 16}, 4.912232583147209e-06)):
        c = case_at(chapter, qid, **values)
        graded, checked = c.both(answer)
        assert graded.ok, (c, graded.diagnosis)
        assert checked.ok or checked.diagnosis == "edge", (c, checked.diagnosis, checked.message)


def test_edge_keeps_its_own_verdict_in_at_book():
    """``at_book`` re-labels only verdicts both judges reach alike: the self-check's "edge" is its own state. It
    stays "edge", and says it cannot tell at the student's values after saying the answer is the book's."""
    from autograder.kinds.common import edge
    from autograder.kinds.number import context

    v = edge(**context("s", "±2%"), precise=True)
    said = kinds.at_book(v, "number", "ch08-iq9", lambda: True)
    assert said.diagnosis == "edge" and not said.ok
    assert v.message in said.message and "book's values" in said.message


@pytest.mark.parametrize("chapter", EDGE_SCANNED)
def test_no_answer_the_grader_credits_is_called_the_book_s_by_the_self_check(chapter):
    """Each end of the student's range, moved by up to 1e-6 of itself (where the self-check's edge buckets lie), at
    every combo: where the grader credits the answer, the self-check ticks it or says it cannot tell (edge), never
    "book_value"."""
    failures = []
    for c in cases(chapter, "number"):
        if c.setting is None:
            continue
        for end in c.q.tolerance.bounds(float(c.q.reference)):
            for e in _NEAR_END:
                graded, checked = c.both(end * (1 + e))
                if graded.ok and checked.diagnosis == "book_value":
                    failures.append((repr(c), end * (1 + e)))
    assert not failures, failures[:10]
