"""Numeric answers: parsing with optional units, and the tolerance check.

A student may answer with a bare number (read in the unit the question states) or with text that
carries a unit (``"1.01 ms"``), which is converted. A unit of the wrong dimension is invalid, not
wrong: the student typed something the question cannot read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .formula import Invalid, answer_to_text

# Scale factors to the SI base of each dimension. FLOPs count operations; "B" is bytes.
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def _unit_table() -> dict[str, tuple[str, float]]:
    t: dict[str, tuple[str, float]] = {
        "s": ("time", 1.0), "sec": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6),
        "µs": ("time", 1e-6), "μs": ("time", 1e-6), "ns": ("time", 1e-9), "ps": ("time", 1e-12),
        "min": ("time", 60.0), "h": ("time", 3600.0), "hours": ("time", 3600.0),
        "days": ("time", 86400.0),
        "": ("number", 1.0),
    }
    for p, f in {**_PREFIX, **_BINARY}.items():
        for b in ("B", "bytes") if p == "" else ("B",):
            t[p + b] = ("bytes", f)
            t[p + b + "/s"] = ("bytes/s", f)
        if p in _PREFIX:
            for flop in ("FLOP", "FLOPs"):
                t[p + flop] = ("flops", f)
                t[p + flop + "/s"] = ("flops/s", f)
            t[p + "FLOPS"] = ("flops/s", f)
    t["FLOP/B"] = t["FLOPs/B"] = t["FLOPs/byte"] = ("flops/byte", 1.0)
    return t


UNITS = _unit_table()
DIMENSION_WORDS = {"time": "a time", "bytes": "a size in bytes", "bytes/s": "a bandwidth",
                   "flops": "a FLOP count", "flops/s": "a FLOP rate", "flops/byte": "an intensity",
                   "number": "a plain number"}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


@dataclass(frozen=True)
class ParsedNumber:
    value: float  # in the question's unit
    unit_given: str | None  # the unit the student wrote, if any


def unit_dimension(unit: str) -> str:
    """Dimension of a question's unit; authoring mistakes fail here, at import."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; known: {', '.join(sorted(u for u in UNITS if u))}")
    return UNITS[unit][0]


def parse_number(answer: object, unit: str) -> ParsedNumber | Invalid:
    """Read a numeric answer; ``unit`` is the question's unit ("" for a plain number)."""
    text = answer_to_text(answer)
    if isinstance(text, Invalid):
        return text
    if len(text) > 200:
        return Invalid("too_long", str(len(text)), text=text[:80])
    m = _NUMBER.match(text)
    if not m:
        return Invalid("not_a_number", text=text)
    try:
        value = float(m.group(1))
    except (ValueError, OverflowError):
        return Invalid("not_a_number", text=text)
    if not math.isfinite(value):
        return Invalid("not_finite", text=text)
    given = m.group(2) or None
    if given is None:
        return ParsedNumber(value, None)
    if given not in UNITS:
        return Invalid("unknown_unit", given, text=text)
    want_dim, want_scale = UNITS[unit]
    got_dim, got_scale = UNITS[given]
    if got_dim != want_dim:
        return Invalid("unit_dimension", given, text=text)
    value = value * got_scale / want_scale
    return ParsedNumber(value, given) if math.isfinite(value) else Invalid("not_finite", text=text)  # 1e308 TB


@dataclass(frozen=True)
class Tolerance:
    """Accept ``reference * (1 +- rtol)``, or a closed range [low, high] where the book is vague."""

    rtol: float = 0.02
    low: float | None = None
    high: float | None = None

    def bounds(self, reference: float) -> tuple[float, float]:
        if self.low is not None and self.high is not None:
            return self.low, self.high
        a, b = reference * (1 - self.rtol), reference * (1 + self.rtol)
        return min(a, b), max(a, b)

    def relative(self) -> Tolerance:
        """The same relative tolerance without the range: for matching slips and alternatives."""
        return Tolerance(rtol=self.rtol)

    def accepts(self, reference: float, value: float) -> bool:
        lo, hi = self.bounds(reference)
        return lo <= value <= hi
