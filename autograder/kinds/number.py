"""Number answers: a value in the question's unit, or text with a unit of its own.

Encoded in the kernel as a float or text (``record.encode_scalar``); read by ``numbers.parse_number``.
One diagnosis, ``diagnose``, serves the grader (``targets.Exact``: it knows the reference) and the
self-check (``targets.Printed``: it knows hashes), so both give the same verdict for the same value,
except that the self-check says "at the edge" where its data cannot decide.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any

from .. import equivalence as eq
from .. import record
from ..formula import Invalid
from ..messages import PLAIN, phrase, with_hints
from ..numbers import (
    DIMENSION_WORDS,
    FORMULA_IN,
    UNITS,
    ParsedNumber,
    Tolerance,
    free_symbols,
    parse_number,
    round_figures,
    unit_dimension,
    unit_examples,
    unit_scale,
)
from ..questions import Accept, Number, Slip, hedged
from ..record import course_object
from ..verdict import REFUSED, Status, Verdict, only_passing
from . import targets as tg
from .common import CLOSE_FACTOR, WITHHELD, correct, edge, invalid, partial, wrong

CLOSE = CLOSE_FACTOR  # a number within 25% but outside tolerance is "close"
# Of those, the ones within 5% are what a rounding could explain, and are called so; the others are a slip.
# Asked of the same 25% target, moved (``_near_miss``): the self-check data holds no other.
ROUNDING = 0.05
# "Off by about 10^d": the answer is reference * 10^d, for d other than 0, to within ``CLOSE`` (found by the target
# "decade", within a factor of sqrt(10) of it, then asked of "close"): a ratio of 6 or 24 lies a decade away too, but
# "check the powers of ten" would send the student after a slip they did not make.
MAGNITUDES = tuple(d for d in range(-30, 31) if d)
DECADE = 10**0.5
# The self-check leaves undecided about a 2000th of the accepted interval at each end: an answer with this many
# significant figures is no rounding that one more figure would move out of it.
PRECISE_FIGURES = 7


def _mixes_three(k: Fraction) -> bool:
    """A factor such as 3/16 or 64/3: a 3 beside a power of two of 8 or more."""
    return (abs(k.numerator) % 3 == 0 or k.denominator % 3 == 0) and max(abs(k.numerator), k.denominator) >= 8


# The factors a number is said to be off by: the simple ones (``equivalence.SIMPLE_FACTORS``) but those that mix a 3
# with 8 or more, which no slip of this course makes and which a left-out term hit by chance ("off by a factor of
# 3/16" for an answer without its KV caches), and with 5 and 1/5: 10 bytes of training state per parameter against
# the weights' 2. A number slip's code (``solutions._kit.slip_code``) is read with the same.
NUMBER_FACTORS = tuple(sorted({k for k in eq.SIMPLE_FACTORS if not _mixes_three(k)} | {Fraction(5), Fraction(1, 5)},
                              key=lambda k: (k != -1, max(abs(k.numerator), k.denominator),
                                             abs(k.numerator) * k.denominator, k < 1)))


def tolerance_text(tolerance: Tolerance, reference: float) -> str:
    if tolerance.rtol < 1e-4 and not tolerance.is_range and float(reference).is_integer():
        return Tolerance.exact_count().describe()  # a count a function computes: 61 is not "close" to 56
    return tolerance.describe()


def context(unit: str, tolerance_words: str) -> dict[str, Any]:
    return {"unit": unit or PLAIN, "dimension": DIMENSION_WORDS[UNITS[unit][0]],
            "unit_examples": unit_examples(unit), "tolerance": tolerance_words,
            "expected": "a number (or text with a unit, like '1.5 ms')"}


@lru_cache(maxsize=64)
def time_factors(unit: str) -> tuple[Fraction, ...]:
    """For a question in a time ``unit``, the factors between it and the other time units that are not a power
    of ten (those are simple factors already): a number in hours is 24 times the same time in days, one in
    minutes 1/60 of it in seconds. None where the question's unit is not a time."""
    dimension, scale = UNITS[unit]
    if dimension != "time":
        return ()
    want = Fraction(str(scale))
    ks = {want / Fraction(str(s)) for d, s in UNITS.values() if d == "time"}
    return tuple(sorted((k for k in ks if not _power_of_ten(k)), key=lambda k: max(k.numerator, k.denominator)))


