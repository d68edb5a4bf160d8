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
