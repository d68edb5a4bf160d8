"""The bucket a value falls in decides every diagnosis in both judges, and the self-check's hashes were
written from 30-digit logarithms: the double-precision shortcut must give the 30-digit index for every
value, above all for values at a bucket's boundary, where a double's rounding could move them."""

from __future__ import annotations

import random

import mpmath
import pytest

from autograder.kinds import targets as tg

WIDTHS = (1e-9, 3.1e-7, 4.68e-5, 6.1e-4, 0.0197, 0.347, 2.5)


def _boundaries(g: float, rng: random.Random, n: int) -> list[float]:
    """Floats nearest to e^(i log1p(g)) and their neighbours: the values a double's rounding could misplace."""
    out = []
    with mpmath.workdps(40):
        step = mpmath.log1p(g)
        for _ in range(n):
            i = rng.randint(-int(60 / float(step)), int(60 / float(step)))
            edge = float(mpmath.exp(i * step))
            out += [edge * (1 + k * 2.0**-52) for k in (-3, -2, -1, 0, 1, 2, 3)]
    return out


@pytest.mark.parametrize("g", WIDTHS)
def test_the_fast_index_is_the_exact_one_at_boundaries_and_elsewhere(g):
    rng = random.Random(hash(g) & 0xFFFF)
    values = _boundaries(g, rng, 300)
    values += [rng.uniform(-1, 1) * 10.0 ** rng.uniform(-30, 30) for _ in range(2000)]
    values += [rng.randint(-2**53, 2**53) for _ in range(300)] + [2**53 + 1, -(2**60), 10**30, 7, -1]
    values += [v * k for v in values[:200] for k in (0.5, 2.0, 1 / 3, 1e3)]
    wrong = [(v, tg._bucket(v, g), tg._bucket_exact(v, g)) for v in values
             if tg._bucket(v, g) != tg._bucket_exact(v, g)]
    assert not wrong, wrong[:5]


def test_values_a_double_cannot_place_go_the_exact_way():
    """Zero, infinities, NaN-free huge ints and non-floats keep the 30-digit path's answers."""
    g = 0.0197
    for v in (0, 0.0, -0.0, float("inf"), -float("inf"), 10**400, mpmath.mpf("1e-500"), True):
        assert tg._bucket(v, g) == tg._bucket_exact(v, g), v


@pytest.mark.parametrize("g", (9.8e-13, 3.1e-12, 3.1e-11))
def test_a_narrow_buckets_candidates_hold_the_exact_one(g):
    """An exact count's buckets are a trillionth wide, where a double's index is not the exact one: the few it names
    (``_buckets_around``) must always hold it, at boundaries and elsewhere, or a wrong value could be read as right."""
    rng = random.Random(int(g * 1e15))
    values = _boundaries(g, rng, 100)
    values += [rng.uniform(-1, 1) * 10.0 ** rng.uniform(-30, 30) for _ in range(1500)]
    values += [rng.randint(-2**53, 2**53) for _ in range(200)] + [211, 13015449600, -7, 2.0**-40]
    missed, named = [], 0
    for v in values:
        few = tg._buckets_around(v, g)
        if few is None:
            continue
        named += 1
        sign, index = tg._bucket_exact(v, g)
        if few[0] != sign or not few[1] <= index <= few[2]:
            missed.append((v, few, (sign, index)))
    assert named >= 100 and not missed, (named, missed[:5])


def _located_exactly(iv: tg.Interval) -> tuple[str, int, int, float]:
    """``_locate`` by 30-digit logs alone, as the self-check data of every release was written."""
    shortcut, tg._locate_double = tg._locate_double, lambda _iv: None
    try:
        return tg._locate(iv)
    finally:
        tg._locate_double = shortcut


def _on_a_boundary(g: float, k: int) -> tg.Interval:
    """An interval whose low end lies a hair inside bucket ``k``'s lower edge: where a double's log could round the
    first inside bucket to its neighbour."""
    with mpmath.workdps(40):
        edge = mpmath.power(1 + mpmath.mpf(g), k)
        return tg.Interval(edge / (1 + tg.MARGIN), edge * (1 + mpmath.mpf(g)) ** 64)