def _power_of_ten(k: Fraction) -> bool:
    return min(k.numerator, k.denominator) == 1 and str(max(k.numerator, k.denominator)).rstrip("0") == "1"


# Numbers a student can type without working anything out: 1, 2, 3 and the powers of two from 1/1024 to 1024 (and,
# a decade away from each, the powers of ten). Where the answer is one of these times a factor the diagnosis names,
# naming that factor to such a guess ("off by a factor of 1/32" to an answer of 1) gives the answer away for no work.
UNWORKED = (1.0, 2.0, 3.0) + tuple(2.0**j for j in range(-10, 11))
# In bytes, the binary sizes are typed with no work too: "1 GiB" is 2**30 B.
BINARY_SIZES = tuple(1024.0**n for n in range(2, 6))


def unworked(unit: str) -> tuple[float, ...]:
    """``UNWORKED``, and in a question in bytes ``BINARY_SIZES``: only there is a binary size one unit's typing."""
    return UNWORKED + BINARY_SIZES if unit == "B" else UNWORKED
# How closely an answer must be a factor times the reference for a factor to be named where the reference is simple:
# to the rounding of 3, 4 or 5 significant figures, the widest that stays clear of every simple number (``pin``).
PIN_WINDOWS = (5e-3, 5e-4, 5e-5)


def mantissa(x: float) -> float:
    """The figures of ``x`` (> 0) as a number in [1, 10): 3.2 for 0.032."""
    return x / 10.0 ** math.floor(math.log10(x))


@lru_cache(maxsize=32)
def simple_mantissas(unit: str) -> tuple[float, ...]:
    """The mantissas of every unworked number times every factor the diagnosis may name for a question in ``unit``,
    sorted, each also ten times over (a mantissa that float rounding left just below 10 is found)."""
    ks = [float(k) for k in (*NUMBER_FACTORS, *time_factors(unit)) if k > 0]
    ms = {mantissa(g * k) for g in unworked(unit) for k in ks}
    return tuple(sorted(ms | {10 * m for m in ms}))


def simple(lo: float, hi: float, unit: str) -> bool:
    """Whether some value in [lo, hi] (a question's accepted values) is simple: an unworked number (``UNWORKED``)
    times a factor the diagnosis names (``NUMBER_FACTORS``, the time units' ``time_factors``) and a power of ten.
    Where one is, an unworked guess may lie a named factor away from an accepted answer, so a factor is said only to an
    answer that carries the reference's figures (``pin``); every other wrong value that is not close (nor a declared
    slip, whose hint is said) reads alike, with no factor, power of ten or direction (``diagnose``, ``WITHHELD``)."""
    if lo <= 0 <= hi:
        return True  # 0 is typed without work
    lo, hi = sorted((abs(lo), abs(hi)))
    if hi / lo >= 10:
        return True
    lo, hi = lo * (1 - 1e-9), hi * (1 + 1e-9)
    a = mantissa(lo)
    ms = simple_mantissas(unit)
    i = bisect.bisect_left(ms, a)
    return i < len(ms) and ms[i] <= a * hi / lo


def pin(reference: float, unit: str) -> float | None:
    """For a simple question, how closely an answer over a factor must match its reference for the factor to be
    named: the widest of ``PIN_WINDOWS`` within which no simple number lies (so an unworked guess is never told a
    factor, while a student whose answer carries the reference's figures is). None where a simple number lies within
    the narrowest: no factor is named at all."""
    if reference == 0:
        return None
    a = mantissa(abs(reference))
    ms = simple_mantissas(unit)
    i = bisect.bisect_left(ms, a)
    distance = min(abs(m / a - 1) for m in ms[max(i - 1, 0):i + 1])
    return next((w for w in PIN_WINDOWS if distance > 2 * w), None)


def factor_code(k: Any, unit: str, unit_given: str | None) -> str:
    """A wrong number that is k times the reference: a unit slip (no unit given, and k a power of 1000 or
    the factor between two time units, where a unit of that size exists: 1000 times an answer in days is no
    answer in any unit) or a plain factor."""
    power = math.log10(abs(float(k)))
    if unit_given is None and unit and k > 0 and (abs(power) >= 3 and power == round(power) and _unit_of(unit, k)
                                                  or k in time_factors(unit)):
        return f"unit:{k}"
    return f"ratio:{k}"


