"""Numeric answers: parsing with optional units, and the tolerance check.

A student may answer with a bare number (read in the unit the question states) or with text that
carries a unit (``"1.01 ms"``), which is converted. A unit of the wrong dimension is invalid, not
wrong: the student typed something the question cannot read.

Fair reading: what a student would honestly write on paper is read, not refused. That includes
arithmetic of numbers (``"1/4"``, ``"2*31.27e9 B/s"``, ``"(8192*3584*2)/1024"``), which goes through
the formula parser's allow-list (never ``eval``) with no names declared, percentages (``"25%"``
is 0.25 of a plain number), scientific notation written by hand when it stands alone (``"1.5 x 10^-3"``,
``"1.5×10⁻³ s"``, ``"1.5e−3"``), and a number of any library (``record.plain_number``: numpy, JAX,
sympy, ``Fraction``, ``Decimal``), and a sympy expression of numbers alone by its value (``8*sqrt(3)`` as
``.subs`` leaves it: ``record.number_of``). Runs of spaces and tabs read as one (``record.canonical``). Two
forms stay refused because they cannot be read one way only: digit
separators (``"1,024"`` is 1024 in one country and 1.024 in another) and anything with a name in it.

And fair rounding: an answer rounded to 3 significant figures passes, unless the question asks for
an exact count (``Tolerance.exact_count()``; ``questions.Number`` enforces both).

``parse_number`` never raises on student input: it returns ``ParsedNumber`` or ``Invalid``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import sympy as sp

from . import record
from .formula import CONSTANTS, FUNCTIONS, Invalid, answer_to_text, parse_formula

# Units are a grammar: a prefix, a base and, for a rate, a per-second spelling (``_unit_table``). Scale factors
# are to the SI base of each dimension: seconds, bytes, FLOPs. Case matters where it says something: B is a byte
# and b a bit ("Gb/s" is 1/8 of "GB/s"), m is milli and M mega, so "mflop" is never a unit.
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_WORD_PREFIX = {"": 1.0, "kilo": 1e3, "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18,
                "zetta": 1e21, "yotta": 1e24, "kibi": 2.0**10, "mebi": 2.0**20, "gibi": 2.0**30, "tebi": 2.0**40,
                "pebi": 2.0**50}
_PER_SECOND = ("/s", "/sec", " per second")  # and "ps" after a one-letter B or b: "GBps", "Gbps"
# Bytes and bits: the base and its size in bytes ("Gbit" is 1e9 / 8 B). A lone "b" is no unit: a letter more
# often than a bit ("3 bits" says it).
_BYTE_BASES = {"B": 1.0, "byte": 1.0, "bytes": 1.0, "Byte": 1.0, "Bytes": 1.0, "b": 1 / 8, "bit": 1 / 8,
               "bits": 1 / 8}
# FLOPs: "FLOPs" and "FLOP" are the course's count, "FLOP/s" its rate; "FLOPS" and "flops" are written for
# both (``_reading``). A lower-case prefix is read before a lower-case flop ("tflops"), never m (milli).
_FLOP_COUNTS = ("FLOP", "FLOPs", "flop", "Flop")
_FLOP_EITHER = ("FLOPS", "flops", "Flops")
_LOWER_PREFIX = {"t": 1e12, "g": 1e9, "p": 1e15, "e": 1e18, "z": 1e21}
# Times: the second with its SI prefixes, in symbols and in words, then the longer units by name.
_SECOND_PREFIX = {"": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "n": 1e-9, "p": 1e-12}
_SECOND_WORD_PREFIX = {"": 1.0, "milli": 1e-3, "micro": 1e-6, "nano": 1e-9, "pico": 1e-12}
_TIMES = {("min", "mins", "minute", "minutes"): 60.0, ("h", "hr", "hrs", "hour", "hours"): 3600.0,
          ("d", "day", "days"): 86400.0, ("week", "weeks"): 7 * 86400.0,
          ("y", "yr", "yrs", "year", "years"): 365.25 * 86400.0}  # a Julian year


def _unit_table() -> dict[str, tuple[str, float]]:
    """Every spelling of every unit: prefix x base x per-second spelling, the times, and a few words."""
    t: dict[str, tuple[str, float]] = {
        # A percentage is a plain number in hundredths: "25%" answers a fraction question with 0.25.
        "": ("number", 1.0), "%": ("number", 0.01), "percent": ("number", 0.01),
        # A speed-up or a ratio as it is written: "1.27x", "1.27×", "1.27 times".
        "x": ("number", 1.0), "\u00d7": ("number", 1.0), "times": ("number", 1.0),
    }
    for p, f in _SECOND_PREFIX.items():
        for s in ("s", "sec", "secs"):
            t[p + s] = ("time", f)
    for p, f in _SECOND_WORD_PREFIX.items():
        t[p + "second"] = t[p + "seconds"] = ("time", f)
    for words, f in _TIMES.items():
        t |= dict.fromkeys(words, ("time", f))

    def size(spelling: str, f: float, ps: bool) -> None:  # a size and its rates
        t[spelling] = ("bytes", f)
        for rate in _PER_SECOND + (("ps",) if ps else ()):
            t[spelling + rate] = ("bytes/s", f)

    for base, f in _BYTE_BASES.items():
        for p, g in {**_PREFIX, **_BINARY}.items():
            if (p, base) != ("", "b") and not (p in _BINARY and base.lower().startswith("byte")):
                size(p + base, g * f, len(base) == 1)
        if base.islower() and len(base) > 1:  # the words: "gigabytes", "gibibits"
            for p, g in _WORD_PREFIX.items():
                size(p + base, g * f, False)
    for p, f in {**_PREFIX, **_LOWER_PREFIX}.items():
        lower = p in _LOWER_PREFIX
        for base in _FLOP_COUNTS + _FLOP_EITHER:
            if lower and base.startswith("FLOP"):
                continue  # "tFLOPs" is no one's spelling
            t[p + base] = ("flops/s", f) if base == "FLOPS" else ("flops", f)
            if base != "FLOPS":
                for rate in _PER_SECOND:
                    t[p + base + rate] = ("flops/s", f)
    for p, f in _WORD_PREFIX.items():
        if p and not p.endswith("bi"):  # "teraflops"
            for base in ("flop", "flops"):
                t[p + base] = ("flops", f)
                for rate in _PER_SECOND:
                    t[p + base + rate] = ("flops/s", f)
    t["mflops"] = ("flops", 1e6)  # read as MFLOPS before the grammar; kept, though "mflop" is no unit
    for p, f in (("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9)):  # a clock: "2.11 GHz"
        t[p + "Hz"] = ("frequency", f)
    # An intensity, as the prompts write it ("FLOPs per byte"): a plain number the intensity questions ask for.
    for flop in _FLOP_COUNTS + _FLOP_EITHER:
        for b in ("B", "byte", "bytes"):
            t[f"{flop}/{b}"] = ("flops/byte", 1.0)
        t[f"{flop} per byte"] = ("flops/byte", 1.0)
    return t


UNITS = _unit_table()
DIMENSION_WORDS = {"time": "a time", "bytes": "a size in bytes", "bytes/s": "a bandwidth",
                   "flops": "a FLOP count", "flops/s": "a FLOP rate", "flops/byte": "an intensity",
                   "frequency": "a frequency", "number": "a plain number"}
MAX_CHARS = 200  # a number, even as a short product with a unit, fits in far fewer

# ASCII digits only: Python's \d and float() also read Arabic-Indic and other digits, which a
# student does not type by accident and which the formula parser would not read.
_NUM = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_PLAIN = re.compile(rf"[-+]?{_NUM}")
# Arithmetic of numbers: number literals, + - * / ** and parentheses. The typed operators the
# formula parser has a sentence for (^, ×, ·, −, ÷) are let through so that it can say so.
# Possessive (*+): a run of digits is one literal, never retried as "1", "1", ... (which is
# exponential in the length of the run).
_ARITHMETIC = re.compile(rf"(?:{_NUM}|[-+*/()^×·−÷ \t])*+")
_HAS_DIGIT = re.compile(r"[0-9]")
# The longest arithmetic prefix of an answer; what follows it is the unit the student meant.
_ARITHMETIC_PREFIX = re.compile(rf"(?:{_NUM}|[-+*/() \t])*+")
# A comma, underscore, apostrophe or space between digits: a thousands separator or a decimal comma.
_SEPARATOR = re.compile(r"[0-9](?:,\s?|[_'\u00a0\u2009\u202f ])(?=[0-9])")
# Units that may end an answer, tried longest first, so that "GB/s" wins over "B/s" and "ms" over "s".
_SUFFIXES = frozenset(u for u in UNITS if u)
_SUFFIX_LENGTHS = sorted({len(u) for u in _SUFFIXES}, reverse=True)
# The units spelled as words ("milliseconds", "gigabytes"): read whatever their case ("Milliseconds" opens a
# sentence), unlike a symbol, whose case is its meaning (MB and mb).
_WORD_UNITS = frozenset(u for u in _SUFFIXES if u.isalpha() and u.islower() and len(u) >= 5)
# An approximation mark or word before the number ("~1.01 ms", "≈ 1.01 ms", "about 1 ms"): says nothing of which
# value, as the figures do. And a full stop that ends a sentence after a unit or a percent ("1.01 ms.").
_APPROXIMATELY = re.compile(r"^(?:~|≈|∼|≃|approx\.?|approximately|about|around|roughly)\s*(?=[-+.0-9(])",
                            re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[A-Za-zµμ%)])\.$")
# A plain number as it is said of money and counts: the course's amounts are in US dollars ("$1.08e7", "1.08e7 USD"),
# and a count may end in the word of its scale ("3.2 billion"), which no unit is. A letter of scale ("13B", "70M") is
# still told how to write the number: B is bytes as often as billions, and K 1024 as often as 1000.
_DOLLARS = re.compile(r"^(?:US\s?\$|\$|USD)\s*(?=[-+.0-9(])|(?<=[0-9A-Za-z)])\s*(?:\$|USD|(?:US\s)?dollars?)$",
                      re.IGNORECASE)
_SPOKEN_SCALE = re.compile(rf"({_NUM})\s*(thousand|million|billion|trillion)", re.IGNORECASE)
_SPOKEN_POWERS = {"thousand": "e3", "million": "e6", "billion": "e9", "trillion": "e12"}


def _as_said(text: str) -> str:
    """A plain number's text with a dollar sign or name left out and a scale word written as its power of ten."""
    text = _DOLLARS.sub("", text.strip())
    said = _SPOKEN_SCALE.fullmatch(text)
    return f"({said.group(1)})*1{_SPOKEN_POWERS[said.group(2).lower()]}" if said else text