def test_an_interval_located_from_doubles_is_located_as_by_30_digits():
    """Every judge of a number builds its buckets from ``_locate``; the doubles' shortcut must give the 30-digit
    result wherever it gives one, at tolerances from exact counts (where it must step aside) to 50%, at a bucket's
    edge, and at a width whose 6-figure rounding is in doubt."""
    rng = random.Random(7)
    intervals = [tg.around(rng.choice((1, -1)) * 10 ** rng.uniform(-20, 20), rtol)
                 for rtol in (1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 0.02, 0.25, 0.5) for _ in range(400)]
    intervals += [tg.between(a, a * (1 + 10 ** rng.uniform(-6, 1)))
                  for a in (10 ** rng.uniform(-15, 15) for _ in range(600))]
    intervals += [e for iv in intervals[:300] for e in tg.ends(iv)]
    intervals += [_on_a_boundary(1.23e-4, k) for k in range(1, 400)]
    intervals += [tg.between(1.0, float(mpmath.exp(64 * 0.000123455 * (1 + d)))) for d in (-1e-13, 0, 1e-13)]
    located = [(iv, tg._locate_double(iv)) for iv in intervals]
    wrong = [(iv, fast, _located_exactly(iv)) for iv, fast in located
             if fast is not None and (_located_exactly(iv)[0], *fast) != _located_exactly(iv)]
    assert not wrong, wrong[:3]
    assert sum(fast is not None for _, fast in located) > len(located) / 2  # the shortcut is taken, not bypassed
    assert tg._locate_double(tg.around(13015449600, 1e-12)) is None  # an exact count's buckets need 30 digits


def _rng_values(rng: random.Random, near: float, n: int) -> list:
    """Values around ``near``: a factor away, on its interval's ends, far off, of both signs, and not floats."""
    out = [near * rng.choice((1, -1, 2, 0.5, 1 + 1e-12, 1 - 1e-12, 3, 1e3)) * (1 + rng.uniform(-0.05, 0.05))
           for _ in range(n)]
    return out + [0.0, -0.0, 1e-320, float("inf"), float("nan"), 7, None, near, -near]


@pytest.mark.parametrize("rtol", (1e-12, 1e-9, 1e-4, 0.02, 0.25))
def test_first_near_is_near_asked_in_turn(rtol):
    """A diagnosis asks ``first_near`` of an answer over each factor; it must name the value ``near`` would, one by
    one, in both oracles: the self-check's hashes and the grader's exact buckets."""
    rng = random.Random(int(rtol * 1e12) + 3)
    for _ in range(40):
        reference = rng.choice((1, -1)) * 10 ** rng.uniform(-12, 15)
        targets = {"ref": [tg.around(reference, rtol)], "zero": [tg.between(0, 0)], "none": [None]}
        printed = tg.Printed("q", {key: tg.printed("q", key, ivs) for key, ivs in targets.items()})
        for oracle in (tg.Exact("q", targets), printed):
            for key in ("ref", "zero", "none", "missing"):
                for _ in range(5):
                    values = _rng_values(rng, reference, 30)
                    rng.shuffle(values)
                    one_by_one = next((j for j, v in enumerate(values) if oracle.near(key, 0, v) is True), None)
                    assert oracle.first_near(key, 0, values) == one_by_one, (key, reference, rtol, values)


def test_membership_of_a_double_is_decided_as_in_30_digits():
    """``Interval.__contains__`` decides credit: its shortcut through the ends rounded to doubles must agree with the
    30-digit comparison, above all for doubles next to an end."""
    rng = random.Random(11)
    intervals = [tg.around(rng.choice((1, -1)) * 10 ** rng.uniform(-300, 300), rtol)
                 for rtol in (1e-15, 1e-9, 0.02) for _ in range(300)]
    intervals += [tg.between(1e-320, 3e-320), tg.Interval(mpmath.mpf("1e-400"), mpmath.mpf("1e400"))]
    wrong = []
    for iv in intervals:
        lo, hi = float(iv.lo), float(iv.hi)
        values = [x * (1 + k * 2.0**-52) for x in (lo, hi) for k in range(-3, 4)] + [lo / 2, hi * 2, (lo + hi) / 2]
        values += [0.0, float("nan"), float("inf"), -float("inf")]
        wrong += [(iv, v) for v in values if (v in iv) != bool(iv.lo <= v <= iv.hi)]
    assert not wrong, wrong[:3]