def _unit_of(unit: str, k: Any) -> bool:
    """Whether a unit of the question's kind is 1/k of its unit: the one a number k times the answer is in."""
    dimension, scale = UNITS[unit]
    size = float(scale) / float(k)
    return any(d == dimension and math.isclose(s, size, rel_tol=1e-9) for d, s in UNITS.values())


@dataclass(frozen=True)
class Expected:
    unit: str
    tolerance_words: str
    accepts: tuple[tuple[float, str], ...]
    hints: tuple[str, ...]
    oracle: tg.Printed  # tg.Exact in the grader
    simple: bool = False  # a typed answer that is simple (``simple``): a factor is said only near "pin"
    rounded: bool = False  # a count that is a rounded quotient (``Tolerance.rounded``): off by one may be the rounding
    counts: bool = False  # a range of a few whole numbers ("85 or 86": ``Tolerance.of_counts``)


# A slip's hint reaches 2 significant figures of its value, so a student who rounds the slipped value ("27%" for
# 0.2746) is told it too; never more than half way to the accepted range or to another answer with words of its own,
# nor less than the question's own tolerance.
SLIP_REACH = 0.05
# ... and is told as the cause only within 3 significant figures of it; farther, as one possible cause.
SLIP_CERTAIN = Tolerance.figures(3).rtol


def hint_reach(value: float, lo: float, hi: float, others: list[float], rtol: float) -> float:
    """The relative distance from a slip's value within which its hint is told."""
    if not value or lo <= value <= hi:
        return rtol
    gaps = [min(abs(value - lo), abs(value - hi))] + [abs(value - o) for o in others if o != value]
    return max(rtol, min([SLIP_REACH] + [g / abs(value) / 2 for g in gaps]))


@lru_cache(maxsize=4096)
def expected(tag: str, reference: float, unit: str, tolerance: Tolerance, accept: tuple[Accept, ...] = (),
             slips: tuple[Slip, ...] = (), element: bool = False, typed: bool = False) -> tuple[Expected, tg.Targets]:
    """``element``: one element of an array result, of which there may be thousands: judged right or
    by a simple factor only, which keeps the self-check data small. ``typed``: the answer of a number question,
    which a student may type without any work (a function's outputs are its code's), so where the answer is
    simple (``simple``) a factor is said only to an answer that carries the reference's figures (``pin``)."""
    reference = float(reference)
    hinted = [s for s in slips if s.hint]
    lo, hi = tolerance.bounds(reference)
    # The reference itself and its honest roundings (3 and 4 significant figures), to float noise, are
    # right too, and so is each whole number of a range of counts ("56 or 57"): a range may start at the
    # reference (the book's "at least 167 ms"), and the self-check's bucket at the edge of a range could
    # not tick a value that lies on it.
    # A range's ends are rounded as the reference is (an end that is a computed value, rounded inward by a
    # student, lies within a bucket of that end).
    points = [reference] + [r for r in (round_figures(reference, 3), round_figures(reference, 4))
                            if r != reference and lo <= r <= hi]
    if tolerance.is_range:  # the ends themselves are targets of their own (below)
        points += [r for r in dict.fromkeys(round_figures(x, n) for x in (lo, hi) for n in (3, 4))
                   if lo + 1e-8 * abs(lo) < r < hi - 1e-8 * abs(hi) and r not in points]  # clear of the ends
    if tolerance.of_counts:
        points += [float(k) for k in range(int(lo), int(hi) + 1) if k != reference]
    t: tg.Targets = {"ref": [tg.between(lo, hi)]}
    inside = tg.Exact(tag, t)
    points = [x for x in points if inside.near("ref", 0, x) is not True]  # only those the buckets miss
    t |= {f"at{j}": [tg.around(x, 1e-9) if x else tg.between(0, 0)] for j, x in enumerate(points)}
    if tolerance.is_range:  # the book's own numbers, which a student may type as they are (to float noise)
        t |= {f"at{len(points) + j}": [tg.around(x, 1e-10)] for j, x in enumerate((lo, hi)) if x and x not in points}
    if not element:  # within a bucket of an end but inside: decided by a finer grid there (tg.ends)
        t |= {f"end{j}": [iv] for j, iv in enumerate(tg.ends(t["ref"][0]))}
    if tolerance.is_range:  # a factor slip is a multiple of the reference, not of some value in the range
        t["factor"] = [tg.around(reference, tolerance.rtol) if reference else tg.between(0, 0)]
    if not element:
        # Near a range (the book's vague words) is near either end of it, not near the reference within it.
        near = tg.between(*sorted((lo * (1 - CLOSE), hi * (1 + CLOSE)))) if tolerance.is_range else \
            tg.around(reference, CLOSE)
        t |= {
            "close": [near],
            "decade": [None if reference == 0 else tg.between(*sorted((reference / DECADE, reference * DECADE)))]}
        if not tolerance.is_range:  # whether a rounding explains a near miss, to a 600th of the reference
            t["rounding"] = [tg.around(reference, ROUNDING)]
    for j, a in enumerate(accept):
        t[f"accept{j}"] = [tg.around(float(a.answer), tolerance.rtol)]
    worded = [float(x) for x in [a.answer for a in accept] + [s.answer for s in hinted]]
    for j, s in enumerate(hinted):
        t[f"slip{j}"] = [tg.around(float(s.answer), hint_reach(float(s.answer), lo, hi, worded, tolerance.rtol))]
        t[f"slipc{j}"] = [tg.around(float(s.answer), SLIP_CERTAIN)]
    # A range's factors are of its reference (the target "factor"), within the question's relative tolerance.
    span = (min(lo, reference * (1 - tolerance.rtol)), max(hi, reference * (1 + tolerance.rtol))) \
        if tolerance.is_range else (lo, hi)
    plain = typed and simple(*span, unit)
    window = pin(reference, unit) if plain else None
    if window is not None:
        t["pin"] = [tg.around(reference, window)]
    e = Expected(unit, tolerance_text(tolerance, reference), tuple((a.credit, a.message) for a in accept),
                 tuple(s.told for s in hinted), tg.Exact(tag, t), plain, tolerance.rounded, tolerance.of_counts)
    return e, t


