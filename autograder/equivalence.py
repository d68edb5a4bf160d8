"""Where formulas are compared: the sample points of the symbols' domains, and exact evaluation there.

Two formulas are compared by their values at points of the domain: positive reals for sizes and
rates, integers >= 2 for counts (so a factor N-1 never vanishes or flips sign). Values are computed
with 50-digit mpmath at exact rational points spread over many orders of magnitude. The points are
chosen so that every branch of every max() and min() of the reference is the active one somewhere:
a slip inside a branch that random points never select would otherwise pass. What counts as "the
same value" is the formula kind's business (autograder/kinds/formula.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import sympy as sp

from .symbols import symbol

DIGITS = 50
N_POINTS = 10
N_SMALL = 4  # points at the bottom of the domain, for formulas with rounded decimals (Domain.small)
CANDIDATES = 20  # points drawn per point kept, to find ones where each branch of a max/min is active
LARGE = 10**8  # at points this many times larger only the leading terms count

# Factors a slip typically introduces: bf16 vs fp32 (2), one vs two directions (2), a device count (8, 32, 64),
# the 2 in 2*B*D*F, units (1000).
NICE_FACTORS = tuple(
    sorted({Fraction(p, q) for p in (1, 2, 3, 4, 8, 16, 32, 64) for q in (1, 2, 3, 4, 8, 16, 32, 64) if p != q}
           | {Fraction(10) ** e for e in range(-12, 13) if e}
           | {Fraction(-1)}))

# The same factors, simplest first (-1, 2, 1/2, 3, 1/3, 3/2, 2/3, 4, ...): where several would fit a
# wide tolerance (a range), the simplest names the slip.
SIMPLE_FACTORS = tuple(sorted(NICE_FACTORS, key=lambda k: (k != -1, max(abs(k.numerator), k.denominator),
                                                           abs(k.numerator) * k.denominator, k < 1)))

Point = dict[str, Fraction]


@dataclass(frozen=True)
class Domain:
    """The symbols a question declares; ``counts`` are integers >= 2, the rest positive reals."""

    names: tuple[str, ...]
    counts: frozenset[str] = frozenset()

    def draw(self, rng: random.Random) -> Point:
        p = {}
        for name in self.names:
            if name in self.counts:
                p[name] = Fraction(max(2, round(2 ** rng.uniform(1, 12))))
            else:
                p[name] = Fraction(max(1, round(2 ** rng.uniform(-4, 16) * 64)), 64)
        return p

    def points(self, n: int, seed: int, cover: sp.Expr | None = None,
               kinds: tuple[type, ...] = (sp.Max, sp.Min), candidates: int = CANDIDATES) -> list[Point]:
        """``n`` points spread over many orders of magnitude; with ``cover``, chosen from ``candidates`` times
        as many so that each argument of each max()/min() in it (each node of ``kinds``; of an abs(), each
        sign of its argument) is the active one at one point at least."""
        rng = random.Random(seed)
        pool = [self.draw(rng) for _ in range(n * (candidates if cover is not None else 1))]
        if cover is None:
            return pool
        found = branches(cover, self.names, kinds)
        if not found:
            return pool[:n]
        chosen: list[int] = []
        seen: set[tuple[int, int]] = set()
        for i, p in enumerate(pool):
            active = _active(found, p)
            if active - seen and len(chosen) < n:
                chosen.append(i)
                seen |= active
        rest = [i for i in range(len(pool)) if i not in chosen]
        return [pool[i] for i in sorted(chosen + rest[:n - len(chosen)])]

    def wide(self, n: int, seed: int) -> list[Point]:
        """``n`` points far beyond ``draw``'s range (sizes 2**-8 to 2**40, counts up to 2**20) and off its grid of
        64ths (each size a multiple of one over a large prime): where a step or a side of a max that an answer adds
        may act that the public points never reach. Only the grader asks there, and only of an answer with one."""
        rng = random.Random(seed)
        points = []
        for _ in range(n):
            p = {}
            for name in self.names:
                if name in self.counts:
                    p[name] = Fraction(max(2, round(2 ** rng.uniform(1, 20))))
                else:
                    q = rng.choice(_OFF_GRID)
                    p[name] = Fraction(max(1, round(2 ** rng.uniform(-8, 40) * q)), q)
            points.append(p)
        return points

    def small(self, n: int, seed: int) -> list[Point]:
        """``n`` points at the bottom of the domain (counts 2 to 4, sizes 1/16 to 1), where a term of
        lower order weighs as much as the leading ones: a rounded formula must agree there too, or a
        missing norm's ``D`` beside ``3*D*F`` would hide inside its 3 significant figures."""
        rng = random.Random(seed)
        return [{name: Fraction(rng.randint(2, 4)) if name in self.counts else Fraction(rng.randint(4, 64), 64)
                 for name in self.names} for _ in range(n)]

    @staticmethod
    def scaled(points: list[Point], names: Sequence[str]) -> list[Point]:
        """The same points with the symbols ``names`` ``LARGE`` times larger."""
        return [{k: v * LARGE if k in names else v for k, v in p.items()} for p in points]


# What may switch between branches: a max() or min() picks one argument, an abs() one sign of its argument.
BRANCHING = (sp.Max, sp.Min, sp.Abs)
STEPS = (sp.floor, sp.ceiling)  # and a floor or a ceiling steps where its argument crosses a whole number
_OFF_GRID = (10007, 65537, 999983)  # primes: no multiple of 1/64 is a multiple of one over them, but whole numbers

