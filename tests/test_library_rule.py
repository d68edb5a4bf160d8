"""No graded question can be answered by calling what a student imports from ``course``.

Why: a library function that computes the very quantity a question asks for rewards calling it
instead of deriving it, and a self-check tick then proves nothing ("what a student imports answers no
question", docs/architecture.md). So ``course`` holds inputs (chips, model dimensions, symbols, meshes,
plots, timelines); the derivations live in ``solutions/``, which only the grader imports.

How: every public callable of every ``course`` module is called with arguments drawn from the
questions' inputs, and each result is judged against every question of every chapter.

- Callables: module-level functions and classmethods, the methods and properties of the modules'
  public objects (chips, nodes, model configs, runs, ...) and of the objects those calls return, and,
  for formula questions, objects of the course's classes built from the question's symbols.
- Formula questions: the question's symbols (``q.names``) in every order, up to the callable's
  arity (sampled when there are too many orders), string parameters from the callable's own string
  constants. Compared first at one random point of the domain (counts are integers >= 2), exact to
  1e-9; a match is confirmed with the symbols themselves at three points before it is reported.
- Number and choice questions: a parameter annotated with a course class gets every object of that
  class; a parameter named after an attribute of the course's objects (``hbm_bytes_per_s``, ``D``,
  ``flops_per_s`` for ``bf16_flops_per_s``) gets those attributes' values, all from one object per
  call (one chip's numbers, not a mix); a bytes-per-element parameter gets 1, 2 and 4; a callable with
  a parameter the course states nothing for is not called. Products are capped. Compared within 2%
  first, then confirmed with the question's own tolerance.
- Function questions: the question's public probes as keyword arguments (or positional, for a
  signature of the same length); a callable that reproduces one of the outputs on every probe does
  the graded work.

Not counted as answers, because they derive nothing: a result equal to one of the call's own inputs
(``as_expr(B)`` is ``B``, ``cfg.dims()`` hands back the config's fields), and small whole numbers
(``SMALL_COUNT``). Limits, on purpose: arguments that are themselves derived quantities (the numbers
a question hands over after a first step) are not generated, and only one level of returned objects
is explored.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import itertools
import math
import numbers
import pkgutil
import random
import re
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import sympy as sp

import course
from autograder.questions import chapter_names, load_chapter
from course.symbols import symbol

# Modules that hold machinery, not quantities: they judge or record answers by qid, keep a learner's
# progress on disk, or start JAX devices. Calling them with arbitrary arguments would write files or
# initialise JAX, and none returns a number, an expression or an option id.
MACHINERY_MODULES = {"answers": "check/grade/hint judge or record an answer given its qid",
                     "progress": "reads and writes a learner's attempts on disk",
                     "devices": "starts JAX's devices"}
# Single callables that need a JAX program or time a real machine; they return no formula or number
# a question asks for (timings are never graded, see course.measure).
MACHINERY = {"course.measure.matmul_throughput": "times matmuls on this machine; never graded",
             "course.comms.inspect": "takes a JAX function", "course.comms.report": "takes a JAX function"}
DRAWS = "ax"  # a callable with an ``ax`` parameter draws a picture; it returns Axes, never an answer

FORMULA_RTOL = 1e-9
NUMBER_PREFILTER = 0.02
MAX_ORDERS = 2000  # symbol orders tried per (callable, arity); sampled beyond that
MAX_COMBOS = 3000  # argument combinations per callable for number questions
BPE = (1, 2, 4)
# Parameter names that mean an attribute of another name (the only aliases the course uses).
ALIASES = {"hbm_per_chip": "hbm_bytes", "one_way_bytes_per_s": "ici_bytes_per_s_per_link",
           "chip_intensity": "critical_intensity", "peak": "bf16_flops_per_s", "bw": "hbm_bytes_per_s"}
SHAPES = ((2, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16), (4, 4, 4), (8, 8, 8), (16, 16, 16), (16, 20, 28))
UNIT_SCALE = {"days": 86400.0}  # a library that returns seconds answers a question in days
# Small whole numbers (counts of axes, hosts, hops, heads per group, ...) are left out of the number
# search, as answers and as results: every count the course's objects state or imply coincides with
# some question's answer, and a coincidence is not a derivation. Formula and function questions have
# no such blind spot.
SMALL_COUNT = 64


# --- what a student can import ----------------------------------------------------------------------

def course_modules() -> list[Any]:
    names = sorted(m.name for m in pkgutil.iter_modules(course.__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"course.{n}") for n in names if n not in MACHINERY_MODULES]


def _is_course_class(obj: Any) -> bool:
    return inspect.isclass(obj) and getattr(obj, "__module__", "").startswith("course.")


def _is_course_object(obj: Any) -> bool:
    return _is_course_class(type(obj)) and not inspect.isclass(obj)


@dataclass
class Library:
    functions: list[tuple[str, Callable]]  # (label, callable taking arguments)
    zero_arg: list[tuple[str, Any, Any]]  # (label, value of a property, the object it belongs to)
    objects: list[tuple[str, Any]]  # public objects of course classes
    classes: dict[str, type]


def _members(label: str, obj: Any) -> Iterator[tuple[str, str, Any]]:
    """("property" | "method", label, value or bound method) for each public member of an object."""
    fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
    for name in dir(type(obj)):
        if name.startswith("_") or name in fields:
            continue
        attr = inspect.getattr_static(type(obj), name)
        if isinstance(attr, property):
            try:
                yield "property", f"{label}.{name}", getattr(obj, name)
            except Exception:
                continue
        elif inspect.isfunction(attr) or isinstance(attr, classmethod):
            yield "method", f"{label}.{name}", getattr(obj, name)


def _skipped(label: str, fn: Callable) -> bool:
    if label in MACHINERY:
        return True
    try:
        return DRAWS in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True


def discover() -> Library:
    functions: list[tuple[str, Callable]] = []
    objects: list[tuple[str, Any]] = []
    classes: dict[str, type] = {}
    for mod in course_modules():
        for name, value in vars(mod).items():
            if name.startswith("_"):
                continue
            label = f"{mod.__name__}.{name}"
            if inspect.isfunction(value) and value.__module__ == mod.__name__:
                if not _skipped(label, value):
                    functions.append((label, value))
            elif _is_course_class(value) and value.__module__ == mod.__name__:
                classes[value.__name__] = value
                for attr in vars(value).values():
                    if isinstance(attr, classmethod):
                        fn = getattr(value, attr.__func__.__name__)
                        functions.append((f"{label}.{attr.__func__.__name__}", fn))
            elif _is_course_object(value):
                objects.append((label, value))
            elif isinstance(value, tuple | list | dict):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                objects += [(f"{label}[{k!r}]", v) for k, v in items if _is_course_object(v)]
    seen: set[int] = set()
    unique = [(lab, o) for lab, o in objects if not (id(o) in seen or seen.add(id(o)))]
    zero_arg: list[tuple[str, Any, Any]] = []
    for label, obj in unique:
        for kind, lab, value in _members(label, obj):
            if kind == "property":
                zero_arg.append((lab, value, obj))
            elif not _skipped(lab, value):
                functions.append((lab, value))
    return Library(functions, zero_arg, unique, classes)


# --- the questions -----------------------------------------------------------------------------------

@dataclass
class Questions:
    formulas: dict[tuple[tuple[str, ...], frozenset[str]], list[Any]]  # (names, counts) -> questions
    intervals: list[tuple[float, float, Any]]  # accepted ranges of number questions, sorted by low end
    lows: list[float]
    choices: dict[str, list[Any]]
    functions: list[Any]
    expected: dict[str, list[Any]]  # qid of a function question -> its reference's output per probe


def load_questions() -> Questions:
    formulas: dict = {}
    intervals: list[tuple[float, float, Any]] = []
    choices: dict[str, list[Any]] = {}
    functions: list[Any] = []
    for chapter in chapter_names():
        for q in load_chapter(chapter).questions:
            if q.kind == "formula":
                formulas.setdefault((tuple(q.names), frozenset(q.counts.split())), []).append(q)
            elif q.kind == "number":
                ref = float(q.reference)
                if ref == int(ref) and abs(ref) <= SMALL_COUNT:
                    continue
                for scale in (1.0, UNIT_SCALE.get(getattr(q, "unit", ""), 1.0)):
                    lo, hi = sorted((ref * (1 - NUMBER_PREFILTER), ref * (1 + NUMBER_PREFILTER)))
                    bounds = getattr(q.tolerance, "bounds", None)
                    if bounds is not None:
                        a, b = bounds(ref)
                        lo, hi = min(lo, a), max(hi, b)
                    intervals.append((lo * scale, hi * scale, (q, scale)))
            elif q.kind == "choice":
                choices.setdefault(str(q.reference).strip().lower(), []).append(q)
            elif q.kind == "function" and not q.builder:
                functions.append(q)
    intervals.sort(key=lambda t: t[0])
    expected = {q.qid: [call(q.reference, **probe) for probe in q.probes] for q in functions}
    return Questions(formulas, intervals, [t[0] for t in intervals], choices, functions, expected)


def number_accepts(q: Any, scale: float, value: float) -> bool:
    """The question's own rule (its tolerance), falling back to 2% where a record has none."""
    ref = float(q.reference)
    value = value / scale
    accepts = getattr(getattr(q, "tolerance", None), "accepts", None)
    if accepts is not None:
        return bool(accepts(ref, value))
    return abs(value - ref) <= NUMBER_PREFILTER * abs(ref)