def _right(oracle: tg.Printed | tg.Exact, v: float) -> bool | None:
    """In the accepted range, or the reference itself (None: only an edge is in doubt)."""
    answers = [oracle.accepts(key, [v]) for key in _answer_keys(oracle)]
    return True if True in answers else None if None in answers else False


def _factor(oracle: tg.Printed | tg.Exact, v: float, factors: Sequence[Any] = NUMBER_FACTORS) -> Any:
    """The simplest factor k that makes v/k the reference (within its relative tolerance, also in a
    question with a range), else one that makes v/k right (a value in the range); None if there is none."""
    factor = "factor" if _ranged(oracle) else "ref"
    if _ranged(oracle) and _near_miss(oracle, v):
        return None  # within a rounding of a range's end (0.126 past 0.125): close to it, not 3/2 of its reference
    quotients = [v / x for x in _values_of(factors)]
    j = oracle.first_near(factor, 0, quotients)
    if j is not None:
        return factors[j]
    if _ranged(oracle) and oracle.near("close", 0, v) is True:
        return None  # just outside a range of 10 to 20, 9.9 is close: not "half" of 19.8, a value inside it
    if "close" not in oracle.entries:
        return None  # an array's element (no range, no "close"): the roundings of its reference add no factor
    found = [j for j in (oracle.first_near(key, 0, quotients) for key in _answer_keys(oracle)) if j is not None]
    return factors[min(found)] if found else None


def _values_of(factors: Sequence[Any]) -> tuple[float, ...]:
    """The factors as floats, once per tuple of them (``NUMBER_FACTORS``, a unit's ``time_factors``): a diagnosis
    tries every one of them, and hashing a tuple of fractions to look it up would cost as much as the floats."""
    kept = _FLOATS.get(id(factors))
    if kept is None or kept[0] is not factors:
        kept = _FLOATS[id(factors)] = (factors, tuple(float(k) for k in factors))
    return kept[1]


_FLOATS: dict[int, tuple[Sequence[Any], tuple[float, ...]]] = {}


def _ranged(oracle: tg.Printed | tg.Exact) -> bool:
    """Whether the question accepts a range (only those have a target for factors of the reference alone)."""
    return "factor" in oracle.entries


def _answer_keys(oracle: tg.Printed | tg.Exact) -> list[str]:
    """The targets a right answer lies in: the reference, the range's points and its ends."""
    return [key for key in oracle.entries if key == "ref" or key.startswith("at") or key.startswith("end")]