# Scientific notation as it is written by hand: a mantissa, a times sign, 10 and its power, written with
# ^, ** or superscript digits ("1.5 x 10^-3", "1.5×10⁻³", "1.5 * 10**(-3)"), and an exponent's minus typed
# as the typographic one ("1.5e−3"). Standing alone (before its unit) it is one number, and read; inside a
# calculation it is not ("2 / 1.5 x 10^3": 2/1500, or 2/1.5 times 1000?), and the sentence gives the e form.
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_TIMES_TEN = re.compile(r"(?<![0-9.eE])(?P<m>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*[x×X·*]\s*10\s*"
                        r"(?:(?:\^|\*\*)\s*(?P<open>\(\s*)?(?P<e>[-+−]?\s*[0-9]+)(?(open)\s*\))"
                        r"|(?P<s>[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+))(?![0-9.⁰¹²³⁴⁵⁶⁷⁸⁹])")
_E_MINUS = re.compile(r"(?<=[0-9.])([eE])−(?=[0-9])")


def e_notation(text: str) -> str | None:
    """The e form of a number written as a mantissa times a power of ten ("1.5 x 10^-3" -> "1.5e-3"),
    or None where ``text`` holds none."""
    m = _TIMES_TEN.search(text)
    if m is None:
        return None
    exponent = (m.group("e") or m.group("s")).translate(_SUPERSCRIPTS).replace("−", "-").replace(" ", "")
    return f"{m.group('m')}e{exponent.lstrip('+')}"


