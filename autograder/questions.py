"""Question records: a question is defined once, as data plus a reference, in ``solutions/``.

Everything else derives from the record: the nbgrader grade id and points of its test cell, the
self-check fingerprints in the release, the grader's verdict. Authoring mistakes (a bad id, a
reference that uses an undeclared symbol, a slip that is actually correct) fail at import and name
the question.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal
from typing import Any, ClassVar

import sympy as sp

from .numbers import FIGURES, Tolerance, unit_dimension

QID = re.compile(r"^ch(\d\d)-[a-z0-9]+-[a-z0-9][a-z0-9_-]*$")
# A question's check as a test cell writes it, a line of its own (spaces inside the call as a student's editor
# leaves them): the release, the demo and the self-check read test cells by it.
CHECK_LINE = re.compile(r'^check\(\s*"(?P<qid>[^"]+)"\s*,\s*(?P<var>[A-Za-z_]\w*)\s*\)[ \t]*$', re.M)
BOOK = "https://jax-ml.github.io/scaling-book/"


BYTE_SLIPS = (2, 0.5, 8, 0.125)  # factors of a value in bytes that slips of any question reach (``told_as_possible``)


class AuthoringError(ValueError):
    """A question record is malformed: a course bug, never a student's."""


@dataclass(frozen=True)
class Slip:
    """A typical wrong answer. Tests prove the engine rejects it with ``diagnosis``; a ``hint``,
    if given, is shown to a student who gives exactly this answer (fingerprinted, so no leak).
    ``maybe``: other simple mistakes reach the same value, so the hint is told as one possible cause, not as the
    student's. A number question sets it itself where it can tell, at its own values (``Number.told_as_possible``):
    an author sets it for a collision the question cannot see (a slip of another question).
    ``narrow``: a function's slip that is wrong by its nature in only a few kinds of case (the one case where nothing
    fits), said in a sentence: its drawn cases need fail it only once, where every other slip fails at least half of
    them (``kinds.function._slips_share``). Keep it rare: a function is scored by the share of cases it passes.
    ``near``: how near a function's results must be to this slip's for its hint (relative; 0: ``SLIP_RTOL``), where
    the answers are measured (XLA's counts) and the slip is predicted by a formula, as the reference is."""

    answer: Any
    diagnosis: str
    hint: str = ""
    maybe: bool = False
    narrow: str = ""
    near: float = 0.0

    @property
    def told(self) -> str:
        """The hint as the student reads it after "Hint: "."""
        return hedged(self.hint) if self.maybe and self.hint else self.hint


MAYBE = "one possible cause (other mistakes give this value too): "


def hedged(hint: str) -> str:
    """A hint told as one possible cause (said once, where it is hedged already)."""
    return hint if hint.startswith(MAYBE) else MAYBE + hint


@dataclass(frozen=True)
class Accept:
    """Another answer worth ``credit`` (a fraction), e.g. the leading order where the exact form is
    asked. The ``message`` says what is missing for full credit."""

    answer: Any
    credit: float
    message: str


@dataclass(frozen=True, kw_only=True)
class Question:
    qid: str
    points: float
    prompt: str  # one line: what is asked, shown in tables and feedback (no answer in it)
    section: str = ""  # the book page and anchor, e.g. "roofline#..." (linked in feedback)
    hint: str = ""  # unlocked after a first wrong attempt; derived from the record when empty (hints.py)
    slips: tuple[Slip, ...] = ()
    accept: tuple[Accept, ...] = ()
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not QID.match(self.qid):
            raise AuthoringError(f"{self.qid}: ids look like ch01-e3-critical-batch "
                                 "(lower case letters, digits, - and _)")
        if not self.points > 0:
            raise AuthoringError(f"{self.qid}: points must be positive")
        if not self.slips:
            raise AuthoringError(f"{self.qid}: list at least one typical wrong answer (slips=...)")
        if self.kind != "number" and any(s.maybe for s in self.slips):
            raise AuthoringError(f"{self.qid}: maybe=True is read only by number questions")
        for a in self.accept:
            if not 0 < a.credit < 1:
                raise AuthoringError(f"{self.qid}: partial credit must lie strictly between 0 and 1")

    @property
    def url(self) -> str:
        return BOOK + self.section if self.section else BOOK

    @property
    def chapter(self) -> str:
        return self.qid.split("-", 1)[0]