# --- judging results ---------------------------------------------------------------------------------

def scalars(result: Any) -> list[float]:
    """The numbers in a result: itself, or the items of a (short) tuple, list or dict."""
    items = list(result.values()) if isinstance(result, dict) else (
        list(result) if isinstance(result, tuple | list) and len(result) <= 16 else [result])
    out = []
    for r in items:
        if isinstance(r, bool):
            continue
        if isinstance(r, numbers.Real | np.number) or (isinstance(r, np.ndarray) and r.size == 1):
            out.append(float(np.asarray(r).reshape(())))
        elif isinstance(r, sp.Expr) and r.is_number:
            try:
                out.append(float(r))
            except (TypeError, ValueError):
                continue
    return [x for x in out if math.isfinite(x)]


@dataclass
class Finder:
    questions: Questions
    hits: dict[str, str]  # qid -> the call that answers it
    calls: int = 0

    def found(self, q: Any, how: str) -> None:
        self.hits.setdefault(q.qid, how)

    def number(self, result: Any, how: Callable[[], str], given: set[float] = frozenset()) -> None:
        if isinstance(result, str):
            for q in self.questions.choices.get(result.strip().lower(), []):
                self.found(q, how())
            return
        for v in scalars(result):
            if v == 0 or v in given or (v == int(v) and abs(v) <= SMALL_COUNT):
                continue  # zero is no reference; a value the call was given (or its object states) derives nothing
            i, j = bisect_left(self.questions.lows, v - 2.5 * abs(v)), bisect_right(self.questions.lows, v)
            for lo, hi, (q, scale) in self.questions.intervals[i:j]:
                if lo <= v <= hi and number_accepts(q, scale, v):
                    self.found(q, f"{how()} = {v:.6g}")


