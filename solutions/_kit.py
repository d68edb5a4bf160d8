"""What every chapter's records are written with: the record types, shared tolerances, the Number
shorthand, the variant settings, and the mesh and ``shard_map`` helpers of the program models.

A chapter module opens with ``from solutions._kit import *`` and reads as its list of questions: the names
below (``__all__``) are the whole authoring vocabulary, so a new chapter copies one line, not a preamble.
``P`` (``PartitionSpec``) and ``NamedSharding`` are imported by name where a chapter uses them, since ``P`` is
also a symbol of the book (and ``NamedSharding`` comes with it, as a notebook imports both from ``jax.sharding``).
``course`` is not here: a records module imports it, as the notebook does, since its models build their mesh
with ``course.mesh(...)``.

JAX is imported on first use, here and nowhere else in ``solutions``: the grader imports every chapter
in its judging process, which must not pay for starting JAX. Chapters use ``jax``, ``jnp`` and ``P``
from this module as they would the real ones; the import happens when a model first runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import math
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from autograder.kinds.function import vary as rescaled
from autograder.numbers import Tolerance
from autograder.questions import (
    Accept,
    Chapter,
    Choice,
    Formula,
    Function,
    Number,
    Operand,
    Output,
    Program,
    ProgramSpec,
    Question,
    Slip,
)
from autograder.variants import chips, models, values, vary
from course import hardware as hw

__all__ = [
    # the record types
    "Accept", "Chapter", "Choice", "Formula", "Function", "Number", "Operand", "Output", "Program", "ProgramSpec",
    "Question", "Slip", "Tolerance",
    # settings a variant draws from
    "chips", "models", "values", "vary",
    # the hardware table, tolerances, and shorthands defined here
    "hw", "EXACT", "ROUNDED_COUNT", "ROUNDED_EXACT", "THREE_FIGURES", "ONE_PERCENT", "TWO_PERCENT", "rate_tolerance",
    "largest_degree",
    "refusing", "least_count", "int8_twice_bf16", "X8", "number", "slips", "slip_code", "reshard_spec", "count_of",
    "BOOK_H100_TP_DIVISOR", "like_probes", "with_choices", "BYTES_PER_ELEMENT", "WIDTHS",
    # JAX on first use, and the program models' helpers
    "jax", "jnp", "smap", "make_mesh", "own_block", "ring", "compiled_cost", "attend_heads", "gathered_cache_decode",
]

# --- tolerances ---------------------------------------------------------------------------------------------
EXACT = Tolerance(rtol=1e-9)  # what a function computes exactly (counts, byte sizes, matrices): float noise only
# A count that is a quotient rounded to a whole number (the sequences that fit): an answer one away is told to check
# the rounding, floor against round. ROUNDED_EXACT for a function's output, ROUNDED_COUNT for a number's exact=True.
ROUNDED_EXACT = Tolerance(rtol=1e-9, rounded=True)
ROUNDED_COUNT = Tolerance.exact_count(rounded=True)
THREE_FIGURES = Tolerance.figures()  # the least a number may have: a student may round to 3 figures (±0.5%)
ONE_PERCENT = Tolerance(rtol=0.01)
TWO_PERCENT = Tolerance(rtol=0.02)  # Number's default


def largest_degree(bound: float, tolerance: Tolerance = TWO_PERCENT) -> Tolerance:
    """The tolerance of a largest degree (of tensor or model parallelism) whose bound is rarely a whole number: the
    bound within ``tolerance``, and the whole number below it too, the largest degree a mesh axis can have. Both
    show the idea; a prompt that asked for one of them would be a convention the student cannot guess."""
    low, high = tolerance.bounds(bound)
    return Tolerance(low=min(low, math.floor(bound)), high=high)


def least_count(bound: float, tolerance: Tolerance = THREE_FIGURES) -> Tolerance:
    """The tolerance of a count above which something holds (a chip count past a crossover), whose bound is rarely
    a whole number: the bound within ``tolerance``, and the whole number above it too, the fewest chips that pass
    it (``largest_degree``'s mirror)."""
    low, high = tolerance.bounds(bound)
    return Tolerance(low=low, high=max(high, math.ceil(bound)))


def refusing(reference: float, wrong: float | Sequence[float], tolerance: Tolerance = TWO_PERCENT) -> Tolerance:
    """``tolerance``, each end moved half way to the nearest ``wrong`` value on its side where that is nearer: for a
    sum one of whose terms the prompt names, whose share of the sum moves with a student's values, so that leaving
    it out is refused at every choice of a setting, not only where the share is above the tolerance; and counting
    it twice, the same distance on the other side (each wrong value's mirror). Never nearer than 3-figure rounding:
    a term below 0.5% cannot be told from rounding (keep such choices out with ``valid``)."""
    low, high = tolerance.bounds(reference)
    fair = THREE_FIGURES.rtol * abs(reference)
    given = (wrong,) if isinstance(wrong, int | float) else tuple(wrong)
    for w in given + tuple(2 * reference - w for w in given):
        if w < reference:
            low = max(low, min((reference + w) / 2, reference - fair))
        else:
            high = min(high, max((reference + w) / 2, reference + fair))
    return Tolerance(low=low, high=high, kept_ends=True)


def int8_twice_bf16(chip: hw.Chip) -> bool:
    """On such a chip, a time or a batch off by a factor of 2 may be the int8 peak taken for the bf16 one: there a
    factor-of-2 slip's hint is one possible cause (``Slip.maybe``), elsewhere the cause."""
    int8 = chip.int8_ops_per_s
    return int8 is not None and math.isclose(int8, 2 * chip.bf16_flops_per_s, rel_tol=0.01)  # the TPU7x: 2.004


def _bf16_rate(chip: hw.Chip) -> float:
    return chip.bf16_flops_per_s


# Part 12 Q5.2 divides F by 1995 for the H100's largest compute-bound tensor parallelism (14.37 for F = 28,672),
# where the table's C / W_nvlink is 2200 (13.0): Chapters 11 and 12 accept the book's divisor beside the course's.
BOOK_H100_TP_DIVISOR = 1995


def rate_tolerance(chip: hw.Chip, least: Tolerance = TWO_PERCENT, *,
                   of: Callable[[hw.Chip], float] = _bf16_rate) -> Tolerance:
    """The tolerance of a number computed from ``chip``'s constants, ``of(chip)`` (by default its bf16 FLOP/s, for
    a number that scales with it or its inverse): ``least``, widened to the next half percent that admits the number
    computed with the book's own rounded values of those constants (``hw.BOOK_VALUES``, in any combination), so
    that one quantity has one tolerance in every chapter. The H100's critical batch with the book's 1e15 and
    3.35e12 is 2.5% above the course's: 3% wherever it is asked; a v5e threshold with its peak rounded to 2e14,
    1.5% above: 2%. A range (the book's own words) or an exact count stays as it is."""
    if least.is_range or least.whole:
        return least
    book = {f: values for (name, f), values in hw.BOOK_VALUES.items() if name == chip.name}
    ours = of(chip)
    gap = max(abs(of(dataclasses.replace(chip, **dict(zip(book, pick, strict=True)))) / ours - 1)
              for pick in itertools.product(*([getattr(chip, f), *values] for f, values in book.items())))
    need = math.ceil(gap * 200 - 1e-9) / 200
    return least if least.rtol >= need else Tolerance(rtol=need)


def number(qid: str, *, section: str, prompt: str, reference: float, slips: tuple[Slip, ...], unit: str = "",
           tolerance: Tolerance = TWO_PERCENT, exact: bool = False, points: float = 1) -> Number:
    """A Number record worth one point unless ``points`` says otherwise. ``exact=True`` marks a count: only
    the whole number passes (give no tolerance; the prompt must say so)."""
    return Number(qid=qid, points=points, section=section, prompt=prompt, reference=float(reference), unit=unit,
                  tolerance=tolerance, slips=slips, exact=exact)


def slips(reference: float, tolerance: Tolerance, *wrong: tuple[float, str]) -> tuple[Slip, ...]:
    """Slips (answer, hint) with their codes computed; one that a student's values make right is no slip. One
    away from an exact count is any off-by-one's value too: its hint is one possible cause (``Slip.maybe``)."""
    lo, hi = tolerance.bounds(reference)
    return tuple(Slip(a, slip_code(a, reference, tolerance), hint, maybe=tolerance.whole and abs(a - reference) == 1)
                 for a, hint in wrong if not lo <= a <= hi)


def slip_code(answer: float, reference: float, tolerance: Tolerance = TWO_PERCENT, unit: str = "") -> str:
    """The diagnosis the number judge gives ``answer``, a slip whose ratio to the reference moves with a
    student's values (a hop count, a layer count, a plan's split): asked of the judge itself, so that the slip's
    code holds at every choice of a setting and agrees with the judge's buckets at their edges (24.5% off lies in
    the bucket that straddles "close"'s 25%, which the judge reads as no "close"). The code is the one a student
    who typed the slip's figures is told, factor and all (``diagnose`` with the answer not typed, so nothing is
    withheld). Tests still judge each slip and compare."""
    from autograder.kinds.number import diagnose, expected
    from autograder.numbers import ParsedNumber

    return diagnose(expected("slip", reference, unit, tolerance)[0], ParsedNumber(float(answer), None)).diagnosis


# --- function questions: the cases drawn at grading time --------------------------------------------------------
Draw = Callable[[random.Random, dict[str, Any]], dict[str, Any]]
DRAWS_TO_KEEP_A_REGIME = 10_000


BYTES_PER_ELEMENT = (1, 2, 4)  # int8, bf16, float32
WIDTHS = (512, 1024, 2048, 4096, 8192)  # a model dimension, D or F


def with_choices(draw: Draw = rescaled, **choices: tuple[Any, ...]) -> Draw:
    """``draw``, then each named input picked afresh from its choices, independently: an integer the default draw
    keeps as the probe has it (a count of bytes per element, a model width) is a number the answer depends on, and an
    answer that ignored it must fail most cases. Were every drawn case bf16, a critical batch written as peak / bw
    would pass them all (``tests/test_ignored_inputs.py``); a set where such an answer's value comes up in more than
    half the cases is drawn again (``kinds.function._frozen_share``)."""
    def drawn(rng: random.Random, probe: dict[str, Any]) -> dict[str, Any]:
        case = draw(rng, dict(probe))
        return case | {name: rng.choice(values) for name, values in choices.items()}
    return drawn


def like_probes(reference: Callable, *slips: Callable, apart: float = 0.01, draw: Draw = rescaled) -> Draw:
    """A function question's ``draw`` whose every case is in the regime of its probe: ``draw`` (by default each float
    rescaled, ``kinds.function.vary``) is tried until the case fails the slips the probe fails, each by at least
    ``apart`` (relative, in some returned value), and no other (each other slip returns what the reference does).
    Where a slip is wrong in one regime alone (a latency ignored, collectives summed), a draw that rescales freely
    leaves as many cases in each regime as chance gives (ignoring the latency failed 3 or 4 of 14): here the public
    probes set the share, so a record whose probes fail each slip in most of them fails it in most of every student's
    drawn cases, and each regime the probes check stays checked. A probe whose slips lie nearer the reference than
    ``apart`` (at a boundary of regimes) is refused: its regime is no regime."""
    def wrong(case: dict[str, Any]) -> tuple[bool | None, ...]:
        want = _returned(reference(**case))
        gaps = [max(abs(g - w) / max(abs(w), 1e-300) for g, w in zip(_returned(s(**case)), want, strict=True))
                for s in slips]
        return tuple(True if gap >= apart else False if gap <= 1e-9 else None for gap in gaps)

    def drawn(rng: random.Random, probe: dict[str, Any]) -> dict[str, Any]:
        regime = wrong(probe)
        if None in regime:
            raise ValueError(f"a probe at a boundary of regimes, where a slip lies within {apart} of the "
                             f"reference: {probe}")
        for _ in range(DRAWS_TO_KEEP_A_REGIME):
            case = draw(rng, dict(probe))
            if wrong(case) == regime:
                return case
        raise ValueError(f"no case drawn like this probe fails the slips it fails: {probe}")
    return drawn


def _returned(x: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in x) if isinstance(x, tuple | list) else (float(x),)


# --- a parameter count from a config ------------------------------------------------------------------------
NAME_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)B\b")  # "LLaMA 3-70B", "LLaMA-2 13B", "LLaMA 3.1-405B"