@dataclass(frozen=True, kw_only=True)
class Formula(Question):
    """A sympy expression over the book's symbols, checked for equivalence on their domains."""

    reference: sp.Expr
    symbols: str  # the names a student may use, space separated: "B D F"
    counts: str = ""  # those of them that are integer counts >= 2 (device counts, ring sizes)
    # Symbols whose large limit the reference is (the book's "for large N" form): an answer that
    # agrees where these symbols are huge, such as the exact (N-1)/N form, is right too.
    limit: str = ""
    # The exact expression of which the reference is the book's large-N form, where it is not the reference times
    # (N-1)/N for each ``limit`` symbol (that product is the default): a max whose communication term alone carries
    # the ring's (X-1)/X, or a fixed ring of 64 chips, 63/64. Right too.
    exact_form: Any = None
    kind: ClassVar[str] = "formula"

    def __post_init__(self) -> None:
        super().__post_init__()
        names = set(self.names)
        if not set(self.counts.split()) <= names:
            raise AuthoringError(f"{self.qid}: counts must be among the declared symbols")
        if not set(self.limit.split()) <= names:
            raise AuthoringError(f"{self.qid}: limit symbols must be among the declared symbols")
        if not set(self.limit.split()) <= set(self.counts.split()):  # (N-1)/N is 0 at N = 1: a limit is a count
            raise AuthoringError(f"{self.qid}: limit symbols must be among the counts (integers >= 2)")
        used = {s.name for s in sp.sympify(self.reference).free_symbols}
        if not used <= names:
            raise AuthoringError(f"{self.qid}: reference uses undeclared symbols {sorted(used - names)}")
        if self.exact_form is not None and not {s.name for s in sp.sympify(self.exact_form).free_symbols} <= names:
            raise AuthoringError(f"{self.qid}: exact_form uses undeclared symbols")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.symbols.split())


def _one_rounding(a: float, b: float, figures: int) -> bool:
    """Whether ``a`` and ``b`` rounded to ``figures`` significant figures can be written alike (either way where
    what ``a`` drops is exactly a 5): a student who rounds the reference to fewer figures than the question asks
    then writes the slip's value too (0.28 ms for 0.2836 ms, and for a slip at 0.2796 ms), so its hint is one possible
    cause, not theirs."""
    if not (a and b and math.isfinite(a) and math.isfinite(b)):
        return False
    d = Decimal(repr(a))
    place = Decimal(1).scaleb(d.adjusted() - figures + 1)
    ways = {d.quantize(place, ROUND_HALF_UP), d.quantize(place, ROUND_HALF_DOWN)}
    return any(abs(Decimal(repr(b)) - x) <= place / 2 for x in ways)