def call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except Exception:
        return None


# --- formula questions -------------------------------------------------------------------------------

def _annotation(p: inspect.Parameter) -> str:
    a = p.annotation
    return "" if a is inspect.Parameter.empty else (a if isinstance(a, str) else getattr(a, "__name__", str(a)))


NON_NUMERIC = re.compile(r"\b(Sequence|ndarray|Mapping|Callable|dict|list|tuple|bool)\b")


def _strings(fn: Callable) -> list[str]:
    """Short string constants in a function's code (and its lambdas): the options of a ``str`` parameter."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    out: list[str] = []
    stack = [code] if code else []
    while stack:
        c = stack.pop()
        for k in c.co_consts:
            if isinstance(k, str) and re.fullmatch(r"[A-Za-z0-9_]{1,20}", k):
                out.append(k)
            elif inspect.iscode(k):
                stack.append(k)
    return sorted(set(out))


def formula_slots(fn: Callable, classes: dict[str, type]) -> tuple[list[tuple[str, Any]], int] | None:
    """The positional parameters as (name, "sym" | [string options]) and how many symbols are
    required; None when a required parameter needs an object."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    slots: list[tuple[str, Any]] = []
    required = 0
    for p in sig.parameters.values():
        ann = _annotation(p)
        if p.kind is p.VAR_POSITIONAL:
            slots += [(f"{p.name}{i}", "sym") for i in range(6)]
            continue
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        needs_object = any(c in ann for c in classes) or NON_NUMERIC.search(ann)
        if ann == "str":
            options = _strings(fn) if p.default is p.empty else [p.default]
            slots.append((p.name, options))
        elif needs_object:
            if p.default is p.empty:
                return None
            break
        else:
            slots.append((p.name, "sym"))
            required += p.default is p.empty
    return slots, required