@dataclass(frozen=True)
class ParsedNumber:
    value: float  # in the question's unit
    unit_given: str | None  # the unit the student wrote, if any


def unit_dimension(unit: str) -> str:
    """Dimension of a question's unit; authoring mistakes fail here, at import."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; known: {', '.join(sorted(u for u in UNITS if u))}")
    return UNITS[unit][0]


# For the sentence on an unknown unit: the prefixes a question's unit is most often written with, and other
# common units of its kind.
_COMMON_PREFIX = {"time": ("", "m", "µ", "n"), "frequency": ("", "G", "M", "k")}
_COMMON_UNITS = {"time": ("h", "min", "s", "ms", "days", "weeks", "years"), "bytes": ("GiB", "bytes"),
                 "bytes/s": ("GiB/s", "Gb/s"), "flops": ("TFLOPs", "FLOPs"), "flops/s": ("TFLOPS", "FLOPS"),
                 "flops/byte": ("FLOPs/byte", "FLOP/B")}


def unit_examples(unit: str) -> str:
    """Units a student may write for a question in ``unit``: for the sentence on an unknown unit. The question's
    unit first, then its base with the common prefixes ("FLOP/s, TFLOP/s, GFLOP/s, MFLOP/s, kFLOP/s"; "s, ms, µs,
    ns"), then other common units of its kind. A plain number names the percent sign as an option, not as the one
    unit to use."""
    dim = unit_dimension(unit)
    if dim == "number":
        return "a plain number, in the units the question names (a fraction may be written as a percentage: 25%)"
    prefixes = _COMMON_PREFIX.get(dim, ("", "T", "G", "M", "k"))
    base = next((unit[len(p):] for p in sorted(_PREFIX | _BINARY | _SECOND_PREFIX, key=len, reverse=True)
                 if unit.startswith(p) and UNITS.get(unit[len(p):], ("",))[0] == dim), unit)
    named = [unit, *(p + base for p in prefixes), *_COMMON_UNITS.get(dim, ())]
    return ", ".join(list(dict.fromkeys(u for u in named if UNITS.get(u, ("",))[0] == dim))[:6])


def _reading(given: str, want: str) -> tuple[str, float]:
    """The dimension and scale of the unit a student wrote, in the question's dimension ``want`` where
    the spelling allows both: "FLOPS" and "tflops" are written for a count and for a rate ("FLOPs" is
    the course's count, "FLOP/s" its rate), and an intensity in FLOPs per byte is the plain number the
    intensity questions ask for."""
    dim, scale = UNITS[given]
    if (dim, want) == ("flops/byte", "number") or ({dim, want} == {"flops", "flops/s"} and
                                                   given.endswith(_FLOP_EITHER)):
        return want, scale
    return dim, scale


def unit_scale(given: str, unit: str) -> float:
    """How many of the question's ``unit`` one of the ``given`` unit (of the same dimension) is: 2**30 for GiB in
    B, 1e-3 for ms in s."""
    return _reading(given, UNITS[unit][0])[1] / UNITS[unit][1]


def parse_number(answer: object, unit: str) -> ParsedNumber | Invalid:
    """Read a numeric answer; ``unit`` is the question's unit ("" for a plain number).

    Forms read: a number (``1.5e-3``), arithmetic of numbers (``1/4``, ``2*31.27e9``), either one
    followed by a unit (``1.5 ms``, ``8192*3584*2 B``, ``25%``). A bare number is in the question's
    unit, also when that unit is "%" (0.25 then means 0.25 %, as 0.25 means 0.25 ms for a question
    in ms).
    """
    number = None if isinstance(answer, str) else record.number_of(answer)
    if type(number) is float and math.isfinite(number):
        return ParsedNumber(number, None)  # a computed value: its shortest text reads back as itself, in no unit
    text = answer_to_text(answer if number is None else number)
    if isinstance(text, Invalid):
        return _formula_record(text)
    text = _SENTENCE_END.sub("", _APPROXIMATELY.sub("", record.canonical("number", text)))
    if unit == "":
        text = _as_said(text)
    if len(text) > MAX_CHARS:
        return Invalid("too_long", f"{len(text):,} characters, where {MAX_CHARS:,} at most are read", text=text[:80])
    currency = _CURRENCY.search(text)
    if currency:  # before the separator: "$3,000" is told both in one sentence
        return Invalid("currency", currency.group(), text=text)
    separator = _SEPARATOR.search(text)
    if separator:
        return Invalid("separator", separator.group()[1:], separator.start() + 1, text)
    numeric, given = _split_unit(text)
    value = _value(numeric, text)
    if isinstance(value, Invalid):
        return _as_formula(_misread(value, text, unit), free_symbols(answer), text)
    if given is None:
        return ParsedNumber(value, None)
    want_dim, want_scale = UNITS[unit]
    got_dim, got_scale = _reading(given, want_dim)
    if got_dim != want_dim:
        if want_dim == "number" and given == "B" and _SCALED.fullmatch(text):  # "13B": the book's 13 billion
            return Invalid("scale_suffix", text, text=text)
        return Invalid("unit_dimension", given, text=text)
    value = value * got_scale / want_scale
    return ParsedNumber(value, given) if math.isfinite(value) else Invalid("not_finite", text=text)  # 1e308 TB


# Money written as money: a currency's sign or name (an amount is asked as a plain number).
_CURRENCY = re.compile(r"[$€£¥]|\b(?:USD|EUR|GBP|dollars?|euros?)\b", re.IGNORECASE)
# A number with a letter of scale after it, glued or after a space, as the book and the news write counts (13B
# parameters, 8.03 B, 70M, 3.2 G, 4k, 13bn), or with the word (13 billion). On a plain-number question it is told how
# to write the number (``messages.phrase``); on a question with a unit, B is bytes and G alone no unit.
_SCALED = re.compile(rf"{_NUM}\s*(?:[kKMGTB]|bn|thousand|million|billion|trillion)")
# A name right after an operator, as in 2*B or 4*(N + 1): a formula, where a unit would follow a space.
# Not after "/", which units hold (GB/s).
_NAME_AFTER_OPERATOR = re.compile(r"(?:\*\*|[-+*(])\s*([A-Za-z_]\w*)")
# A name that divides a number, as in 1966080/W_link or 3/C: a formula too, where a unit (GB/s) follows a letter.
_NAME_DIVIDING = re.compile(r"[0-9)]\s*/\s*([A-Za-z_]\w*)")
# A number literal, stripped before names are read: the e of 3.4e-8 is no symbol (a digit or a letter before it
# makes it part of a name, as in C8).
_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NOT_NAMES = {"inf", "nan", "infinity"}  # "-inf": a number that is not finite, not a formula
_NOT_FINITE = re.compile(r"[-+]?(?:inf|infinity|nan)", re.IGNORECASE)  # as a float prints, or a student types it


def _misread(inv: Invalid, text: str, unit: str) -> Invalid:
    """Why an answer with a word in it cannot be read, in the student's terms where the words say more
    than "unknown unit": a formula where a number is asked (a sympy expression such as 2*B: named by its
    symbols, not its functions), a calculation of numbers with functions or pi in it (8*sqrt(3)), units
    inside a calculation ("244 us / 224 us"), a word after a plain number ("240 tokens"), or a count
    written the book's way ("70M")."""
    if inv.code not in ("unknown_unit", "not_a_number"):
        return inv
    def symbolic(name: str) -> bool:  # B is bytes after a space, and the batch after an operator
        return (name not in UNITS or len(name) == 1 and name.isupper()) and name.lower() not in _NOT_NAMES

    bare = _LITERAL.sub("0", text)  # names only: 3.41e-8*B holds B, not e
    names = {n for n in re.findall(r"[A-Za-z_]\w*", bare) if symbolic(n)}
    symbols = sorted(n for n in names if n not in FUNCTIONS and n not in CONSTANTS)
    used = [m.group(1) for m in (*_NAME_AFTER_OPERATOR.finditer(bare), *_NAME_DIVIDING.finditer(bare))]
    if symbols and any(symbolic(name) for name in used):
        return Invalid("formula_for_number", ", ".join(symbols), text=text)
    calls = sorted({m.group(1) for m in re.finditer(r"([A-Za-z_]\w*)\s*\(", text) if m.group(1) in FUNCTIONS}
                   | (names & set(CONSTANTS)))
    if calls and not symbols and _HAS_DIGIT.search(text):
        return Invalid("number_expression", ", ".join(calls), text=text)
    if inv.code != "unknown_unit":
        return inv
    if re.search(r"[-+*/]", inv.detail) and re.search(r"[0-9]", inv.detail):  # a second number, not GB/ss
        return Invalid("unit_arithmetic", text, text=text)
    if UNITS[unit][0] == "number":
        if _SCALED.fullmatch(text):
            return Invalid("scale_suffix", text, text=text)
        if re.fullmatch(r"[A-Za-z]{3,}", inv.detail):  # "240 tokens"; "2 x" may be a product
            return Invalid("count_word", inv.detail, text=text)
    return inv


# How a number's record names the symbols of a sympy formula given for a number (``kinds.number.encode``): read from
# the expression itself, not from its text, and read back here as "formula_for_number".
FORMULA_IN = "a formula in "
# What an unreadable number may be instead, where it is a sympy formula: a formula, whatever its text suggests.
_FORMULA_CODES = frozenset({"unknown_unit", "not_a_number", "formula_for_number", "number_expression",
                            "unit_arithmetic", "count_word", "scale_suffix"})


def free_symbols(answer: object) -> list[str] | None:
    """The names of a sympy expression's free symbols, sorted; None where ``answer`` is no sympy expression with
    symbols. Never raises."""
    try:
        if isinstance(answer, sp.Expr) and answer.free_symbols:
            return sorted({str(x.name) for x in answer.free_symbols if isinstance(x, sp.Symbol)}) or None
    except Exception:  # a hostile subclass
        return None
    return None


def _as_formula(inv: Invalid, symbols: list[str] | None, text: str) -> Invalid:
    """A sympy formula that does not read as a number is a formula in its own symbols (3/C is not the unit
    '/C'), named from the expression: its text may hide them."""
    if symbols and inv.code in _FORMULA_CODES:
        return Invalid("formula_for_number", ", ".join(symbols), text=text)
    return inv


def _formula_record(inv: Invalid) -> Invalid:
    """A record's reason, read back: a formula named by its symbols (``FORMULA_IN``) is "formula_for_number"."""
    if inv.code == "wrong_type" and inv.detail.startswith(FORMULA_IN) and len(inv.detail) > len(FORMULA_IN):
        return Invalid("formula_for_number", inv.detail[len(FORMULA_IN):])
    return inv


def _split_unit(text: str) -> tuple[str, str | None]:
    """The number part and the known unit that ends ``text``, if one does. The unit must follow a
    space, a digit, a decimal point or a ")", so that "1 xB/s" is not read as "1 x" in B/s; or a times sign
    after one of those ("0.00101*s": a sympy symbol named after a unit, recorded as its text), unless the unit is
    one capital letter, which after an operator is a symbol (2*B is twice the batch: ``_misread``'s formula)."""
    for n in _SUFFIX_LENGTHS:  # the longest unit first: "GB/s" before "B/s" and "s"
        u, head = text[-n:], text[:-n]
        if u not in _SUFFIXES and u.lower() in _WORD_UNITS:
            u = u.lower()
        if u not in _SUFFIXES or not head:
            continue
        times = head.rstrip()
        if times.endswith("*") and not times.endswith("**") and u[0].isalpha() and not (len(u) == 1 and u.isupper()):
            number = times[:-1].rstrip()
            if number and number[-1] in _BEFORE_UNIT:
                return number, u
        if head[-1].isspace() or head[-1] in _BEFORE_UNIT:
            return times, u
    return text, None


_BEFORE_UNIT = "0123456789.)⁰¹²³⁴⁵⁶⁷⁸⁹"


def _value(numeric: str, text: str) -> float | Invalid:
    """The value of the number part, or why it cannot be read (``text`` is the whole answer)."""
    numeric = _E_MINUS.sub(r"\1-", numeric)  # "1.5e−3": one character for another, offsets stay
    whole = re.fullmatch(r"([-+]?)\s*(.*)", numeric, re.S)  # a sign, then "1.5 x 10^-3" on its own
    if whole and _TIMES_TEN.fullmatch(whole.group(2)):
        numeric = whole.group(1) + e_notation(whole.group(2))  # type: ignore[operator]
    if _NOT_FINITE.fullmatch(numeric):
        return Invalid("not_finite", text=text)
    if _PLAIN.fullmatch(numeric):
        value = float(numeric)
        return value if math.isfinite(value) else Invalid("not_finite", text=text)  # 1e999
    times_ten = _TIMES_TEN.search(numeric)
    scientific = times_ten and Invalid("scientific_notation", times_ten.group(), times_ten.start(), text)
    if _HAS_DIGIT.search(numeric) and _ARITHMETIC.fullmatch(numeric):
        value = _arithmetic(numeric, text)
        return scientific if isinstance(value, Invalid) and scientific else value  # "2*1.5*10^3": not a caret
    if scientific:
        return scientific
    prefix = _ARITHMETIC_PREFIX.match(text).group().rstrip("-+*/( \t")  # type: ignore[union-attr]
    rest = text[len(prefix):].strip()
    if _HAS_DIGIT.search(prefix) and rest:  # "3 parsecs", "1.2 MS", "2*31.27e9 GB/ss"
        return Invalid("unknown_unit", rest, text=text)
    return Invalid("not_a_number", text=text)


def _arithmetic(numeric: str, text: str) -> float | Invalid:
    """Arithmetic of numbers through the formula parser, which caps sizes, nesting and exponents
    before computing anything; a power can still leave the real line ((-8)**(1/3))."""
    parsed = parse_formula(numeric, names=())
    if isinstance(parsed, Invalid):  # offsets count from the start of the answer, as numeric does
        return Invalid(parsed.code, parsed.detail, parsed.offset, text)
    expr = parsed.expr
    try:
        if expr.is_Rational:  # the usual case: rounded once, correctly (Python's int / int is)
            value = int(expr.p) / int(expr.q)
        else:  # a fractional power: 2**0.5, or (-8)**(1/3), which is complex
            re_part, im_part = expr.evalf(20).as_real_imag()
            if im_part != 0:
                return Invalid("complex", text=text)
            value = float(re_part)
    except (TypeError, ValueError, OverflowError, ArithmeticError, sp.SympifyError):
        return Invalid("not_finite", text=text)
    return value if math.isfinite(value) else Invalid("not_finite", text=text)


# --- tolerance ------------------------------------------------------------------------------------

# A question accepts an answer rounded to this many significant figures, unless it asks for an
# exact count. Rounding to n figures moves a number by at most half a unit in its n-th digit: at
# worst (a mantissa of 1.00...) 0.5 * 10**(1 - n) of it, so n figures need that relative tolerance.
FIGURES = 3
# How far from a whole number an exact count may lie: float noise only (4096 * 512 / 2048 is exact
# in floating point; 0.1 * 30 is 3.0000000000000004), never a rounding a student chose.
WHOLE_NOISE = 1e-9


@dataclass(frozen=True)
class Tolerance:
    """Accept ``reference * (1 +- rtol)``, or a closed range [low, high] where the book is vague.

    ``whole``: the question asks for an exact count, so only that whole number passes (``rtol``
    then only absorbs float noise). Build it with ``Tolerance.exact_count()``.
    ``kept_ends``: a range whose ends were placed with the rounding already allowed for (half way to a mistake that
    must be refused, never nearer the reference than 3-figure rounding): they are not rounded outward.
    ``rounded``: the count is a quotient rounded to a whole number (a floor or a ceiling: the sequences that fit), so
    an answer one away is told to check the rounding; a count of things counted (tokens accepted, hops) is not.
    """

    rtol: float = 0.02
    low: float | None = None
    high: float | None = None
    whole: bool = False
    kept_ends: bool = False
    rounded: bool = False

    def __post_init__(self) -> None:
        if self.whole and self.is_range:
            raise ValueError("an exact count has no range")

    @classmethod
    def figures(cls, n: int = FIGURES) -> Tolerance:
        """What an answer rounded to ``n`` significant figures needs: 3 figures is ±0.5%."""
        return cls(rtol=0.5 * 10.0 ** (1 - n))

    @classmethod
    def exact_count(cls, rounded: bool = False) -> Tolerance:
        """The exact whole number (up to float noise): for counts such as hops or devices (``rounded``: a quotient
        rounded to a whole number)."""
        return cls(rtol=WHOLE_NOISE, whole=True, rounded=rounded)

    @property
    def is_range(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def of_counts(self) -> bool:
        """A range of a few whole numbers ("56 or 57"): its ends are counts, not values a student rounds."""
        return self.is_range and float(self.low).is_integer() and float(self.high).is_integer() \
            and self.high - self.low <= 4  # type: ignore[operator]

    def bounds(self, reference: float) -> tuple[float, float]:
        """The accepted interval. A range's end that is a computed value (ch02-q6's no-overlap sum, 0.124882 s)
        reaches to that value rounded to ``FIGURES`` significant figures (0.125), as a relative tolerance
        accepts that rounding of the reference; an end the book prints (20, 1.6e10) is its own rounding, and a
        range of counts ("56 or 57") has no rounding to honour."""
        if self.is_range:
            lo, hi = self.low, self.high
            if self.of_counts or self.kept_ends:
                return lo, hi  # type: ignore[return-value]
            return min(lo, round_figures(lo)), max(hi, round_figures(hi))  # type: ignore[arg-type,type-var]
        a, b = reference * (1 - self.rtol), reference * (1 + self.rtol)
        return min(a, b), max(a, b)

    def relative(self) -> Tolerance:
        """The same relative tolerance without the range: for matching slips and alternatives."""
        return Tolerance(rtol=self.rtol, whole=self.whole, rounded=self.rounded)

    def accepts(self, reference: float, value: float) -> bool:
        lo, hi = self.bounds(reference)
        return lo <= value <= hi

    def honours_rounding(self, reference: float, figures: int = FIGURES) -> bool:
        """Whether an honest answer rounded to ``figures`` significant figures passes. A relative
        tolerance must be at least as wide as that rounding for any reference; a range (the book's
        own words) must hold the rounded reference."""
        if self.whole:
            return False
        if self.is_range:  # the range as written: the rounding ``bounds`` adds to its ends is not the book's
            return self.low <= round_figures(reference, figures) <= self.high  # type: ignore[operator]
        return self.rtol >= Tolerance.figures(figures).rtol * (1 - 1e-12)

    def describe(self) -> str:
        """What the tolerance accepts, in a student's words and without the reference, to follow
        "the question accepts": "3 significant figures (±0.5%)", "±2%", "the exact whole number",
        "only values within a set range" (where the book itself gives a range or several answers)."""
        if self.whole:
            return "the exact whole number"
        if self.is_range:
            return "only values within a set range"
        if self.rtol < 1e-4:  # a function's computed output, compared to float rounding
            return "the exact value (up to float rounding)"
        percent = f"±{self.rtol * 100:.3g}%"
        figures = 1 - math.log10(2 * self.rtol) if self.rtol > 0 else 0.0
        n = round(figures)
        if n >= 1 and abs(figures - n) < 1e-9:
            return f"{n} significant figure{'s' if n > 1 else ''} ({percent})"
        return percent


def round_figures(x: float, figures: int = FIGURES) -> float:
    """``x`` rounded to ``figures`` significant figures, in decimal, as a student would write it."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{figures - 1}e}")