def _float_or_none(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass(frozen=True, kw_only=True)
class Number(Question):
    """A number in ``unit`` ("" for a plain number), within a relative tolerance or a range.

    Fair rounding: a student who rounds to 3 significant figures must pass, so a relative tolerance
    is at least ±0.5% and a range holds the reference so rounded. Two exceptions, each stated in the
    prompt, since the student cannot guess it: a count that must be exact (hops, devices, steps),
    ``exact=True``, asks for the whole number itself ("how many", "exact"); and a question whose 3
    figures would be a giveaway (a model's parameter count, which to 3 figures is the size in its name,
    13.0e9 for LLaMA 2-13B) asks for more, "to 4 significant figures", and its tolerance honours that.
    """

    reference: float
    unit: str = ""
    tolerance: Tolerance = field(default_factory=Tolerance)
    exact: bool = False  # an exact count: only the whole number passes (the tolerance is set from it)
    # The answer may be below zero (a change, a difference); else a negative reference is an authoring mistake (a
    # setting's value that makes a time or a size negative), refused at import.
    negative: bool = False
    kind: ClassVar[str] = "number"
    # How the prompt of an exact count tells the student that rounding will not do.
    exact_words: ClassVar[re.Pattern[str]] = re.compile(r"\b(exact|exactly|how many)\b", re.IGNORECASE)
    # How the prompt of a question that asks for more than 3 figures says so.
    figures_words: ClassVar[re.Pattern[str]] = re.compile(r"\b(\d+) significant figures\b", re.IGNORECASE)

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            unit_dimension(self.unit)
        except ValueError as e:
            raise AuthoringError(f"{self.qid}: {e}") from None
        try:
            reference = float(self.reference)
        except (TypeError, ValueError, OverflowError):
            reference = math.nan
        if not math.isfinite(reference):
            raise AuthoringError(f"{self.qid}: the reference {self.reference!r} is not a finite number")
        if reference < 0 and not self.negative:
            raise AuthoringError(f"{self.qid}: the reference {reference:g} is negative: check the values it is "
                                 "computed from, or, for a quantity that may be below zero, say negative=True")
        if reference == 0 and not (self.exact or self.tolerance.is_range):
            raise AuthoringError(f"{self.qid}: a relative tolerance of a reference of 0 accepts 0 alone: give a "
                                 "range, Tolerance(low=..., high=...), or ask for a quantity that is not 0")
        if self.exact:
            if not reference.is_integer():
                raise AuthoringError(f"{self.qid}: exact=True is for counts; {self.reference!r} is not a whole number")
            if not self.exact_words.search(self.prompt):
                raise AuthoringError(f"{self.qid}: an exact count must say so in its prompt "
                                     "(\"how many ...\", or \"(exact)\")")
            if self.tolerance not in (Tolerance(), Tolerance.exact_count(), Tolerance.exact_count(rounded=True)):
                raise AuthoringError(f"{self.qid}: exact=True sets the tolerance; give no other (but "
                                     "Tolerance.exact_count(rounded=True), for a quotient rounded to a count)")
            object.__setattr__(self, "tolerance", Tolerance.exact_count(self.tolerance.rounded))  # frozen: set once
        elif self.tolerance.whole:
            raise AuthoringError(f"{self.qid}: an exact-count tolerance needs exact=True (and a prompt that says so)")
        elif not self.tolerance.honours_rounding(reference, self.figures):
            fair = Tolerance.figures(self.figures)
            raise AuthoringError(f"{self.qid}: {self.tolerance} rejects an answer rounded to {fair.describe()}; "
                                 "widen it to Tolerance.figures(), ask for more figures in the prompt (\"to 4 "
                                 "significant figures\"), or, for a count, declare exact=True")
        if not self.tolerance.accepts(reference, reference):
            raise AuthoringError(f"{self.qid}: the reference lies outside its own tolerance")
        object.__setattr__(self, "slips", tuple(self.told_as_possible(reference)))  # frozen: set once, here

    # A question whose value is bytes, bytes over a link, or the time they take: forgetting bf16's 2 bytes (or
    # counting f32's 4), or one direction of a link for both, gives twice or half its value, and bits counted as
    # bytes (or bytes as bits) 8 times or an eighth, whatever the slip.
    byte_units: ClassVar[tuple[str, ...]] = ("B", "B/s")
    byte_words: ClassVar[re.Pattern[str]] = re.compile(r"\b(bytes?|bandwidth|links?|comms|communication)\b",
                                                       re.IGNORECASE)

    def told_as_possible(self, reference: float) -> list[Slip]:
        """The slips, each with a hint marked ``maybe`` where other simple mistakes reach its value at this
        question's values: one more or one less than an exact count, 2, 8, 1/2 or 1/8 times a value in bytes
        (``BYTE_SLIPS``), the reference rounded to fewer figures than the question asks (``_one_rounding``: 13e9 for
        a count of 13.0154e9, whose prompt asks for 4), and another slip's value to within 1% (a student's 3
        figures cannot tell them apart).
        Computed from the question itself, so that every variant's values are weighed, not the book's alone: with
        |X| = 2, "B is not split along X" halves a size as bf16's 2 bytes do."""
        in_bytes = self.unit in self.byte_units or bool(self.byte_words.search(self.prompt))
        values = [_float_or_none(s.answer) for s in self.slips]
        out = []
        for i, (s, v) in enumerate(zip(self.slips, values, strict=True)):
            if s.hint and not s.maybe and v is not None and (
                    (self.exact and abs(v - reference) == 1)
                    or (not self.exact and any(_one_rounding(reference, v, n) for n in range(2, self.figures)))
                    or (in_bytes and any(math.isclose(v, k * reference) for k in BYTE_SLIPS))
                    or any(j != i and w is not None and math.isclose(v, w, rel_tol=0.01) and t.hint != s.hint
                           for j, (t, w) in enumerate(zip(self.slips, values, strict=True)))):
                s = dataclasses.replace(s, maybe=True)
            out.append(s)
        return out

    @property
    def figures(self) -> int:
        """The significant figures a student's answer must have: 3, or more where the prompt asks for more."""
        stated = [int(m.group(1)) for m in self.figures_words.finditer(self.prompt)]
        return max([FIGURES, *stated])


@dataclass(frozen=True, kw_only=True)
class Choice(Question):
    """One option id out of ``options``; compared exactly (case and surrounding spaces ignored)."""

    reference: str
    options: tuple[str, ...]
    # Where the options are amounts of one unit ('450', '370' or '150' GB/s): that unit, so that an answer written
    # with it, or with another of its kind ("0.15 TB/s"), is the option of that amount.
    unit: str = ""
    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reference not in self.options:
            raise AuthoringError(f"{self.qid}: the reference is not one of the options")
        if self.unit:
            from .numbers import UNITS, ParsedNumber, parse_number

            if self.unit not in UNITS or not all(isinstance(parse_number(o, ""), ParsedNumber) for o in self.options):
                raise AuthoringError(f"{self.qid}: a unit is for options that are amounts, in a unit the course reads "
                                     f"(such as 'GB/s'): {self.unit!r}")
        spelled = [option_key(o) for o in self.options]
        if len(set(spelled)) < len(spelled):
            raise AuthoringError(f"{self.qid}: two options read the same when case, spaces, hyphens, "
                                 "underscores and a last word 'bound' are ignored")


def option_key(text: str) -> str:
    """What two spellings of one option share: "AllReduce", "all reduce" and "all-reduce" are one; so are a
    mesh's "16x4" and "16×4", "memory" and "memory-bound" (the word a bound question leaves implied), and an
    option with commas, pluses or a full stop ("heads, then batch", "tp8 + pp8", "no."). The
    numbers in an option are read by value ("16x4.0" and "16.0x4" are "16x4", "dp4-mp2.0" is "dp4-mp2": what
    ``Y = N / X`` gives in Python 3), before the separators go, so that "4.0-2" stays two numbers."""
    key = _OPTION_NUMBER.sub(_number_key, text.lower().replace("\u00d7", "x"))
    key = re.sub(r"[\s\-_,+]+", "", key).rstrip(".!")  # "heads, then batch", "tp8+pp8" and "no." too
    return key.removesuffix("bound") or key


# A decimal number inside an option: ASCII digits, a fraction only after a point with digits on both sides, and
# not part of a longer run of digits and points ("1.2.3" is no number).
_OPTION_NUMBER = re.compile(r"(?<![0-9.])([0-9]+)(?:\.([0-9]+))?(?![0-9]|\.[0-9])")


def _number_key(m: re.Match[str]) -> str:
    """A number by its value: no leading zeros, no trailing zeros after the point ("04" and "4.00" are "4")."""
    whole, fraction = m.group(1).lstrip("0") or "0", (m.group(2) or "").rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


@dataclass(frozen=True)
class Output:
    """How one returned value of a student's function is judged: as a ``number`` (a list of
    numbers is judged element by element) or as a ``formula`` over ``symbols``."""

    kind: str  # "number" or "formula"
    unit: str = ""
    tolerance: Tolerance = field(default_factory=Tolerance)
    symbols: str = ""


@dataclass(frozen=True, kw_only=True)
class Function(Question):
    """A Python function the student writes, called in their notebook on public ``probes`` (each a
    dict of keyword arguments); each result is judged against ``reference(**probe)`` as ``output``
    judges a single answer. The self-check judges the public probes. The grade is the fraction passed
    of other test cases, drawn at grading time from a seed the notebook never sees: one like each
    public probe, made by ``draw`` (which must keep every constraint the prompt states)."""

    reference: Callable[..., Any]
    probes: tuple[dict[str, Any], ...]
    output: Output | tuple[Output, ...]  # how to judge each returned item
    # Name of a function in ``autograder.probes`` that turns a probe into the call's arguments in the
    # student's kernel (e.g. random arrays of the probe's shapes); "" calls ``f(**probe)``.
    builder: str = ""
    # A correct implementation with the student's signature (tests and the demo call it);
    # defaults to ``reference`` where the signatures agree.
    model: Callable[..., Any] | None = None
    # draw(rng, probe) -> a fresh probe of the same kind (JSON data, never equal to a public probe).
    # None: ``kinds.function.vary``, which rescales the probe's floats and keeps the rest.
    draw: Callable[[random.Random, dict[str, Any]], dict[str, Any]] | None = None
    # Numeric inputs the answer may ignore in most drawn cases and still be right, each with why in a sentence: one
    # that counts in one regime alone (a hop latency, in the latency-bound cases), or one the result never depends on
    # (flash attention's chunk). Every other numeric input is drawn so that an answer that freezes it (at any value it
    # takes in the probes or the student's cases, at their median, at 1, at twice or half the median) fails most of a
    # student's cases (tests/test_ignored_inputs.py).
    narrow_inputs: tuple[tuple[str, str], ...] = ()
    # How many cases are drawn at grading time, like the probes in turn; 0: one like each probe. More where a few
    # cases cannot keep each input from being written in (an input picked from 3 values fills 2 of 3 cases at most
    # draws: drawn again until it fills at most half, ``kinds.function._frozen_share``).
    cases: int = 0
    kind: ClassVar[str] = "function"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cases and self.cases < len(self.probes):
            raise AuthoringError(f"{self.qid}: cases counts the drawn cases, at least one like each probe")
        for name, why in self.narrow_inputs:
            if not why or any(name not in p for p in self.probes):
                raise AuthoringError(f"{self.qid}: a narrow input names an argument of every probe, and says why: "
                                     f"{name!r}")

    @property
    def solution(self) -> Callable[..., Any]:
        return self.model or self.reference

    @property
    def outputs(self) -> tuple[Output, ...]:
        return self.output if isinstance(self.output, tuple) else (self.output,)


@dataclass(frozen=True)
class Operand:
    """One input of a program question: global shape, sharding spec (mesh axis names or None per
    dimension: the book's X[B, D_X] is (None, "X")), dtype, and optionally the shape the einsum sees
    (``view``: e.g. (8, 8, 32) for a [64, 32] array of 8 stacked partial sums, einsum "kbd->bd")."""

    shape: tuple[int, ...]
    spec: tuple[str | None, ...]
    dtype: str = "float32"
    view: tuple[int, ...] | None = None


@dataclass(frozen=True)
class MeshChoice:
    """A mesh shape the student may choose for a program question, and the collectives expected there (None:
    the spec's own). A collective over an axis of size 1 moves nothing, and a program written for that shape
    may leave it out: such a shape states its own counts."""

    mesh: tuple[tuple[str, int], ...]
    collectives: dict[str, int | tuple[int, int | None]] | None = None
    # Where a right step at this shape breaks a rule of the exercise all the same (it fits a budget, but so does a
    # shape the prose asks for instead): why, in a sentence the verdict ends with; such a step earns half.
    earns_half: str = ""


def _axes_of(entry: Any) -> tuple[str, ...]:
    """The mesh axes one entry of a sharding spec names: None, "X", or ("X", "Y")."""
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


@dataclass(frozen=True)
class ProgramSpec:
    """What a program question asks for; all of it is public (it is the problem statement), so the
    release carries it and the self-check can run the student's function offline."""

    mesh: tuple[tuple[str, int], ...]  # (("X", 8),)
    operands: tuple[Operand, ...]
    einsum: str  # what the program computes, e.g. "bd,df->bf"; with ``reference``, that computation in words
    # Expected sharding of the result, () fully replicated; with named ``outputs``, one spec per output.
    out_spec: tuple[Any, ...]
    # Collectives by kind: an exact count, or an inclusive (low, high) range (high None: no limit).
    # Kinds not named must be absent.
    collectives: dict[str, int | tuple[int, int | None]]
    rtol: float = 1e-4
    atol: float = 1e-4
    out_shape: tuple[int, ...] | None = None  # reshape of the einsum's result, when it differs
    # A block that is not one einsum (an MLP, attention, a gradient): the name of its single-device
    # reference in ``autograder/program_references/``, computed on the operands in place of the einsum.
    reference: str = ""
    # A program that returns several arrays (a train step's loss and gradients): their names, in the order
    # the function returns them and the reference computes them; ``out_spec`` then holds one spec per name.
    outputs: tuple[str, ...] = ()
    # Per device, the most bytes the compiled program may hold in its results and temporaries (its memory
    # analysis), for exercises whose point is memory (a cache that must stay sharded); ``over_memory`` says
    # what holding more most likely means.
    max_bytes: int | None = None
    over_memory: str = ""
    # What wrong collective counts most likely mean for this program (a pipeline's permutes are its ticks),
    # added to the message that lists them.
    collectives_note: str = ""
    # The mesh shapes a student chooses among, where the choice is part of the exercise (the shape whose step
    # fits a memory budget): the answer names its shape (``kinds.program``), and the program is exported, run
    # and judged at that one (``at``). ``mesh`` is then one of them: the model's.
    mesh_choices: tuple[MeshChoice, ...] = ()
    # The bytes the collectives may move are the model's (``model_traffic``) times ``traffic_slack``: the same
    # algorithm written otherwise moves the same bytes, where the wasteful programs that made the rule moved 1.4x
    # to 8x; a question that leaves the size of its buffers to the student (room for any routing) allows more.
    traffic_slack: float = 1.25
    # The question asks for both directions of every link at once (a bidirectional ring): the busier direction
    # is weighed too, so a ring that sends everything one way does not pass for one.
    both_ways: bool = False
    # The question asks for a program whose collectives the compiler places (a sharding constraint): elsewhere the
    # collectives it counts are the student's to write inside ``shard_map``, and one the compiler placed in their
    # stead (a plain ``x @ y`` on sharded inputs, an in_spec that asks for a whole operand) earns half.
    compiler_places: bool = False

    def __post_init__(self) -> None:
        if self.outputs and (len(self.out_spec) != len(self.outputs) or not self.reference):
            raise AuthoringError(f"{len(self.outputs)} named outputs need a reference program and one out_spec each")
        if self.mesh_choices:
            self._check_choices()

    def _check_choices(self) -> None:
        """One function must run at every choice: the same axes in the same order, the same devices, and
        operands that every shape divides."""
        shapes = [c.mesh for c in self.mesh_choices]
        if self.mesh not in shapes:
            raise AuthoringError(f"the spec's mesh {self.mesh} must be one of its mesh_choices (the model's shape)")
        if len(set(shapes)) < len(shapes):
            raise AuthoringError("a mesh shape is listed twice in mesh_choices")
        names = [a for a, _ in self.mesh]
        devices = math.prod(n for _, n in self.mesh)
        for shape in shapes:
            if [a for a, _ in shape] != names:
                raise AuthoringError(f"mesh choice {shape}: every choice names the same axes, in order: {names}")
            if math.prod(n for _, n in shape) != devices:
                raise AuthoringError(f"mesh choice {shape}: every choice has {devices} devices")
            sizes = dict(shape)
            for op in self.operands:
                for n, entry in zip(op.shape, op.spec, strict=False):
                    if n % math.prod(sizes[a] for a in _axes_of(entry)):
                        raise AuthoringError(f"mesh choice {shape} does not divide operand {op.shape} @ {op.spec}")

    def at(self, mesh: Sequence[tuple[str, int]]) -> ProgramSpec:
        """This question at one of its mesh choices (KeyError for another): that mesh, the collectives expected
        there, and each result's sharding without the axes of size 1, which JAX leaves out of a sharding."""
        mesh = tuple((str(a), int(n)) for a, n in mesh)
        choice = next((c for c in self.mesh_choices if c.mesh == mesh), None)
        if choice is None:
            raise KeyError(f"{mesh} is not one of the mesh choices")
        trivial = {a for a, n in mesh if n == 1}

        def kept(spec: tuple[Any, ...]) -> tuple[Any, ...]:
            axes = [tuple(a for a in _axes_of(e) if a not in trivial) for e in spec]
            return tuple(None if not a else a[0] if isinstance(e, str) or len(a) == 1 else a
                         for e, a in zip(spec, axes, strict=True))

        out_spec = tuple(kept(s) for s in self.out_spec) if self.outputs else kept(self.out_spec)
        return dataclasses.replace(self, mesh=mesh, out_spec=out_spec, mesh_choices=(),
                                   collectives=self.collectives if choice.collectives is None else choice.collectives)

    @property
    def out_specs(self) -> tuple[tuple[Any, ...], ...]:
        """One expected sharding per result (a single result's is ``out_spec`` itself)."""
        return tuple(self.out_spec) if self.outputs else (self.out_spec,)

    def to_json(self) -> dict[str, Any]:
        out_spec = [list(s) for s in self.out_spec] if self.outputs else list(self.out_spec)
        return {"mesh": [list(a) for a in self.mesh], "einsum": self.einsum, "out_spec": out_spec,
                **({"reference": self.reference} if self.reference else {}),
                **({"outputs": list(self.outputs)} if self.outputs else {}),
                **({"max_bytes": self.max_bytes, "over_memory": self.over_memory} if self.max_bytes else {}),
                **({"collectives_note": self.collectives_note} if self.collectives_note else {}),
                **({"mesh_choices": [{"mesh": [list(a) for a in c.mesh],
                                      "collectives": None if c.collectives is None else _counts_json(c.collectives),
                                      **({"earns_half": c.earns_half} if c.earns_half else {})}
                                     for c in self.mesh_choices]} if self.mesh_choices else {}),
                "operands": [{"shape": list(o.shape), "spec": list(o.spec), "dtype": o.dtype,
                              "view": None if o.view is None else list(o.view)} for o in self.operands],
                "collectives": _counts_json(self.collectives),
                "rtol": self.rtol, "atol": self.atol,
                "out_shape": None if self.out_shape is None else list(self.out_shape),
                **({"traffic_slack": self.traffic_slack} if self.traffic_slack != 1.25 else {}),
                **({"both_ways": True} if self.both_ways else {}),
                **({"compiler_places": True} if self.compiler_places else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProgramSpec:
        def spec(entries: list) -> tuple:  # JSON turns a dimension split over two axes, ("X", "Y"), into a list
            return tuple(tuple(e) if isinstance(e, list) else e for e in entries)

        operands = tuple(Operand(tuple(o["shape"]), spec(o["spec"]), o["dtype"],
                                 None if o.get("view") is None else tuple(o["view"])) for o in d["operands"])

        def counts(c: dict[str, Any]) -> dict[str, Any]:
            return {k: tuple(v) if isinstance(v, list) else v for k, v in c.items()}

        def mesh(axes: list) -> tuple[tuple[str, int], ...]:
            return tuple((str(n), int(k)) for n, k in axes)

        outputs = tuple(str(n) for n in d.get("outputs") or ())
        out_spec = tuple(spec(s) for s in d["out_spec"]) if outputs else spec(d["out_spec"])
        choices = tuple(MeshChoice(mesh(c["mesh"]), None if c.get("collectives") is None else counts(c["collectives"]),
                                   str(c.get("earns_half") or "")) for c in d.get("mesh_choices") or ())
        return cls(mesh(d["mesh"]), operands, d["einsum"], out_spec,
                   counts(d["collectives"]), d["rtol"], d["atol"],
                   None if d.get("out_shape") is None else tuple(d["out_shape"]),
                   str(d.get("reference") or ""), outputs,
                   None if d.get("max_bytes") is None else int(d["max_bytes"]), str(d.get("over_memory") or ""),
                   str(d.get("collectives_note") or ""), choices, float(d.get("traffic_slack", 1.25)),
                   bool(d.get("both_ways", False)), d.get("compiler_places") is True)


def _counts_json(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in counts.items()}


@dataclass(frozen=True, kw_only=True)
class Program(Question):
    """A JAX function the student writes for a mesh of simulated devices. Graded on the program
    itself: exported (lowered) in the student's kernel, then run and inspected in a separate
    process on fresh random inputs: numerics against ``einsum`` (or its single-device ``reference``),
    output sharding, collectives."""

    spec: ProgramSpec
    model: Callable[..., Any] | None = None  # a correct implementation (tests and the demo)
    kind: ClassVar[str] = "program"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.spec.reference:  # here, where records are written, not in ProgramSpec: jailed processes build those
            from .program_references import REFERENCES

            if self.spec.reference not in REFERENCES:
                raise AuthoringError(f"{self.qid}: no reference program {self.spec.reference!r}; known: "
                                     f"{', '.join(REFERENCES)}")
        # A program is matched to a slip by its diagnosis (kinds/program.py), so a hint must belong to a
        # diagnosis no other slip of the question has; one of wrong values is matched by the values themselves, the
        # slip's results at the self-check's inputs (``reference_results.slips_name``).
        for s in self.slips:
            if s.hint and not s.diagnosis.startswith("wrong_values") \
                    and sum(t.diagnosis == s.diagnosis for t in self.slips) > 1:
                raise AuthoringError(f"{self.qid}: the hint of the slip {s.diagnosis!r} cannot tell it from other "
                                     "wrong programs; give hints only to a diagnosis one slip has")

    @property
    def solution(self) -> Callable[..., Any]:
        if self.model is None:
            raise AuthoringError(f"{self.qid}: a program question needs a model solution")
        return self.model


@dataclass(frozen=True)
class Chapter:
    """A chapter's questions in the prose's order. An item is a question, or a ``variants.Setting``: a
    group of questions built from values dealt per student. ``choice`` names the values of each
    setting (labels, by setting name; a setting not named takes the book's), and ``questions`` holds
    the records built for them: ``variant`` makes a student's chapter from the book's."""

    name: str  # the nbgrader assignment and notebook name, e.g. "ch01_rooflines"
    title: str
    items: tuple[Any, ...]
    choice: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    questions: tuple[Question, ...] = field(init=False)

    def __post_init__(self) -> None:
        from .variants import Setting

        unknown = sorted(set(self.choice) - {s.name for s in self.settings})
        if unknown:
            raise KeyError(f"{self.name} has no setting {unknown[0]!r}")
        built: list[Question] = []
        for item in self.items:
            if isinstance(item, Setting):
                built += item.questions(self.choice.get(item.name))
            elif isinstance(item, Question):
                built.append(item)
            else:
                raise AuthoringError(f"{self.name}: {item!r} is neither a question nor a setting")
        object.__setattr__(self, "questions", tuple(built))  # frozen: set once, here
        seen: set[str] = set()
        for q in self.questions:
            if q.qid in seen:
                raise AuthoringError(f"{q.qid}: defined twice in {self.name}")
            if q.chapter != self.name[:4]:
                raise AuthoringError(f"{q.qid}: belongs to {q.chapter}, not {self.name}")
            seen.add(q.qid)
        for s in self.settings:
            if not s.name.startswith(self.name[:4] + "-"):
                raise AuthoringError(f"setting {s.name}: names start with the chapter's prefix, {self.name[:4]}-")

    def __getitem__(self, qid: str) -> Question:
        for q in self.questions:
            if q.qid == qid:
                return q
        raise KeyError(qid)

    @property
    def settings(self) -> tuple[Any, ...]:
        from .variants import Setting

        return tuple(i for i in self.items if isinstance(i, Setting))

    def setting_of(self, qid: str) -> Any:
        """The setting that builds question ``qid``, or None (the same for every student)."""
        return next((s for s in self.settings if qid in s.qids), None)

    def variant(self, choice: Mapping[str, Mapping[str, Any]]) -> Chapter:
        """This chapter with each named setting's records built for its values (labels)."""
        return Chapter(self.name, self.title, self.items, dict(choice)) if choice else self

    @property
    def total_points(self) -> float:
        return sum(q.points for q in self.questions)


def load_chapter(name: str) -> Chapter:
    """The chapter record of ``solutions/<name>.py`` (its module-level ``CHAPTER``)."""
    module = importlib.import_module(f"solutions.{name}")
    chapter = getattr(module, "CHAPTER", None)
    if not isinstance(chapter, Chapter):
        raise AuthoringError(f"solutions/{name}.py must define CHAPTER = Chapter(...)")
    if chapter.name != name:  # the notebook, the release and each student's deal go by the module's name
        raise AuthoringError(f"solutions/{name}.py defines Chapter({chapter.name!r}, ...): name it {name!r}, as its "
                             "module")
    return chapter


def chapter_names() -> Sequence[str]:
    import pkgutil

    import solutions

    return sorted(m.name for m in pkgutil.iter_modules(solutions.__path__) if re.match(r"ch\d\d_", m.name))