def _orders(names: tuple[str, ...], slot_names: list[str], k: int, rng: random.Random) -> Iterator[tuple[str, ...]]:
    """Assignments of the names to k symbol slots: all of them if few, else the one that matches the
    parameters' own names (the book's letters) plus a sample."""
    if math.perm(len(names), k) <= MAX_ORDERS:
        yield from itertools.permutations(names, k)
        return
    by_name = tuple(n if n in names else None for n in slot_names[:k])
    if None not in by_name and len(set(by_name)) == k:
        yield by_name  # type: ignore[misc]
    for _ in range(MAX_ORDERS):
        yield tuple(rng.sample(names, k))


def _point(names: tuple[str, ...], counts: frozenset[str], rng: random.Random) -> dict[str, float]:
    return {n: float(rng.randint(2, 64)) if n in counts else 10 ** rng.uniform(0.2, 3.2) for n in names}


@functools.lru_cache(maxsize=4096)
def _evaluator(expr: sp.Basic) -> tuple[tuple[str, ...], Callable] | None:
    """A float function of the expression's symbols (sympy's ``subs`` is 1000 times slower)."""
    names = tuple(sorted(str(x) for x in expr.free_symbols))
    try:
        return names, sp.lambdify([symbol(n) for n in names], expr, modules="math")
    except Exception:
        return None


def _value(expr: Any, point: dict[str, float]) -> float | None:
    if isinstance(expr, numbers.Real):
        return float(expr)
    ev = _evaluator(expr) if isinstance(expr, sp.Basic) else None
    if ev is None or not set(ev[0]) <= point.keys():
        return None
    v = call(ev[1], *(point[n] for n in ev[0]))
    try:
        v = complex(v)
    except (TypeError, ValueError):
        return None
    return v.real if abs(v.imag) <= 1e-12 * max(abs(v.real), 1e-300) else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= FORMULA_RTOL * max(abs(a), abs(b), 1e-300)


def formula_hits(finder: Finder, label: str, fn: Callable, classes: dict[str, type], seed: int = 0) -> None:
    shape = formula_slots(fn, classes)
    if shape is None:
        return
    slots, required = shape
    sym_slots = [i for i, (_, kind) in enumerate(slots) if kind == "sym"]
    str_slots = [i for i, (_, kind) in enumerate(slots) if kind != "sym"]
    for (names, counts), qs in finder.questions.formulas.items():
        rng = random.Random(hash((seed, names)) & 0xFFFF)
        point = _point(names, counts, rng)
        refs = [(q, _value(q.reference, point)) for q in qs]
        refs = [(q, r) for q, r in refs if r is not None]
        for k in range(max(required, 1), min(len(sym_slots), len(names)) + 1):
            # the string options of every string slot before the k-th symbol slot
            last = sym_slots[k - 1]
            strs = [i for i in str_slots if i < last]
            for options in itertools.product(*(slots[i][1] for i in strs)):
                for order in _orders(names, [slots[i][0] for i in sym_slots], k, rng):
                    args: list[Any] = [None] * (last + 1)
                    for i, o in zip(strs, options, strict=True):
                        args[i] = o
                    for i, n in zip(sym_slots[:k], order, strict=True):
                        args[i] = point[n]
                    finder.calls += 1
                    result = call(fn, *args)
                    if result is None:
                        continue
                    for v in scalars(result):
                        if v in args:
                            continue  # it handed back one of its inputs (as_expr(B) is B): no derivation
                        for q, r in refs:
                            if _close(v, r) and q.qid not in finder.hits:
                                _confirm_formula(finder, q, label, fn, slots, sym_slots, strs, options, order, rng)


