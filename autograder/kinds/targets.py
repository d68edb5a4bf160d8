"""Targets: "is this value within the accepted interval around that one?", asked of two oracles.

Every diagnosis of a formula or a number is a sequence of such questions (is the answer the
reference? the reference times 2? within 25% of it?). The self-check holds only hashes, so its
oracle, ``Printed``, hashes the bucket the value falls in: the interval's log-scale width is cut
into ``GRID`` buckets, and only the buckets that lie wholly inside it are recognised as inside;
a value in one of the two partly-inside buckets at the edges gets ``None`` ("cannot tell").

The grader's oracle, ``Exact``, answers every diagnostic question exactly as the self-check does
(from the same buckets), so the two cannot drift apart; only where credit is decided
(``accepts``: right, or an accepted alternative) does it compare with the interval itself. So
whatever the self-check accepts, the grader accepts too: a tick is always a grade.

A printed target holds, for each block of ``GRID`` buckets that it touches, one hash of the block and
which of its buckets are inside or at an edge, so the data stays small, checking a value costs one
hash, and no value is named. Anyone can still search the buckets for a number with
enough tries: the aim is that the answer is not printed, not that it is secret.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import mpmath

SALT = "scaling-course/fingerprint/v2"
GRID = 64  # buckets across an interval: what the self-check cannot decide is at most 1/64 of it at each edge
DIGITS = 30
# A bucket counts as inside only with this much room to spare, so that rounding in log() can never
# move a value that lies outside the interval into an inside bucket.
MARGIN = mpmath.mpf("1e-12")


def digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, (SALT, *parts))).encode()).hexdigest()[:12]


@lru_cache(maxsize=4096, typed=True)  # typed: index True is no 1, as str() tells them apart
def _target_hash(tag: str, key: str, i: int, sign: str) -> Any:
    return hashlib.sha256("|".join(map(str, (SALT, tag, key, i, sign, ""))).encode())


def _block_digest(tag: str, key: str, i: int, sign: str, block: int) -> str:
    """``digest(tag, key, i, sign, block)``, from the hash of all but the block, kept per target: the self-check
    hashes one block for each value it places, often thousands for one answer."""
    h = _target_hash(tag, key, i, sign).copy()
    h.update(str(block).encode())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class Interval:
    """The accepted values, inclusive. An exact zero is ``Interval(0, 0)``."""

    lo: mpmath.mpf
    hi: mpmath.mpf

    @cached_property
    def doubles(self) -> tuple[float, float]:
        """The ends rounded to doubles. A double strictly inside these (or strictly outside) is so of the interval
        too, since rounding keeps order: only a double equal to one of them needs the 30-digit comparison."""
        return float(self.lo), float(self.hi)

    def __contains__(self, v: Any) -> bool:
        if type(v) is float:
            lo, hi = self.doubles
            if lo < v < hi:
                return True
            if v < lo or v > hi:
                return False
        return v is not None and self.lo <= v <= self.hi


def around(value: Any, rtol: float) -> Interval | None:
    """``value * (1 +- rtol)``; None where the reference has no value (not real at that point)."""
    if value is None:
        return None
    with mpmath.workdps(DIGITS):
        v = mpmath.mpf(value)
        a, b = v * (1 - mpmath.mpf(rtol)), v * (1 + mpmath.mpf(rtol))
        return Interval(min(a, b), max(a, b))


def between(lo: float, hi: float) -> Interval:
    return Interval(mpmath.mpf(lo), mpmath.mpf(hi))


def ends(iv: Interval) -> list[Interval]:
    """Two narrow intervals inside ``iv``, at its two ends, each two of its buckets wide (and cut into
    ``GRID`` buckets of its own). A value inside ``iv`` that falls in one of its partly-inside edge
    buckets lies inside one of these, unless it is within 1/32 of a bucket of the end itself: so the
    self-check cannot decide only a 1/2000th of the interval at each end, not a 64th (a range whose end
    lies 0.5% from its reference, closer than one bucket, ticks the reference to any number of figures)."""
    if iv.lo == iv.hi == 0:
        return []
    with mpmath.workdps(DIGITS):
        g = _locate(iv)[3]
        a, b = sorted((abs(iv.lo), abs(iv.hi)))
        w = (1 + mpmath.mpf(g)) ** 2
        out = [(a, min(b, a * w)), (max(a, b / w), b)]
        sign = -1 if iv.hi < 0 else 1
        return [Interval(*sorted((sign * x, sign * y))) for x, y in out]


Targets = dict[str, list[Interval | None]]


def _bucket(v: Any, g: float) -> tuple[str, int]:
    """Sign and index of the log bucket of width ``g`` (relative) that holds ``v``.

    A diagnosis asks this of hundreds of values; in double precision it costs a thousandth of the
    30-digit one. The double's index is used only where it is certain (``_buckets_around`` names one
    bucket), so it is the 30-digit index whenever it is used."""
    few = _buckets_around(v, g)
    if few is not None and few[1] == few[2]:
        return few[0], few[1]
    return _bucket_exact(v, g)


def _buckets_around(v: Any, g: float) -> tuple[str, int, int] | None:
    """Sign and the first and last index of the log buckets of width ``g`` that may hold ``v``, from the double alone
    (one log): one bucket where the quotient lies well inside it (its error is under 1e-15 of its size); where the
    double's index is too large to be trusted (``_LARGEST``: an exact count's buckets are a trillionth wide), the few
    within a few units in the last place, so the bucket is one of these, and a caller that finds them all alike (all
    outside, as nearly every wrong value is) needs no 30-digit log. None where the double cannot say (not a plain
    number, zero, infinite, near a boundary, or too many candidates)."""
    if not ((type(v) is float or type(v) is int and -_EXACT_INT <= v <= _EXACT_INT) and v != 0
            and math.isfinite(v) and g > 0):
        return None
    sign = "-" if v < 0 else "+"
    x = math.log(abs(v)) / math.log1p(g)
    if abs(x) < _LARGEST:
        i = math.floor(x)
        return (sign, i, i) if _SAFE < x - i < 1 - _SAFE else None
    slack = abs(x) * 1e-14  # log, log1p and the division each err by at most an ulp or so: 2e-16 of x apiece
    lo, hi = math.floor(x - slack), math.floor(x + slack)
    return (sign, lo, hi) if hi - lo <= 8 else None


_EXACT_INT = 2**53  # an int that a float holds exactly
_LARGEST = 2.0**40  # indices up to here: the quotient's error stays under 1e-3 of a bucket
_SAFE = 1e-3  # keep off a bucket's boundary by this much of a bucket


def _bucket_exact(v: Any, g: float) -> tuple[str, int]:
    with mpmath.workdps(DIGITS):
        v = mpmath.mpf(v)
        if v == 0:
            return "0", 0
        if not mpmath.isfinite(v):  # a huge answer divided by a small factor
            return "inf", 0
        return ("-" if v < 0 else "+"), int(mpmath.floor(mpmath.log(abs(v)) / mpmath.log1p(g)))


def _locate(iv: Interval) -> tuple[str, int, int, float]:
    """(sign, first inside bucket, number of inside buckets, width) of a non-zero interval."""
    lo, hi = iv.doubles
    if not (lo and hi and (lo < 0) == (hi < 0)):  # doubles that are not zero have the signs of the ends
        if iv.lo < 0 < iv.hi or (iv.lo == 0) != (iv.hi == 0):
            raise ValueError(f"an accepted interval must not contain zero: [{iv.lo}, {iv.hi}]")
        hi = -1.0 if iv.hi < 0 else 1.0
    sign = "-" if hi < 0 else "+"
    fast = _locate_double(iv)
    if fast is not None:
        return sign, *fast
    with mpmath.workdps(DIGITS):
        lo, hi = sorted((abs(iv.lo), abs(iv.hi)))
        g = float(f"{float(mpmath.log(hi / lo) / GRID):.6g}") if hi > lo else 0.0  # short in the data
        if g <= 0:
            raise ValueError("an accepted interval needs a width")
        step = mpmath.log1p(g)
        first = int(mpmath.ceil(mpmath.log(lo * (1 + MARGIN)) / step))
        # bucket i spans [e^(i step), e^((i+1) step))
        last = int(mpmath.floor(mpmath.log(hi * (1 - MARGIN)) / step)) - 1
        return sign, first, max(0, last - first + 1), g


# How far (in units of the quantity) a double's estimate may lie from the 30-digit one, per unit of rounding: the
# estimate is used only where it lies a hundred times that far from any boundary that would change the result.
_DOUBLE_SLACK = 100 * 2.0**-52


def _locate_double(iv: Interval) -> tuple[int, int, float] | None:
    """``_locate``'s (first, number, width) from doubles, or None where a double cannot be sure of them: every
    number judge and every element of an array builds its buckets here, and the 30-digit logs cost a thousand times
    as much. Each result is kept only where the double lies well clear of the boundary that would change it (a
    rounding of the width to 6 figures, a bucket's edge), so it is then the 30-digit result exactly."""
    lo, hi = sorted(abs(x) for x in iv.doubles)
    if not (0 < lo < hi and math.isfinite(hi)):
        return None
    span = math.log(hi / lo)
    err = _DOUBLE_SLACK * (1 + 1 / span)  # relative error of ``span``: the quotient's rounding is absolute in its log
    low, high = f"{span / GRID * (1 - err):.6g}", f"{span / GRID * (1 + err):.6g}"
    if low != high:
        return None
    g = float(low)
    if g <= 0:
        return None
    step = math.log1p(g)
    bounds = []
    for end, nudge, rounding in ((lo, math.log1p(float(MARGIN)), math.ceil), (hi, math.log1p(-float(MARGIN)),
                                                                              math.floor)):
        x = (math.log(end) + nudge) / step
        slack = _DOUBLE_SLACK * (abs(x) + (1 + abs(math.log(end))) / step)
        if abs(x) >= _LARGEST or rounding(x - slack) != rounding(x + slack):
            return None
        bounds.append(rounding(x))
    first, last = bounds[0], bounds[1] - 1
    return first, max(0, last - first + 1), g


def _spans(tag: str, key: str, i: int, sign: str, start: int, stop: int) -> list[list[Any]]:
    """Buckets start..stop-1 as [hash of their block of GRID buckets, first offset, end offset] per block:
    one hash per block keeps the data small and the check to a single hash."""
    out = []
    while start < stop:
        block, offset = divmod(start, GRID)
        end = min(stop - block * GRID, GRID)
        out.append([_block_digest(tag, key, i, sign, block), offset, end])
        start = block * GRID + end
    return out


def printed(tag: str, key: str, targets: list[Interval | None]) -> list[Any]:
    """The self-check data of one list of targets: per target [width, sign, inside spans, edge spans]."""
    out: list[Any] = []
    for i, iv in enumerate(targets):
        if iv is None:
            out.append(None)
        elif iv.lo == 0 and iv.hi == 0:
            out.append([0.0, "0", [], []])
        else:
            sign, first, n, g = _locate(iv)
            edges = _spans(tag, key, i, sign, first - 1, first) + _spans(tag, key, i, sign, first + n, first + n + 1)
            out.append([g, sign, _spans(tag, key, i, sign, first, first + n), edges])
    return out


def _in(spans: list[list[Any]], h: str, offset: int) -> bool:
    return any(s[0] == h and s[1] <= offset < s[2] for s in spans)


class _Oracle:
    """What both oracles share: targets by key, one entry per index, whose first two fields are the
    bucket width and the sign; ``_place`` says whether bucket ``b`` is inside, at an edge or out."""

    def __init__(self, tag: str, entries: dict[str, list[Any]]):
        self.tag, self.entries = tag, entries

    def has(self, key: str, i: int) -> bool:
        return self._entry(key, i) is not None

    def _entry(self, key: str, i: int) -> list[Any] | None:
        entries = self.entries.get(key)
        return entries[i] if entries is not None and i < len(entries) else None

    def near(self, key: str, i: int, v: Any) -> bool | None:
        entry = self._entry(key, i)
        if entry is None or v is None:
            return False
        g, sign = entry[0], entry[1]
        if sign == "0":  # an exact zero
            return v == 0
        few = _buckets_around(v, g)  # one log: this runs millions of times in a class's diagnoses
        if few is not None:
            got, lo, hi = few
            if got != sign:
                return False
            if lo == hi:
                return self._place(key, i, entry, lo)
            places = {self._place(key, i, entry, b) for b in range(lo, hi + 1)}
            if len(places) == 1:
                return places.pop()
        got, b = _bucket_exact(v, g)
        return self._place(key, i, entry, b) if got == sign else False

    def first_near(self, key: str, i: int, values: Sequence[Any]) -> int | None:
        """The index of the first of ``values`` that ``near`` calls True, or None. A diagnosis asks this of the
        answer over each of some fifty factors, for every wrong answer of a class: only True counts here, so a value
        that lies in one certain bucket is placed without the test for an edge."""
        entry = self._entry(key, i)
        if entry is None:
            return None
        g, sign = entry[0], entry[1]
        step = 0.0 if sign == "0" else math.log1p(g) if g > 0 else 0.0  # 0.0: each value asks ``near``
        for j, v in enumerate(values):
            # ``_buckets_around``'s one certain bucket, inline: the same double, from the same expression
            if step and type(v) is float and v and math.isfinite(v):
                x = math.log(abs(v)) / step
                b = math.floor(x)
                if abs(x) < _LARGEST and _SAFE < x - b < 1 - _SAFE:
                    if ("-" if v < 0 else "+") == sign and self._inside(key, i, entry, b):
                        return j
                    continue
            if self.near(key, i, v) is True:
                return j
        return None

    def _place(self, key: str, i: int, entry: list[Any], b: int) -> bool | None:
        raise NotImplementedError

    def _inside(self, key: str, i: int, entry: list[Any], b: int) -> bool:
        """``_place(...) is True``, without the test for an edge."""
        raise NotImplementedError


class Printed(_Oracle):
    """The self-check's oracle: it knows hashes of the blocks of buckets inside each interval."""

    def _place(self, key: str, i: int, entry: list[Any], b: int) -> bool | None:
        _, sign, inside, edges = entry
        block, offset = divmod(b, GRID)
        h = _block_digest(self.tag, key, i, sign, block)
        if _in(inside, h, offset):
            return True
        return None if _in(edges, h, offset) else False  # an edge bucket: partly inside, partly outside

    def _inside(self, key: str, i: int, entry: list[Any], b: int) -> bool:
        block, offset = divmod(b, GRID)
        return _in(entry[2], _block_digest(self.tag, key, i, entry[1], block), offset)

    def accepts(self, key: str, values: list[Any]) -> bool | None:
        """Does every value lie in its interval? (None: only the edges are in doubt.)"""
        return all_near(self, key, values) if values and key in self.entries else False


def all_near(oracle: _Oracle, key: str, values: list[Any], only_known: bool = False) -> bool | None:
    """True if every value is near its target, None if the only doubt is at an edge, else False.
    ``only_known``: values whose target is missing (the reference had none there) are passed over."""
    doubt, checked = False, 0
    for i, v in enumerate(values):
        if only_known and not oracle.has(key, i):
            continue
        a = oracle.near(key, i, v)
        if a is False:
            return False
        doubt, checked = doubt or a is None, checked + 1
    return None if doubt else checked > 0


class Exact(_Oracle):
    """The grader's oracle: the self-check's answer to every diagnostic question (the same buckets,
    compared without hashing), and an exact one to "is it right?" (``accepts``)."""

    def __init__(self, tag: str, targets: Targets):
        located = {key: [None if iv is None else (0.0, "0") if iv.lo == iv.hi == 0 else _located(iv) for iv in ivs]
                   for key, ivs in targets.items()}
        super().__init__(tag, located)
        self.targets = targets

    def _place(self, key: str, i: int, entry: list[Any], b: int) -> bool | None:
        _, _, first, n = entry
        if first <= b < first + n:
            return True
        return None if b in (first - 1, first + n) else False

    def _inside(self, key: str, i: int, entry: list[Any], b: int) -> bool:
        return entry[2] <= b < entry[2] + entry[3]

    def accepts(self, key: str, values: list[Any]) -> bool | None:
        ivs = self.targets.get(key)
        return bool(ivs) and len(ivs) == len(values) and all(
            iv is not None and v in iv for iv, v in zip(ivs, values, strict=True))


def _located(iv: Interval) -> tuple[float, str, int, int]:
    sign, first, n, g = _locate(iv)
    return g, sign, first, n