def _inside(oracle: tg.Printed | tg.Exact, v: float) -> bool:
    """Right by the buckets alone, as both oracles see them: a message must not depend on the grader's exact
    range where the self-check's hashed one cannot tell (a value within a 2000th of the range's end)."""
    return any(oracle.near(key, 0, v) is True for key in _answer_keys(oracle))


def figures(v: float) -> int:
    """Significant figures of ``v`` as a float writes it at shortest: 990 has 2, 7529362.88 has 9."""
    return len(repr(abs(float(v))).split("e")[0].replace(".", "").strip("0"))


def _near_miss(oracle: tg.Printed | tg.Exact, v: float) -> bool:
    """Whether v lies within ``ROUNDING`` of the reference: the ``CLOSE`` target, [0.75, 1.25] times the
    reference, holds both v / a and v / b, with a = 1.05 / 1.25 and b = 0.95 / 0.75 (so v lies in [0.63, 1.05] and
    in [0.95, 1.58] times it). In a question with a range, the target is [0.75 low, 1.25 high], and the same two
    tests ask whether v lies in [0.95 low, 1.05 high]. An edge bucket's doubt counts as no."""
    return _within(oracle, v, ROUNDING, "close", CLOSE)


def _within(oracle: tg.Printed | tg.Exact, v: float, r: float, key: str, width: float) -> bool:
    """Whether v lies within ``r`` (at most ``width``) of the reference, asked of the target ``key``, the reference
    times [1 - width, 1 + width], as ``_near_miss`` asks it (an edge bucket's doubt counts as no)."""
    return all(oracle.near(key, 0, v / ((1 + s * r) / (1 + s * width))) is True for s in (1, -1))


def last_figure(v: float) -> float:
    """The place value of the last significant figure of ``v`` as written at shortest, float noise dropped:
    1 for 70553706496, 1000 for 4000.0, 1e-7 for 2.3e-06 (2.2999999999999996e-06, "2.3 us" read in s)."""
    return 10.0 ** Decimal(f"{abs(float(v)):.15g}").normalize().as_tuple().exponent


def typed_step(p: ParsedNumber, unit: str) -> float:
    """The place value of the last figure the student typed, in the question's ``unit``: a rounding is judged in the
    unit and prefix typed, so "1.2 GiB" (1288490188.8 B) carries 2 figures and its last is worth 0.1 GiB, and "2.3
    ms" in a question in s carries 1e-4 s. A bare number is in the question's unit already."""
    if not p.unit_given or p.value == 0:
        return last_figure(p.value) if p.value else 0.0
    scale = unit_scale(p.unit_given, unit)
    return last_figure(p.value / scale) * scale


def _a_rounding(oracle: tg.Printed | tg.Exact, v: float, step: float | None = None) -> bool:
    """Whether a rounding explains v: rounding (or cutting off) the reference to the figures v carries could give
    it, so v lies within one unit of its last figure (``step``: as typed, ``typed_step``) of the reference (and
    within ``ROUNDING``). An 11-digit whole number 2% off is no rounding: more digits cannot fix it."""
    if not v:
        return False
    return _near_reference(oracle, v, min(ROUNDING, (last_figure(v) if step is None else step) / abs(v)))


def _near_reference(oracle: tg.Printed | tg.Exact, v: float, r: float) -> bool:
    """Whether v lies within ``r`` (at most ``ROUNDING``) of the reference, or of a range's ends."""
    if "rounding" in oracle.entries:  # its buckets are 5 times finer than those of "close"
        return _within(oracle, v, r, "rounding", ROUNDING)
    return _within(oracle, v, r, "close", CLOSE)


def _the_slip(oracle: tg.Printed | tg.Exact, j: int, v: float, step: float) -> bool:
    """Whether v, which a rounding of the reference explains, is declared slip j's value to more figures than it is
    the reference's: written with one more figure, then another (``step``: the place of its last), v stays within
    half a unit of the slip's value before it leaves the reference's (13e9, the size in a model's name, is that
    slip to every figure and 13.0154e9 to 3). Decided only as far as the slip's target resolves (to a sixteenth of
    the hint's reach, ``hint_reach``, read back from the target's width as both oracles hold it); past that the
    reference's rounding comes first."""
    key = f"slip{j}"
    if not oracle.has(key, 0) or oracle.entries[key][0][1] == "0":
        return False
    reach = math.tanh(32 * float(oracle.entries[key][0][0]))  # [s(1 - reach), s(1 + reach)] cut into GRID buckets
    r = step / abs(v) / 2
    for _ in range(6):
        r /= 10
        if r < reach / 16:
            return False
        if r < reach and not _within(oracle, v, r, key, reach):
            return False
        if not _near_reference(oracle, v, r):
            return True
    return False


