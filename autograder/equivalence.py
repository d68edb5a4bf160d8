"""Formula equivalence on the symbols' domains, and the diagnosis of common slips.

Two formulas are equivalent when they agree at random points of the domain: positive reals for
sizes and rates, integers >= 2 for counts (so a factor N-1 never vanishes or flips sign). Values
are computed with 50-digit mpmath at exact rational points, and "agree" means a relative difference
below 1e-10: float coefficients from a student's numeric solve (1/1.97e14) still match, and no
honest slip is that small. A bounded symbolic check can confirm the verdict afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import sympy as sp

from course.symbols import symbol

DIGITS = 50
RTOL = mpmath.mpf("1e-10")
# At 1e8-times-larger points only the leading terms count: values that agree to 4 significant
# digits there have the same leading terms. Compared as rounded text so that the self-check, which
# only has hashes of rounded values, reaches exactly the same verdict.
LEADING_DIGITS = 4
N_POINTS = 10

# Factors a slip typically introduces: bf16 vs fp32 (2), one vs two directions (2), N vs N-1,
# the 2 in 2*B*D*F, units (1000).
NICE_FACTORS = tuple(
    sorted({Fraction(p, q) for p in (1, 2, 3, 4, 8, 16) for q in (1, 2, 3, 4, 8, 16) if p != q}
           | {Fraction(10) ** e for e in range(-12, 13) if e}
           | {Fraction(-1)}))


@dataclass(frozen=True)
class Domain:
    """The symbols a question declares; ``counts`` are integers >= 2, the rest positive reals."""

    names: tuple[str, ...]
    counts: frozenset[str] = frozenset()

    def large(self, points: list[dict[str, Fraction]]) -> list[dict[str, Fraction]]:
        """The same points with every symbol 1e8 times larger: where only leading terms matter."""
        return [{k: v * 10**8 for k, v in p.items()} for p in points[:3]]

    def points(self, n: int, seed: int) -> list[dict[str, Fraction]]:
        """``n`` points spread over many orders of magnitude, so both sides of a max() are seen."""
        rng = random.Random(seed)
        pts = []
        for _ in range(n):
            p = {}
            for name in self.names:
                if name in self.counts:
                    p[name] = Fraction(max(2, round(2 ** rng.uniform(1, 12))))
                else:
                    p[name] = Fraction(max(1, round(2 ** rng.uniform(-4, 16) * 64)), 64)
            pts.append(p)
        return pts


# mpmath keeps the exponent of a value exactly, so exp(x) of a huge x needs log(2) to as many digits
# as x has (exp(exp(B)) runs for minutes, exp(exp(exp(40))) runs out of memory). No quantity the course
# asks for comes near e**(2**40); above that a value counts as not computable, like an overflow.
MAX_EXP_ARGUMENT = mpmath.mpf(2) ** 40


def _exp(x: mpmath.mpf) -> mpmath.mpf:
    if abs(x) > MAX_EXP_ARGUMENT:
        raise OverflowError("exp of a number above 2**40")
    return mpmath.exp(x)


def evaluator(expr: sp.Expr, names: Sequence[str]) -> Callable[[dict[str, Fraction]], mpmath.mpf | None]:
    """A function from a point to the 50-digit value of ``expr`` there (None where not real)."""
    syms = [symbol(n) for n in names]
    fn = sp.lambdify(syms, expr, modules=[{"exp": _exp}, "mpmath"])

    def at(point: dict[str, Fraction]) -> mpmath.mpf | None:
        with mpmath.workdps(DIGITS):
            args = [mpmath.mpf(point[n].numerator) / point[n].denominator for n in names]
            try:
                v = fn(*args)
            except (ZeroDivisionError, ValueError, TypeError, OverflowError, MemoryError, RecursionError):
                return None
            if isinstance(v, mpmath.mpc):
                if abs(v.imag) > abs(v.real) * RTOL:
                    return None
                v = v.real
            v = mpmath.mpf(v)
            return v if mpmath.isfinite(v) else None
    return at


def close(a: mpmath.mpf | None, b: mpmath.mpf | None, rtol: mpmath.mpf = RTOL) -> bool:
    if a is None or b is None:
        return False
    with mpmath.workdps(DIGITS):
        scale = max(abs(a), abs(b))
        return bool(scale == 0 or abs(a - b) <= rtol * scale)


def round_token(v: mpmath.mpf | None, digits: int) -> str:
    """A value as text with ``digits`` significant digits (what fingerprints hash)."""
    return "none" if v is None else mpmath.nstr(v, digits, min_fixed=-1, max_fixed=-1)


def tokens(v: mpmath.mpf | None, digits: int) -> set[str]:
    """The rounded text of ``v`` and of its close neighbours, so a value on a rounding edge still
    matches one computed by another, equivalent formula."""
    if v is None:
        return {"none"}
    shift = mpmath.mpf(10) ** (-digits - 1)
    with mpmath.workdps(DIGITS):
        return {round_token(v, digits), round_token(v * (1 + shift), digits), round_token(v * (1 - shift), digits)}


def same_rounded(reference: mpmath.mpf | None, candidate: mpmath.mpf | None, digits: int) -> bool:
    return reference is not None and candidate is not None and round_token(reference, digits) in tokens(
        candidate, digits)


@dataclass(frozen=True)
class Comparison:
    equal: bool
    diagnosis: str  # "" when equal; else ratio:k, extra_symbol:F, missing_symbol:D, partly, ...


def nice_ratio(ratio: mpmath.mpf) -> Fraction | None:
    for k in NICE_FACTORS:
        if close(ratio, mpmath.mpf(k.numerator) / k.denominator):
            return k
    return None


def compare(reference: sp.Expr, candidate: sp.Expr, domain: Domain, seed: int = 0) -> Comparison:
    """Is ``candidate`` the same function as ``reference`` on the domain? If not, what slipped?"""
    points = domain.points(N_POINTS, seed)
    at_ref, at_cand = evaluator(reference, domain.names), evaluator(candidate, domain.names)
    ref, cand = [at_ref(p) for p in points], [at_cand(p) for p in points]
    big = domain.large(points)
    leading = all(same_rounded(at_ref(p), at_cand(p), LEADING_DIGITS) for p in big)
    return diagnose(ref, cand, free_names(reference), free_names(candidate), leading)


def free_names(expr: sp.Expr) -> frozenset[str]:
    return frozenset(s.name for s in expr.free_symbols)


def diagnose(ref: Sequence[mpmath.mpf | None], cand: Sequence[mpmath.mpf | None],
             ref_names: frozenset[str], cand_names: frozenset[str], leading: bool) -> Comparison:
    """Order matters: a constant ratio is the most specific finding, then symbols that should or
    should not appear, then a right leading order with wrong lower terms, then partial agreement.
    The self-check (fingerprint.py) follows the same order."""
    matches = [close(r, c) for r, c in zip(ref, cand, strict=True)]
    if all(matches):
        return Comparison(True, "")
    if all(c is None for c in cand):
        return Comparison(False, "not_real")
    ratios = [c / r for r, c in zip(ref, cand, strict=True) if r is not None and c is not None and r != 0]
    if ratios and all(close(x, ratios[0]) for x in ratios):
        k = nice_ratio(ratios[0])
        return Comparison(False, f"ratio:{k}" if k is not None else "ratio:other")
    extra, missing = cand_names - ref_names, ref_names - cand_names
    if extra:
        return Comparison(False, "extra_symbol:" + ",".join(sorted(extra)))
    if missing:
        return Comparison(False, "missing_symbol:" + ",".join(sorted(missing)))
    if leading:
        return Comparison(False, "lower_terms")
    if any(matches):
        return Comparison(False, "partly")
    return Comparison(False, "not_equivalent")


def confirm_symbolically(reference: sp.Expr, candidate: sp.Expr) -> bool | None:
    """True if sympy proves the difference is zero, None if it cannot tell. Callers bound the time
    (the sandbox sets an alarm): simplify can run for minutes on adversarial input."""
    try:
        diff = sp.simplify(reference - candidate)
    except Exception:
        return None
    return True if diff == 0 else None