def _confirm_formula(finder: Finder, q: Any, label: str, fn: Callable, slots: list, sym_slots: list[int],
                     strs: list[int], options: tuple, order: tuple[str, ...], rng: random.Random) -> None:
    """The same call with the symbols themselves, equal to the reference at three points."""
    last = sym_slots[len(order) - 1]
    args: list[Any] = [None] * (last + 1)
    for i, o in zip(strs, options, strict=True):
        args[i] = o
    for i, n in zip(sym_slots, order, strict=False):
        args[i] = symbol(n)
    result = call(fn, *args)
    if result is None:
        return
    candidates = list(result.values()) if isinstance(result, dict) else (
        list(result) if isinstance(result, tuple | list) else [result])
    counts = frozenset(q.counts.split())
    for expr in candidates:
        if not isinstance(expr, sp.Basic | numbers.Real):
            continue
        points = [_point(tuple(q.names), counts, rng) for _ in range(3)]
        values = [(_value(expr, p), _value(q.reference, p)) for p in points]
        if all(a is not None and b is not None and _close(a, b) for a, b in values):
            shown = ", ".join(str(a) if isinstance(a, str) else str(a) for a in args if a is not None)
            finder.found(q, f"{label}({shown}) = {sp.sstr(expr)}")
            return


def class_formula_hits(finder: Finder, classes: dict[str, type]) -> None:
    """Objects of the course's classes built from a question's symbols (a model config from L, D,
    F, ...), then their properties and zero-argument methods."""
    for cls in classes.values():
        if not dataclasses.is_dataclass(cls):
            continue
        fields = [f for f in dataclasses.fields(cls) if f.init]
        for (names, counts), qs in finder.questions.formulas.items():
            kwargs: dict[str, Any] = {}
            ok = True
            for f in fields:
                if f.name in names:
                    kwargs[f.name] = symbol(f.name)
                elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    if f.type in ("str", str):
                        kwargs[f.name] = "x"
                    else:
                        ok = False
                        break
            if not ok or not any(isinstance(v, sp.Symbol) for v in kwargs.values()):
                continue
            obj = call(cls, **kwargs)
            if obj is None:
                continue
            for kind, lab, value in _members(f"{cls.__name__}({', '.join(kwargs)})", obj):
                result = value if kind == "property" else call(value)
                if result is None:
                    continue
                for expr in (result.values() if isinstance(result, dict) else [result]):
                    if not isinstance(expr, sp.Expr):
                        continue
                    rng = random.Random(1)
                    for q in qs:
                        pts = [_point(names, counts, rng) for _ in range(3)]
                        if all((a := _value(expr, p)) is not None and (b := _value(q.reference, p)) is not None
                               and _close(a, b) for p in pts):
                            finder.found(q, f"{lab}{'' if kind == 'property' else '()'} = {sp.sstr(expr)}")


# --- number and choice questions ---------------------------------------------------------------------

def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else {}


def _own_values(*objs: Any) -> set[float]:
    """The numbers an object states or a call was given: a result equal to one of them derives nothing."""
    out: set[float] = set()
    for o in objs:
        values = _fields(o).values() if _is_course_object(o) else [o]
        for v in values:
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, numbers.Real) and not isinstance(x, bool):
                    out.add(float(x))
    return out