def _hints(e: Expected, v: float, step: float) -> list[str]:
    """The hints of the declared slips v lies near. A value a rounding of the reference explains is told none of
    them (6.2e11 for 6.2398e11 is an honest rounding, though a slip's 6.185e11 lies nearer), unless it is the slip's
    value to more figures (``_the_slip``): the reference's rounding comes first. A value near a slip's but not its
    3 significant figures is told the hint as one possible cause: 1.174 ms, a wrong bandwidth, lay within 2% of
    the slip that drops the ring's (N-1)/N, and was told to keep that factor, which it had."""
    near = [j for j in range(len(e.hints)) if e.oracle.near(f"slip{j}", 0, v) is True]
    if near and _a_rounding(e.oracle, v, step):
        near = [j for j in near if _the_slip(e.oracle, j, v, step)]
    return [e.hints[j] if e.oracle.near(f"slipc{j}", 0, v) is True else hedged(e.hints[j]) for j in near]


def _whole(e: Expected) -> bool:
    """Whether the question asks for an exact count (a number's ``exact=True``, a function's whole-number output)."""
    return e.tolerance_words == Tolerance.exact_count().describe()


def _close(e: Expected, v: float, hints: list[str], ctx: dict[str, Any], step: float) -> Verdict:
    """A wrong answer within ``CLOSE``: said to be a precision slip ("close") only where a rounding explains it
    (``step``: the place of its last typed figure). Near a range, the words speak of the range (its reference may
    lie far off). An exact count answered by a whole number is never that: off by one is named so (where the count
    starts and ends, floor against round), and any other whole number is "close_count", whether a rounding or a
    wrong term gave it (words for a rounding of a count would tell its digits one by one); a count with a fraction
    within one of it is a value left unrounded. Floor against round is named only where the count is a rounded
    quotient (``Tolerance.rounded``): a count of things counted (tokens accepted) has no rounding to check. The
    diagnosis stays "close" (declared slips name it); only the words differ."""
    if e.counts and float(v).is_integer() and (_inside(e.oracle, v - 1) or _inside(e.oracle, v + 1)):
        key = "off_by_one:rounded" if e.rounded else "off_by_one"  # "85 or 86": counts, as an exact count's
        return Verdict(Status.INCORRECT, 0.0, "close", with_hints(phrase(key, **ctx), hints))
    if _ranged(e.oracle):  # near a range's end, as a rounding of it would be; else only within 25% of the range
        if _near_miss(e.oracle, v):
            return wrong("close", hints, **ctx)
        return Verdict(Status.INCORRECT, 0.0, "close", with_hints(phrase("close_range_far", **ctx), hints))
    if _whole(e):
        if float(v).is_integer():
            key = ("off_by_one:rounded" if e.rounded else "off_by_one") \
                if _inside(e.oracle, v - 1) or _inside(e.oracle, v + 1) else "close_count"
            return Verdict(Status.INCORRECT, 0.0, "close", with_hints(phrase(key, **ctx), hints))
        if _inside(e.oracle, math.floor(v)) or _inside(e.oracle, math.ceil(v)):
            return wrong("close", hints, **ctx)
    elif _a_rounding(e.oracle, v, step):
        return wrong("close", hints, **ctx)
    return Verdict(Status.INCORRECT, 0.0, "close", with_hints(phrase("close_far", **ctx), hints))


# A size written with a prefix of one kind that is right read with the other kind: "4 KB" for 4096 B, "16 GiB"
# for 16e9 B. The decimal prefixes (k and K are both 10^3) and their binary counterparts, by power of 1000.
_DECIMAL_PREFIX = {"k": 1, "K": 1, "M": 2, "G": 3, "T": 4}
_BINARY_PREFIX = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4}
_SIZE_UNIT = re.compile(r"(?P<prefix>[kKMGT]i?)B(?:/s|/sec|ps)?")