Branch = tuple[sp.Expr, list[Callable[[Point], "mpmath.mpf | None"]]]


def branches(expr: sp.Expr, names: Sequence[str], kinds: tuple[type, ...] = BRANCHING) -> list[Branch]:
    """Each node of ``kinds`` in ``expr``, with evaluators of its arguments."""
    return [(node, [evaluator(a, names) for a in node.args])
            for node in sorted(expr.atoms(*kinds), key=sp.default_sort_key)]


def _active(found: list[Branch], p: Point) -> set[tuple[int, int]]:
    """(node, side) of each branch active at ``p``: the argument a max/min picks, the sign under an abs."""
    active = set()
    for b, (node, args) in enumerate(found):
        values = [f(p) for f in args]
        if any(v is None for v in values):
            continue
        if isinstance(node, sp.Abs):
            active.add((b, int(values[0] < 0)))
        else:
            pick = max if isinstance(node, sp.Max) else min
            active.add((b, values.index(pick(values))))
    return active


def unexercised(expr: sp.Expr, names: Sequence[str], points: Sequence[Point]) -> bool:
    """Whether a branch of ``expr`` (an argument of a max/min, a sign under an abs) is the active one at none
    of ``points``, or a floor/ceiling of it never steps there (one value at all of them, or a whole number for an
    argument at every one, so that how it rounds is never seen): there the formula was never tested."""
    if any(_never_steps(node, names, points) for node in expr.atoms(*STEPS)):
        return True
    found = branches(expr, names)
    if not found:
        return False
    sides = {(b, i) for b, (node, args) in enumerate(found)
             for i in range(2 if isinstance(node, sp.Abs) else len(args))}
    for p in points:
        sides -= _active(found, p)
        if not sides:
            return False
    return True


def _never_steps(node: sp.Expr, names: Sequence[str], points: Sequence[Point]) -> bool:
    inner = evaluator(node.args[0], names)
    args = [v for v in (inner(p) for p in points) if v is not None]
    if not args:
        return True
    rounded = {int(mpmath.floor(v)) if isinstance(node, sp.floor) else int(mpmath.ceil(v)) for v in args}
    return len(rounded) == 1 or all(v == int(v) for v in args)


# mpmath keeps the exponent of a value exactly, so exp(x) of a huge x needs log(2) to as many digits
# as x has (exp(exp(B)) runs for minutes, exp(exp(exp(40))) runs out of memory). No quantity the course
# asks for comes near e**(2**40); above that a value counts as not computable, like an overflow.
MAX_EXP_ARGUMENT = mpmath.mpf(2) ** 40


def _exp(x: mpmath.mpf) -> mpmath.mpf:
    if abs(x) > MAX_EXP_ARGUMENT:
        raise OverflowError("exp of a number above 2**40")
    return mpmath.exp(x)


def _pow(x: mpmath.mpf, y: mpmath.mpf) -> mpmath.mpf:
    """x**y for an exponent with symbols in it, bounded like exp()."""
    if x != 0 and abs(y * mpmath.log(abs(x))) > MAX_EXP_ARGUMENT:
        raise OverflowError("a power above e**(2**40)")
    return mpmath.power(x, y)


class safe_pow(sp.Function):  # noqa: N801  (lambdify prints it by this name)
    """Stands in for a power whose exponent holds symbols, so that evaluation goes through _pow."""

    nargs = 2


def _guard_powers(expr: sp.Expr) -> sp.Expr:
    # Unevaluated: a Max or Min rebuilt around safe_pow(3, 1/log(4)) would compare it with its other arguments,
    # which sympy cannot do with a function of numbers, and raise.
    with sp.evaluate(False):
        return expr.replace(lambda e: e.is_Pow and not e.exp.is_Number, lambda e: safe_pow(e.base, e.exp))


def evaluator(expr: sp.Expr, names: Sequence[str]) -> Callable[[Point], mpmath.mpf | None]:
    """A function from a point to the 50-digit value of ``expr`` there (None where not real)."""
    syms = [symbol(n) for n in names]
    fn = sp.lambdify(syms, _guard_powers(sp.sympify(expr)),
                     modules=[{"exp": _exp, "safe_pow": _pow}, "mpmath"])

    def at(point: Point) -> mpmath.mpf | None:
        with mpmath.workdps(DIGITS):
            args = [mpmath.mpf(point[n].numerator) / point[n].denominator for n in names]
            try:
                v = fn(*args)
            except (ZeroDivisionError, ValueError, TypeError, OverflowError, MemoryError, RecursionError):
                return None
            if isinstance(v, mpmath.mpc):
                if abs(v.imag) > abs(v.real) * mpmath.mpf("1e-30"):
                    return None
                v = v.real
            v = mpmath.mpf(v)
            return v if mpmath.isfinite(v) else None
    return at


def free_names(expr: sp.Expr) -> frozenset[str]:
    return frozenset(s.name for s in expr.free_symbols)


def used_names(expr: sp.Expr) -> frozenset[str]:
    """The symbols the value of ``expr`` depends on: those left after cancelling common factors, so that
    B in B*D/(B*D + B*F) is not among them though it is written there. (Found by sympy, not
    by value: a symbol that a nested max/min uses only where two other branches meet is rarely seen at
    the sample points.) Run on references only, never on a student's text."""
    try:
        return free_names(sp.cancel(sp.together(expr)))
    except (sp.PolynomialError, TypeError, ValueError):  # no rational form to cancel in
        return free_names(expr)
