"""An honest rounding of the answer is told it is one, by both judges, on every number question of every chapter at
every student's values: the reference rounded to 2, 3 or 4 significant figures (either way where what is dropped is
exactly a 5), written bare in the question's unit or in the largest prefix of its unit that leaves a number of 1 or more
("1.2 GiB" for 1.25 GiB, "6.2e11" for 6.2398e11), is right, an accepted alternative, or "close" in words that say a
rounding explains it: never a declared slip's hint as its cause (a slip that lies nearer does not make it that slip;
where the slip is that rounding too, the hint is one possible cause) and never "further off than a rounding
explains". And where a question accepts a range, a value a fifth outside either end is
told something true of the range, not of its reference."""

from __future__ import annotations

import dataclasses
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

import pytest

from autograder.kinds.number import binary_reading
from autograder.messages import phrase
from autograder.numbers import UNITS
from autograder.questions import Number, chapter_names, load_chapter
from autograder.verdict import Status
from tests.chapter_checks import both_judges

# The prefixes a student writes a value of each base unit with, largest first: binary and decimal for sizes and
# bandwidths (a size is as often written in GiB as in GB), decimal for FLOPs and clocks, the SI ones for a time.
_DECIMAL = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_BINARY = tuple((p, 1024.0**n) for n, p in reversed(list(enumerate(("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")))))
_SECONDS = (("", 1.0), ("m", 1e-3), ("u", 1e-6), ("n", 1e-9), ("p", 1e-12))
PREFIXED = {"bytes": [(_BINARY, "B"), (_DECIMAL, "B")], "bytes/s": [(_BINARY, "B/s"), (_DECIMAL, "B/s")],
            "flops": [(_DECIMAL, "FLOPs")], "flops/s": [(_DECIMAL, "FLOP/s")], "frequency": [(_DECIMAL[3:], "Hz")],
            "time": [(_SECONDS, "s")]}
FURTHER = "further off than a rounding explains"


def rounded(x: float, figures: int) -> list[Decimal]:
    """``x`` rounded to ``figures`` significant figures as a student writes it: to nearest, and either way where
    what is dropped is exactly a 5 (1.25 to 2 figures is 1.2 or 1.3)."""
    d = Decimal(repr(abs(x)))
    place = Decimal(1).scaleb(d.adjusted() - figures + 1)
    out = [d.quantize(place, ROUND_HALF_UP)]
    if d - d.quantize(place, ROUND_DOWN) == place / 2:  # a tie: rounded half up or half down
        out.append(d.quantize(place, ROUND_DOWN))
    sign = -1 if x < 0 else 1
    return [sign * r for r in dict.fromkeys(out) if r]


def roundings(q: Number) -> list[object]:
    """The honest roundings of ``q``'s reference: bare numbers in its unit, and texts in a prefixed unit."""
    r = float(q.reference)
    out: list[object] = [f"{x:f}" for n in (2, 3, 4) for x in rounded(r, n)]
    dimension, scale = UNITS[q.unit]
    base = abs(r) * scale
    for prefixes, unit in PREFIXED.get(dimension, []):
        prefix, size = next(((p, s) for p, s in prefixes if base / s >= 1), prefixes[-1])
        if f"{prefix}{unit}" in UNITS:
            out += [f"{x:f} {prefix}{unit}" for n in (2, 3, 4) for x in rounded(r * scale / size, n)]
    return list(dict.fromkeys(out))


def typed(answer: object, q: Number) -> tuple[float, float, float]:
    """The answer in the question's unit, the place of its last figure there (as the student typed it, trailing
    zeros dropped as a float drops them), and how many of the question's unit one of the typed unit is."""
    number, _, unit = str(answer).partition(" ")
    scale = UNITS[unit][1] / UNITS[q.unit][1] if unit else 1.0
    d = Decimal(number).normalize()
    return float(d) * scale, float(Decimal(1).scaleb(d.as_tuple().exponent)) * scale, scale


def told_a_rounding(v, q: Number, answer: object) -> bool:
    """Right, an accepted alternative, at the self-check's edge, "close" in words that a rounding fits, or a prefix
    read as the other kind where the number so read is right ("180 KiB" for 180000 B: 180 KB to every figure)."""
    if v.status in (Status.CORRECT, Status.PARTIAL) or v.diagnosis == "edge":
        return True
    if v.diagnosis == "unit:binary":
        reading = binary_reading(str(answer).partition(" ")[2])
        return reading is not None and q.tolerance.accepts(float(q.reference), typed(answer, q)[0] * reading[0])
    return v.diagnosis == "close" and FURTHER not in v.message


def slips_told(q: Number, v) -> list[str]:
    """The declared slips' hints ``v`` tells as the student's cause, unhedged. A rounding of the reference to fewer
    figures than the question asks may be a slip's value too (13e9 is the size in a model's name, and 13.0154e9 to
    2 figures; 2.8e-4 is 2.7962e-4 and 2.8362e-4 to 2): its hint is then one possible cause, never the cause."""
    return [s.hint for s in q.slips if s.hint and s.hint in v.message
            and dataclasses.replace(s, maybe=True).told not in v.message]


def questions(name: str) -> list[Number]:
    """Every number question of the chapter at the book's values and at every choice of its setting, once each."""
    chapter = load_chapter(name)
    out = {(q.qid, float(q.reference)): q for q in chapter.questions if isinstance(q, Number)}
    for s in chapter.settings:
        for combo in s.combos()[1:]:
            out |= {(q.qid, float(q.reference)): q for q in s.records(combo) if isinstance(q, Number)}
    return list(out.values())


@pytest.mark.parametrize("name", chapter_names())
def test_an_honest_rounding_is_told_so(name):
    bad, checked = [], 0
    for q in questions(name):
        if not q.reference:
            continue
        for answer in roundings(q):
            checked += 1
            for judge, v in zip(("grader", "self-check"), both_judges(q, answer), strict=True):
                said = slips_told(q, v)
                if said or not told_a_rounding(v, q, answer):
                    bad.append(f"{q.qid} (reference {float(q.reference):.6g} {q.unit}): {answer!r}: {judge} says "
                               f"{v.diagnosis}: {v.message}")
    assert checked, f"{name}: no number question"
    assert not bad, f"{len(bad)} honest roundings told otherwise:\n" + "\n".join(bad[:30])


@pytest.mark.parametrize("name", chapter_names())
def test_near_a_range_is_told_of_the_range(name):
    """A value a fifth outside a range's end is within 25% of the range, and perhaps far from its reference: when
    it is called close, the words speak of the range (not "within 25% of the expected value", which may be false)."""
    words = phrase("close_range_far", tolerance="")[:30]
    bad, checked = [], 0
    for q in questions(name):
        if not q.tolerance.is_range:
            continue
        lo, hi = q.tolerance.bounds(float(q.reference))
        for answer in (lo * 0.8, hi * 1.2):
            checked += 1
            for judge, v in zip(("grader", "self-check"), both_judges(q, answer), strict=True):
                if v.diagnosis == "close" and not v.message.startswith(words):
                    bad.append(f"{q.qid} (range {lo:.6g} to {hi:.6g}, reference {float(q.reference):.6g}): "
                               f"{answer:.6g}: {judge} says {v.diagnosis}: {v.message}")
    assert not checked or not bad, f"{len(bad)} values near a range told otherwise:\n" + "\n".join(bad[:30])