def binary_reading(unit_given: str | None) -> tuple[float, dict[str, str]] | None:
    """For a size or bandwidth the student wrote with a prefix, the factor that reads their number with the
    other kind of prefix (1.024 for KB read as KiB, 1/1.073741824 for GiB read as GB) and the words that name
    both; None for anything else (no unit, no prefix, bits)."""
    m = _SIZE_UNIT.fullmatch(unit_given or "")
    if m is None:
        return None
    prefix = m.group("prefix")
    n = _BINARY_PREFIX.get(prefix) or _DECIMAL_PREFIX[prefix]
    decimal = prefix if prefix in _DECIMAL_PREFIX else "KMGT"[n - 1]
    binary = "KMGT"[n - 1] + "i"
    k = 2.0 ** (10 * n) / 10.0 ** (3 * n)
    words = {"decimal": f"{decimal}B", "binary": f"{binary}B", "decimal_power": str(3 * n),
             "binary_power": str(10 * n)}
    return (k if prefix in _DECIMAL_PREFIX else 1 / k), words


# A size or bandwidth written in bits ("141 Gb", "1.2 Tbit/s") whose number is right in bytes: a lower-case b.
_BIT_UNIT = re.compile(r"(?:[kKMGTPEZY]i?|kilo|mega|giga|tera|peta|exa|zetta|yotta|kibi|mebi|gibi|tebi|pebi)?"
                       r"(?:b|bit|bits)(?:/s|/sec|ps| per second)?")


def bits_for_bytes(unit_given: str | None, unit: str) -> bool:
    """Whether the student wrote bits where the question counts bytes: their number, read as bytes, is then the
    one to try (8 times what the unit they wrote says)."""
    return _BIT_UNIT.fullmatch(unit_given or "") is not None and unit_dimension(unit) in ("bytes", "bytes/s")


def diagnose(e: Expected, p: ParsedNumber) -> Verdict:
    """The one diagnosis of a number. Order: right, an accepted alternative, a simple factor (a unit
    slip where it is a power of 1000 and no unit was given), a time in another time unit (hours for days),
    a binary prefix read as a decimal one or the other way round (only where the student wrote one), close,
    a power of ten, anything else."""
    ctx = context(e.unit, e.tolerance_words)
    near, v = e.oracle.near, p.value
    right = _right(e.oracle, v)
    if right is True:
        return correct()
    if only_passing():
        return REFUSED
    if right is None:
        return edge(**ctx, precise=figures(v) >= PRECISE_FIGURES)
    for j, (credit, message) in enumerate(e.accepts):
        if e.oracle.accepts(f"accept{j}", [v]) is True:
            return partial(credit, message)
    step = typed_step(p, e.unit)
    hints = _hints(e, v, step)
    if v != 0:
        k = _factor(e.oracle, v)
        if k is None:  # 24 (hours for days), 1/60 (minutes for seconds): no power of ten
            k = _factor(e.oracle, v, time_factors(e.unit))
        said = {"value": v, "unit_given": p.unit_given or ""}  # whether a factor of 100 may be a percentage
        # Where the question is simple, a factor is said only to an answer that carries the reference's figures: said
        # to an unworked guess, it would be the answer. A factor not said reads as any other wrong value (below).
        if bits_for_bytes(p.unit_given, e.unit) and _inside(e.oracle, v * 8):
            return wrong("unit:bits", hints, **ctx, unit_given=p.unit_given)
        if k is not None and (k == -1 or not e.simple or near("pin", 0, v / float(k)) is True):
            return wrong(factor_code(k, e.unit, p.unit_given), hints, **ctx, **said)
        reading = binary_reading(p.unit_given)
        if reading is not None and _inside(e.oracle, v * reading[0]):
            return wrong("unit:binary", hints, **ctx, **reading[1])
        if near("close", 0, v) is True:
            return _close(e, v, hints, ctx, step)
        # The ratio taken the other way round (a VPU's FLOPs over the MXU's), where no factor or unit explains the
        # answer: said, as a factor is, on a simple question only to an answer whose reciprocal carries the
        # reference's figures.
        if _right(e.oracle, 1 / v) is True and (not e.simple or near("pin", 0, 1 / v) is True):
            return wrong("inverted", hints, **ctx)
        if not e.simple:  # on a simple question, a power of ten's edge would bisect the answer (``WITHHELD``)
            for d in MAGNITUDES:
                if near("decade", 0, v / 10.0**d) is True:
                    if near("close", 0, v / 10.0**d) is True:  # near 10^d times it: 6 times is no power of ten
                        return wrong(f"magnitude:{d:+d}", hints, **ctx, **said)
                    break
    # On a simple question every other wrong value reads alike, in sentence and code: a sentence or code of its own
    # for a factor not said ("withheld") against any other value ("not_equal", "nor a simple multiple of it") would
    # tell in one call whether guess / answer is a named factor, and a few unworked guesses would pin the answer.
    return wrong(WITHHELD if e.simple else "not_equal", hints, **ctx)