class Count(NamedTuple):
    """How a question asks for a parameter count computed from a model's config."""

    tolerance: Tolerance
    words: str  # for the prompt: how precise the answer must be
    slips: tuple[Slip, ...]  # the size in the model's name, with a hint that says so


def count_of(name: str, count: float) -> Count:
    """A parameter count of the model called ``name`` (``cfg.name``), computed from its config. A name
    that states a size ("LLaMA 3-70B") must not answer it: the count is asked to 3 significant figures,
    or to 4 where 3 would be the size in the name (LLaMA 2-13B's 13,015,449,600 is 13.0e9; LLaMA 3-8B's
    8.03e9 is within 0.5% of 8e9), and the size in the name is a slip whose hint says what it is. A name
    without a size: 3 figures, no slip."""
    m = NAME_SIZE.search(name)
    if m is None:
        return Count(THREE_FIGURES, "", ())
    nominal = float(m.group(1)) * 1e9
    figures = next(n for n in (3, 4, 5, 6) if not Tolerance.figures(n).accepts(count, nominal))
    words = f" (to {figures} significant figures)" if figures > 3 else ""
    # both causes in one sentence: the size in the name, and an honest count rounded to fewer figures than asked
    hint = (f"that is also the size in the model's name: give the count from its config to {figures} significant "
            "figures.")
    return Count(Tolerance.figures(figures), words, (Slip(nominal, "close", hint),))