@dataclass(frozen=True)
class Source:
    """Where the values of one parameter come from: fixed ``values``, or the attributes ``attrs`` of
    whichever object of ``family`` a combination picks (so one call reads one chip's numbers)."""

    values: tuple[Any, ...] = ()
    family: type | None = None
    attrs: tuple[str, ...] = ()


def number_source(p: inspect.Parameter, fn: Callable, lib: Library) -> Source | None:
    """The question inputs a parameter can take, or None when the course states nothing for it."""
    ann = _annotation(p)
    default = () if p.default is p.empty else (p.default,)
    wanted = tuple(c for name, c in lib.classes.items() if re.search(rf"\b{name}\b", ann))
    if wanted:
        return Source(default + tuple(o for _, o in lib.objects if isinstance(o, wanted)))
    if ann == "str":
        return Source(default or tuple(_strings(fn)))
    if re.search(r"Sequence\[int\]|tuple\[int", ann):
        return Source(default + SHAPES)
    if NON_NUMERIC.search(ann):
        return Source(default) if default else None
    if "bpe" in p.name or "bytes_per_element" in p.name:
        return Source(BPE)
    name = ALIASES.get(p.name, p.name)
    for cls in {type(o) for _, o in lib.objects}:
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        attrs = tuple(a for a in names if a == name or a.endswith("_" + name))
        if attrs:
            return Source(default, _root(cls, lib), attrs)
    return Source(default) if default else None


def _root(cls: type, lib: Library) -> type:
    """The widest course class among cls's bases whose objects the library holds (Chip for TPU)."""
    for base in reversed(cls.__mro__):
        if _is_course_class(base) and any(isinstance(o, base) for _, o in lib.objects):
            return base
    return cls


def combinations(sources: list[Source], lib: Library, rng: random.Random) -> Iterator[list[Any]]:
    families = sorted({s.family for s in sources if s.family is not None}, key=lambda c: c.__name__)
    picks = [[o for _, o in lib.objects if isinstance(o, fam)] for fam in families]
    combos: list[list[Any]] = []
    for chosen in itertools.product(*picks):
        obj = dict(zip(families, chosen, strict=True))
        pools = []
        for s in sources:
            values = list(s.values)
            if s.family is not None:
                values += [getattr(obj[s.family], a, None) for a in s.attrs]
                values = [v for v in values if v is not None] or list(s.values)
            pools.append(values)
        combos += [list(c) for c in itertools.product(*pools)]
        if len(combos) > 20 * MAX_COMBOS:
            break
    if len(combos) > MAX_COMBOS:
        combos = rng.sample(combos, MAX_COMBOS)
    yield from combos


def number_hits(finder: Finder, label: str, fn: Callable, lib: Library) -> None:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return
    sources = [number_source(p, fn, lib) for p in params]
    if any(s is None for s in sources):
        return  # a parameter nothing in the course provides: not a call made from the inputs
    bound = getattr(fn, "__self__", None)
    for args in combinations(sources, lib, random.Random(label)):  # type: ignore[arg-type]
        finder.calls += 1
        kwargs = {p.name: a for p, a in zip(params, args, strict=True)}
        result = call(fn, **kwargs)
        if result is None:
            continue
        given = _own_values(*args, *([bound] if bound is not None else []))
        finder.number(result, lambda kwargs=kwargs: f"{label}({_show(kwargs)})", given)
        if _is_course_object(result):  # one level down: a FatTree's bandwidth, a Torus's diameter
            for kind, lab, value in _members(f"{label}({_show(kwargs)})", result):
                if kind == "property":
                    finder.number(value, lambda lab=lab: lab, given | _own_values(result))


def _show(kwargs: dict[str, Any]) -> str:
    def one(v: Any) -> str:
        return getattr(v, "name", None) or (f"{v:.6g}" if isinstance(v, float) else repr(v))
    return ", ".join(f"{k}={one(v)}" for k, v in kwargs.items())


# --- function questions ------------------------------------------------------------------------------