def read(answer: Any, unit: str) -> ParsedNumber | Invalid:
    """The grader's reading of a number: ``numbers.parse_number``, as the self-check form (``course.as_number``) and
    a choice's options read it (a number times a unit, ``0.00101*s``, included)."""
    return parse_number(answer, unit)


def check(tag: str, reference: float, unit: str, tolerance: Tolerance, answer: Any,
          accept: Sequence[Accept] = (), slips: Sequence[Slip] = (), element: bool = False,
          typed: bool = False) -> Verdict:
    """The grader's verdict on one number (``typed``: see ``expected``)."""
    e, _ = expected(tag, float(reference), unit, tolerance, tuple(accept), tuple(slips), element, typed)
    p = read(answer, unit)
    if isinstance(p, Invalid):
        return invalid(p, **context(unit, e.tolerance_words))
    return diagnose(e, p)


def encode(fp: dict, answer: Any) -> Any:
    """The record of a number answer (``record.encode_scalar``), except for what its text would misread: a sympy
    formula that reads as no number is recorded by its symbols (``numbers.FORMULA_IN``: 3/C is no unit '/C'), and
    a course object by what it is, with the fix (the setting itself, where the number computed from it is asked)."""
    obj = course_object(answer)
    if obj is not None:
        return {"invalid": "wrong_type", "detail": f"{obj} itself: give the number you computed from it"}
    if free_symbols(answer):
        p = parse_number(answer, fp.get("unit", ""))
        if isinstance(p, Invalid) and p.code == "formula_for_number":
            return {"invalid": "wrong_type", "detail": FORMULA_IN + p.detail}
    return record.encode_scalar("number", answer)


def hint(q: Number) -> str:
    """The power of ten the answer lies in: no more than "off by about 10^3" would tell."""
    if not float(q.reference) > 0:
        return "Reread the linked book section, then check each step of your derivation and its units."
    k = math.floor(math.log10(float(q.reference)))
    unit = f" {q.unit}" if q.unit else ""
    return f"The answer lies between 1e{k} and 1e{k + 1}{unit}."


def judge(q: Number, answer: Any) -> Verdict:
    return check(q.qid, q.reference, q.unit, q.tolerance, answer, q.accept, q.slips, typed=True)


# --- the self-check -------------------------------------------------------------------------------

def fingerprint(tag: str, reference: float, unit: str, tolerance: Tolerance, accept: Sequence[Accept] = (),
                slips: Sequence[Slip] = (), element: bool = False, typed: bool = False) -> dict:
    """The self-check data of one number: its targets' hashes, and whether it is simple (``simple``; said only
    where it is, so that other data stays as it was)."""
    e, t = expected(tag, float(reference), unit, tolerance, tuple(accept), tuple(slips), element, typed)
    return {"unit": unit, "tolerance": e.tolerance_words, "accept": [list(a) for a in e.accepts],
            "hints": list(e.hints), "targets": {key: tg.printed(tag, key, ivs) for key, ivs in t.items()},
            **({"simple": True} if e.simple else {}), **({"rounded": True} if e.rounded else {}),
            **({"counts": True} if e.counts else {})}


def make_print(q: Number) -> dict:
    return fingerprint(q.qid, q.reference, q.unit, q.tolerance, q.accept, q.slips, typed=True)


def from_print(fp: dict, tag: str) -> Expected:
    return Expected(fp["unit"], fp["tolerance"], tuple((c, m) for c, m in fp["accept"]), tuple(fp["hints"]),
                    tg.Printed(tag, fp["targets"]), bool(fp.get("simple")), bool(fp.get("rounded")),
                    bool(fp.get("counts")))


def selfcheck(fp: dict, tag: str, answer: Any) -> Verdict:
    p = read(answer, fp["unit"])
    if isinstance(p, Invalid):
        return invalid(p, **context(fp["unit"], fp["tolerance"]))
    return diagnose(from_print(fp, tag), p)