# --- program specs --------------------------------------------------------------------------------------------
X8 = (("X", 8),)  # the course's one-axis mesh: 8 simulated devices along X


def reshard_spec(out_spec: tuple, collectives: dict[str, int], both_ways: bool = False) -> ProgramSpec:
    """The spec of a collective built by hand (chapters 3 and 10): f32[64, 32] @ P('X', None) on ``X8``, whose
    answer is the array itself ("ab->ab"), laid out as ``out_spec`` (``()``: replicated). Only the
    ``collectives`` it states (and ``both_ways``: a bidirectional ring) tell the student's ring from the
    library call it replaces."""
    return ProgramSpec(mesh=X8, einsum="ab->ab", operands=(Operand((64, 32), ("X", None)),), out_spec=out_spec,
                       collectives=collectives, both_ways=both_ways)


# --- JAX, on first use ----------------------------------------------------------------------------------------
class _OnFirstUse:
    """A module that is imported when one of its attributes is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


jax: Any = _OnFirstUse("jax")
jnp: Any = _OnFirstUse("jax.numpy")
_devices: Any = _OnFirstUse("course.devices")  # its mesh() starts JAX


def P(*axes: Any) -> Any:
    """``PartitionSpec(*axes)``: ``P('X', None)`` splits the first dimension over mesh axis X."""
    return jax.sharding.PartitionSpec(*axes)


def NamedSharding(mesh: Any, spec: Any) -> Any:  # named as notebooks import it, so models read the same
    """``jax.sharding.NamedSharding(mesh, spec)``, for models that write it as the notebook does."""
    return jax.sharding.NamedSharding(mesh, spec)


def make_mesh(axes: Sequence[tuple[str, int]]) -> Any:
    """The course's mesh (``course.devices.mesh``: Auto axes) from (name, size) pairs, as a ProgramSpec
    writes them: ``make_mesh((("X", 2), ("Y", 4)))``."""
    return _devices.mesh(**dict(axes))


def smap(block: Callable, mesh: Sequence[tuple[str, int]], in_specs: Sequence, out_specs: Any, *,
         check_vma: bool = True) -> Callable:
    """``jax.shard_map(block)`` on ``make_mesh(mesh)``. ``in_specs`` holds one spec per argument and
    ``out_specs`` the result's; a spec is a PartitionSpec or its entries as a ProgramSpec writes them
    (``("X", None)``; ``()`` for a replicated array)."""
    def spec(s: Any) -> Any:
        return s if isinstance(s, jax.sharding.PartitionSpec) else P(*s)
    return jax.shard_map(block, mesh=make_mesh(mesh), in_specs=tuple(spec(s) for s in in_specs),
                         out_specs=spec(out_specs), check_vma=check_vma)


def own_block(full: Any, axis: str, dim: int = 0) -> Any:
    """Inside a shard_map: this device's block of ``full`` along ``dim``, as mesh axis ``axis`` would
    split it (a local slice: no communication)."""
    n = full.shape[dim] // jax.lax.axis_size(axis)
    return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index(axis) * n, n, axis=dim)


def attend_heads(q: Any, k_cache: Any, v_cache: Any, grouped: bool = True) -> Any:
    """One device's decode attention (chapters 7 and 8): q[b, n, H] against caches [b, S, k, H], query head
    n reading key/value head n // G. ``grouped=False`` is the slip that pairs head n with n % k instead."""
    b, n, h = q.shape
    k = k_cache.shape[2]
    qg = q.reshape(b, k, n // k, h) if grouped else q.reshape(b, n // k, k, h).swapaxes(1, 2)  # [b, k, G, H]
    out = jnp.einsum("bkgs,bskv->bkgv", jnp.einsum("bkgh,bskh->bkgs", qg, k_cache), v_cache)  # [b, k, G, H]
    return (out if grouped else out.swapaxes(1, 2)).reshape(b, n, h)


def gathered_cache_decode(axis: str, mesh: Sequence[tuple[str, int]], in_specs: Sequence, out_specs: Any) -> Callable:
    """The wasteful slip of a head-split decode step (x, w_q, k_cache, v_cache, w_o): every device gathers
    the whole cache and the weights over ``axis`` first. The numbers are right; the reads are not."""
    def block(x, wq, kc, vc, wo):
        def gather(a, dim):
            return jax.lax.all_gather(a, axis, axis=dim, tiled=True, to="invarying")
        o = attend_heads(jnp.einsum("bd,dnh->bnh", x, gather(wq, 1)), gather(kc, 2), gather(vc, 2))
        return jnp.einsum("bnh,nhd->bd", o, gather(wo, 0))

    def decode(x, w_q, k_cache, v_cache, w_o):
        return smap(block, mesh, in_specs, out_specs)(x, w_q, k_cache, v_cache, w_o)
    return decode


def ring(n: int, step: int = 1) -> list[tuple[int, int]]:
    """The ``ppermute`` pairs that move every device's block ``step`` places round a ring of ``n``
    (1: to the right neighbour, -1: to the left)."""
    return [(i, (i + step) % n) for i in range(n)]


def compiled_cost(f: Callable, *args: Any) -> dict:
    """XLA's cost analysis of ``jax.jit(f)`` compiled for ``args`` ("flops", "bytes accessed", ...)."""
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    return cost[0] if isinstance(cost, list) else cost  # a list of dicts on older jax releases