def function_hits(finder: Finder, label: str, fn: Callable) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    fixed = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())
    for q in finder.questions.functions:
        outputs = q.outputs
        results, expected = [], []
        for probe, want in zip(q.probes, finder.questions.expected[q.qid], strict=True):
            try:
                args = sig.bind(**probe)
            except TypeError:
                if not (fixed and len(sig.parameters) == len(probe)):
                    break
                args = sig.bind(*probe.values())  # same order, other names (hbm vs hbm_per_chip)
            got = call(fn, *args.args, **args.kwargs)
            if got is None or want is None:
                break
            parts = list(got.values()) if isinstance(got, dict) else list(got) if isinstance(got, tuple) else []
            results.append([v for v in map(_flat, [got, *parts]) if v is not None])
            expected.append(want if isinstance(want, tuple) and len(outputs) > 1 else (want,))
        else:
            for i, out in enumerate(outputs):
                if out.kind != "number":
                    continue
                tol = out.tolerance

                def ok(candidates: list[list[float]], w: tuple, i: int = i, tol: Any = tol) -> bool:
                    want = _flat(w[i]) if i < len(w) else None
                    return want is not None and any(
                        len(c) == len(want) and all(tol.accepts(a, b) for a, b in zip(want, c, strict=True))
                        for c in candidates)
                if results and all(ok(g, w) for g, w in zip(results, expected, strict=True)):
                    finder.found(q, f"{label}(**probe) reproduces output {i} on every probe")
                    break


def _flat(x: Any) -> list[float] | None:
    """A number, or a list or array of them, as a flat list of floats (the grader judges a list of
    numbers element by element)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError, OverflowError):
        return None
    return arr.tolist() if 0 < arr.size <= 100_000 and np.isfinite(arr).all() else None


# --- the test ----------------------------------------------------------------------------------------

def find_answers(lib: Library, questions: Questions) -> Finder:
    finder = Finder(questions, {})
    for label, value, obj in lib.zero_arg:
        finder.number(value, lambda label=label: label, _own_values(obj))
        if _is_course_object(value):
            for kind, lab, v in _members(label, value):
                if kind == "property":
                    finder.number(v, lambda lab=lab: lab, _own_values(obj, value))
    for label, fn in lib.functions:
        number_hits(finder, label, fn, lib)
        formula_hits(finder, label, fn, lib.classes)
        function_hits(finder, label, fn)
    class_formula_hits(finder, lib.classes)
    return finder


@pytest.fixture(scope="module")
def library() -> Library:
    return discover()


@pytest.fixture(scope="module")
def questions() -> Questions:
    return load_questions()


def test_the_finder_finds_a_planted_answer(library: Library, questions: Questions) -> None:
    """Proof that the search works: a library that offered a question's formula, or a chip property
    equal to a number question's reference, would be caught."""
    (names, counts), qs = next((k, v) for k, v in questions.formulas.items() if 2 <= len(k[0]) <= 5)
    q = qs[0]
    ordered = [symbol(n) for n in names]

    def planted(*args: Any) -> Any:  # the reference with the question's symbols in reverse order
        return q.reference.subs(dict(zip(ordered, reversed(args), strict=True)), simultaneous=True)

    finder = Finder(questions, {})
    formula_hits(finder, "planted", lambda *a: planted(*a) if len(a) == len(names) else None, {})
    assert q.qid in finder.hits, "a formula planted in the library was not found"
    number = next(iter(questions.intervals))[2][0]
    finder.number(float(number.reference), lambda: "planted constant")
    assert number.qid in finder.hits


def test_nothing_in_course_answers_a_question(library: Library, questions: Questions) -> None:
    """Every public callable of ``course``, called with the questions' inputs, answers no question."""
    assert library.functions and library.objects, "found nothing to call: the discovery is broken"
    finder = find_answers(library, questions)
    lines = [f"{qid}: {how}" for qid, how in sorted(finder.hits.items())]
    assert not lines, (f"{len(lines)} graded question(s) are answered by calling the course library "
                       f"({finder.calls} calls); move these derivations to solutions/:\n" + "\n".join(lines))
