"""Program answers: a JAX function for a mesh of devices, graded as the compiled program.

Encoded in the kernel by exporting the function for the question's shapes and shardings
(``programs.export``). ``judge_all`` is the one way a recorded artefact is judged: the grader runs it
in a jailed process (grading/judge.py), ``judge`` in this one, on inputs drawn from the grading seed,
and both turn the report into a verdict here. The self-check exports the function as the kernel records
it and runs that artefact on public inputs, judging it with the same ``prepare`` and
``programs.judge_report``: a live function and its export can part ways (JAX refuses to export a host
callback that runs live; a function whose body builds another mesh than its inputs' fails live and runs
exported), and a tick must be a grade.

The grader's inputs come from the submission's grading seed, which the notebook never sees: a program
that returned the expected result for inputs it could compute in advance (from a seed in public code)
would pass without computing anything.

Meshes are the course's (``autograder.meshes.mesh``, which notebooks call as ``course.mesh``): the
kernel lowers the function on such a mesh, and the grader runs the artefact on one built the same way.

Where the student chooses the mesh's shape (``ProgramSpec.mesh_choices``), the function takes the shape as
keyword parameters named after the axes, ``def step(x, w, *, X=2, Y=4)``, and builds its mesh from them: its
shardings name the axes, so it runs at any shape, and its defaults are the choice. The kernel records the
defaults as data beside the program exported at that shape; the grader checks the recorded shape itself
(``at_choice``) and judges the program at it, and refuses one that builds a mesh of another shape
(``programs.run_exported``): a body that ignores its X and Y, or a record whose shape is not the program's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import math
import numbers
import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..meshes import mesh
from ..messages import phrase, with_hints
from ..questions import Program, ProgramSpec
from ..record import describe
from ..verdict import Status, Verdict
from .common import NOT_A_FUNCTION, not_a_function


def input_seed(seed: str | None, qid: str) -> int:
    """The seed of a program's inputs at grading time: one per question, from the submission's grading
    seed. Without one (tests, the demo) a fixed seed, other than the self-check's."""
    return int.from_bytes(hashlib.sha256(f"{seed or ''}/{qid}".encode()).digest()[:8], "big")


def encode(fp: dict[str, Any], answer: Any) -> Any:
    """The function exported for the question's shapes and shardings, or why it could not be. Where the
    student chooses the mesh, ``{"mesh": <the function's choice, as data>, "program": <exported at it>}``
    (no program where the choice is not one the question allows). An answer that is no function (the result of
    calling one, a number) is never traced: the record says what it is, in words (where the student chooses the
    mesh, that it names no shape: ``mesh_of``)."""
    spec = ProgramSpec.from_json(fp["program"])
    if not spec.mesh_choices:
        if not callable(answer):  # nothing to trace: said in words, as a function question says it
            return {"error": NOT_A_FUNCTION + describe(answer)}
        return _exported(spec, answer)
    chosen = mesh_of(spec, answer)
    at = at_choice(spec, chosen)
    return {"mesh": chosen, **({"program": _exported(at, answer)} if isinstance(at, ProgramSpec) else {})}


def _exported(spec: ProgramSpec, answer: Any) -> Any:
    from ..programs import export, lowering_error
    from ..record import bounded_trace

    try:
        return bounded_trace(export, spec, answer, make_mesh=mesh)
    except Exception as e:  # the student's function cannot be traced: record why, and the line it came from
        return lowering_error(e)


# A default beyond this is described, not recorded: no mesh has as many devices, and JSON and Python's own text of
# a number refuse numbers of thousands of digits.
LARGEST_SIZE = 10**9


def mesh_of(spec: ProgramSpec, answer: Any) -> dict[str, Any] | None:
    """The mesh shape a function chose (in the kernel, before anything is judged): the default of each of its
    parameters named after a mesh axis, a whole number or the text of whatever else it is; None when the
    answer is not a function. Never raises, whatever the function or its defaults do: a signature that cannot
    be read gives no shape."""
    if not callable(answer):
        return None
    try:
        parameters = inspect.signature(answer).parameters
        defaults = {a: parameters[a].default for a, _ in spec.mesh if a in parameters}
    except Exception:  # a callable Python cannot describe (a builtin, an extension type), or one that raises
        return {}
    return {a: _as_recorded(d) for a, d in defaults.items() if d is not inspect.Parameter.empty}


def _as_recorded(d: Any) -> int | str:
    """A default as the record holds it: a whole number of sensible size as itself (its ``__index__``, as Python
    uses it for sizes), anything else as text."""
    try:
        if isinstance(d, numbers.Integral) and not isinstance(d, bool):
            n = int.__index__(operator.index(d))  # a plain int, whatever an int subclass overrides
            if abs(n) < LARGEST_SIZE:
                return n
            return f"a whole number of about {int(n.bit_length() * math.log10(2)) + 1} digits"
    except Exception:  # an integer type whose conversion raises: described as whatever else it is
        pass
    try:
        return repr(d)[:40]
    except Exception:
        return f"a {type(d).__name__}"


def at_choice(spec: ProgramSpec, chosen: Any) -> ProgramSpec | Verdict:
    """The question at the mesh shape an answer chose (``mesh_of``, as the kernel records it; the grader and the
    self-check read it from the record alike), or the verdict on a choice that cannot be judged: not a function,
    no shape given, a size that is not a whole number, a shape the question does not allow."""
    if not spec.mesh_choices:
        return spec
    from ..programs import shape_text

    names = [a for a, _ in spec.mesh]
    ctx = {"axes": " and ".join(names), "example": ", ".join(f"{a}={n}" for a, n in spec.mesh_choices[0].mesh),
           "call": ", ".join(f"{a}={a}" for a in names), "shape_axes": " x ".join(names),
           "devices": str(math.prod(n for _, n in spec.mesh)),
           "allowed": _or([shape_text(c.mesh) for c in spec.mesh_choices])}
    if not isinstance(chosen, dict):
        return _invalid_choice("not_a_function", ctx)
    missing = [a for a in names if a not in chosen]
    if missing:
        return _invalid_choice("missing", ctx, missing=" and ".join(missing))
    for a in names:
        v = chosen[a]
        if not isinstance(v, int) or isinstance(v, bool) or abs(v) >= LARGEST_SIZE:
            text = v[:40] if isinstance(v, str) else str(_as_recorded(v))  # what a kernel records is text already
            return _invalid_choice("not_whole", ctx, axis=a, value=text)
    shape = tuple((a, chosen[a]) for a in names)
    if shape not in [c.mesh for c in spec.mesh_choices]:
        return _invalid_choice("not_allowed", ctx, shape=shape_text(shape))
    return spec.at(shape)


def at_preferred(spec: ProgramSpec, at: ProgramSpec, verdict: Verdict) -> Verdict:
    """The verdict on a program judged at ``at``, one of ``spec``'s mesh choices: a right one at a shape the
    exercise allows but does not ask for (``MeshChoice.earns_half``) earns half, and is told why."""
    from ..programs import shape_text

    choice = next((c for c in spec.mesh_choices if c.mesh == tuple(at.mesh)), None)
    if choice is None or not choice.earns_half or verdict.status is not Status.CORRECT:
        return verdict
    return Verdict(Status.PARTIAL, 0.5, "mesh_choice:earns_half",
                   phrase("mesh_choice:earns_half", shape=shape_text(at.mesh), why=choice.earns_half))


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _invalid_choice(code: str, ctx: dict[str, str], **more: str) -> Verdict:
    return Verdict(Status.INVALID, 0.0, f"mesh_choice:{code}", phrase(f"mesh_choice:{code}", **ctx, **more))


def hint(q: Program) -> str:
    """The collectives the expected program runs: what a wrong one's diagnosis names anyway."""
    from ..programs import describe_counts

    needed = {k: v for k, v in q.spec.collectives.items() if v}
    if not needed:
        return ("The expected program needs no collective at all: with the right input shardings every "
                "device computes its own block of the result.")
    return f"The expected program runs {describe_counts(needed)} and nothing else."


Run = Callable[[list[dict[str, Any]]], Any]  # runner items {"qid", "spec", "blob", "seed"} -> qid -> report


def prepare(spec: ProgramSpec, record: Any, note: str = "") -> tuple[ProgramSpec, str] | Verdict:
    """The question as a record is judged (at the shape it names, where the student chooses) and the artefact to
    run, or the verdict on a record that holds no program or names a shape that cannot be judged (``note``: one
    that could not be lowered ends with it, ``programs.lowering_verdict``)."""
    from ..programs import not_a_program

    refused = _not_a_function(record)
    if refused is not None:
        return refused
    if spec.mesh_choices:  # the record holds the shape chosen and the program exported at it
        chosen, record = (record.get("mesh"), record.get("program")) if isinstance(record, dict) else (None, None)
        at = at_choice(spec, chosen)
        if isinstance(at, Verdict):
            return at
        spec = at
    return not_a_program(record, [a for a, _ in spec.mesh], note) or (spec, record)


def _not_a_function(record: Any) -> Verdict | None:
    """The verdict on a record that says the answer was no function (``encode``), before anything is traced or
    run; None for any other record."""
    error = record.get("error") if isinstance(record, dict) else None
    if isinstance(error, str) and error.startswith(NOT_A_FUNCTION):
        return not_a_function(error[len(NOT_A_FUNCTION):])
    return None


def judge_all(chapter: Any, answers: dict[str, Any], seed: str | None, run: Run,
              reference: Reference | None = None) -> dict[str, Verdict]:
    """Verdicts on program ``answers`` (qid -> what the kernel recorded; ``chapter[qid]`` is the question).
    A record that holds no program is judged as it is; the others go to ``run`` together, and each report
    that comes back is judged against the reference. One that does not come back ran out of limits; one that
    cannot be judged (a grader's bug, a broken runner) is flagged for a person, and costs no other answer.

    Whose fault a failure to read a program is, is decided by the input that made it fail, not by the code that
    raised: the grader's readers parse what the student's program compiled to. Where reading the program failed
    (``programs.UNREADABLE``), the question's reference, made by ``reference`` (default: exported in this process,
    ``_reference_blob``), goes through the same reading (``_reference_check``: only then, once per question): if it
    fails too, the grader is broken (flagged for a person, with why); if not, the program is refused as the
    student's. Judging a well-formed report is the grader's own logic: an exception there is the grader's."""
    from .. import model_traffic, programs
    from ..programs import UNREADABLE, report_from_json

    verdicts: dict[str, Verdict] = {}
    todo: dict[str, tuple[ProgramSpec, dict[str, Any]]] = {}  # qid -> the question as judged, the runner's item
    for qid, record in answers.items():
        try:
            prepared = prepare(chapter[qid].spec, record)
        except Exception as e:
            prepared = _grader_error(e)
        if isinstance(prepared, Verdict):
            verdicts[qid] = prepared
        else:
            spec, blob = prepared
            todo[qid] = spec, {"qid": qid, "spec": spec.to_json(), "blob": blob, "seed": input_seed(seed, qid)}
    reports = run([item for _, item in todo.values()]) if todo else {}
    for qid, (spec, item) in todo.items():
        if not (isinstance(reports, dict) and qid in reports):
            verdicts[qid] = Verdict(Status.INCORRECT, 0.0, "program_failed", phrase("program_failed"))
            continue
        try:  # the grader's own table and logic over the runner's report: a failure here is the grader's
            traffic = model_traffic.at(model_traffic.expected(chapter[qid]), spec)
            report = report_from_json(reports[qid])
            unread = _reference_check(chapter[qid], spec, item, run, reference) \
                if report.error_code == UNREADABLE else None
            verdict = programs.judge_report(spec, report, item["seed"], traffic) if unread is None \
                else Verdict(Status.INVALID, 0.0, "grader_error",  # the reference cannot be read either
                             phrase("grader_error", error=f"{report.error}; the reference: {unread}"))
            verdict = _told_by_values(chapter[qid], spec, item, verdict, run)
            verdict = at_preferred(chapter[qid].spec, spec, verdict)
        except Exception as e:
            verdicts[qid] = _grader_error(e)
            continue
        verdicts[qid] = with_slip_hint(verdict, slip_hints(chapter[qid]))
    return verdicts


def _told_by_values(q: Program, spec: ProgramSpec, item: dict[str, Any], v: Verdict, run: Run) -> Verdict:
    """A wrong-values verdict with the hint of the slip whose results the program's are: the program run once more,
    at the self-check's inputs, where the release kept each slip's (only where the question has such slips)."""
    from ..programs import SELFCHECK_SEED, report_from_json

    hints = [s.hint for s in value_slips(q)]
    if not hints or v.ok or not _by_values(v.diagnosis):
        return v
    again = run([{**item, "seed": SELFCHECK_SEED}])
    report = report_from_json(again[q.qid]) if isinstance(again, dict) and q.qid in again else None
    return v if report is None or report.error else with_value_hint(v, q.qid, spec, report.outputs, hints)


Reference = Callable[[Program, ProgramSpec], str]  # a question and its spec as judged -> its exported reference

# Whether the grader reads each question's reference, by the question and the shape it is judged at: None where it
# does, else why not. Asked only where a student's program could not be read, and once per question in a judging
# process, whatever runner asks (a judging process has one runner); a runner that did not answer is not remembered.
REFERENCE_CHECKS: dict[tuple[str, tuple[tuple[str, int], ...]], str | None] = {}


def _reference_check(q: Program, spec: ProgramSpec, item: dict[str, Any], run: Run,
                     reference: Reference | None) -> str | None:
    """None where the question's reference (``reference``, or ``_reference_blob``) runs in ``run`` through the same
    reading as the student's program with no error; else why not (a phrase for the staff: the exception's name
    and where it was raised)."""
    key = (q.qid, tuple(map(tuple, spec.mesh)))
    if key in REFERENCE_CHECKS:
        return REFERENCE_CHECKS[key]
    from .. import programs

    try:
        blob = (reference or _reference_blob)(q, spec)
    except Exception as e:  # no reference to read (JAX started with other devices: SetupError): say so, once
        REFERENCE_CHECKS[key] = f"{type(e).__name__} while it was made"
        return REFERENCE_CHECKS[key]
    try:
        reports = run([{**item, "blob": blob}])
        raw = reports.get(item["qid"]) if isinstance(reports, dict) else None
    except Exception as e:
        raw, why = None, f"{type(e).__name__} while it was run"
    else:
        why = "the runner did not answer"
    if raw is None:  # nothing learnt about the readers: not remembered
        return why
    try:
        report = programs.report_from_json(raw)
    except Exception as e:
        REFERENCE_CHECKS[key] = f"{type(e).__name__} in its report"
        return REFERENCE_CHECKS[key]
    REFERENCE_CHECKS[key] = f"{report.error[:200]} ({report.error_code or 'an error'})" if report.error else None
    return REFERENCE_CHECKS[key]


def _reference_blob(q: Program, spec: ProgramSpec) -> str:
    """The question's reference exported for ``spec`` in this process, on its devices (the in-process judge's, whose
    caller set them up; the judging process passes its own ``reference``, which sets up the course's)."""
    from ..programs import reference_program

    return reference_program(q, spec, make_mesh=mesh)


def _grader_error(e: Exception) -> Verdict:
    """The verdict where judging itself failed: no points lost for good, a person looks at it (as the grader's
    judging process says of any answer)."""
    return Verdict(Status.INVALID, 0.0, "grader_error", phrase("grader_error", error=type(e).__name__))


def judge(q: Program, answer: Any, seed: str | None = None) -> Verdict:
    """The grader's verdict, with the artefact run in this process (``judge_all``)."""
    from ..programs import run_items  # imports jax only when a program is judged

    return judge_all({q.qid: q}, {q.qid: answer}, seed, partial(run_items, make_mesh=mesh))[q.qid]


def slip_hints(q: Program) -> dict[str, str]:
    """A program slip's hint, by its diagnosis. No two programs are the same answer, so a program is matched
    to a slip by what is wrong with it; the record check keeps such a diagnosis to one slip of the question. A
    slip of wrong values is matched by its values instead (``value_slips``)."""
    return {s.diagnosis: s.hint for s in q.slips if s.hint and not _by_values(s.diagnosis)}


def _by_values(diagnosis: str) -> bool:
    return diagnosis.startswith("wrong_values")


def value_slips(q: Program) -> list[Any]:
    """The slips told apart by their results alone (wrong values, with a hint): the release keeps their results at
    the self-check's inputs (``reference_results.slips_name``), and a wrong program whose results are one's is told
    its hint ("differs at index (0, 0)" names no cause)."""
    return [s for s in q.slips if s.hint and _by_values(s.diagnosis)]


def with_value_hint(v: Verdict, qid: str, spec: ProgramSpec, outputs: Any, hints: Sequence[str]) -> Verdict:
    """``v`` with the hint of the value-told slip whose kept results ``outputs`` (the program's, at the self-check's
    seed) are, within the question's tolerance; ``v`` as it is where none is, or the verdict is not of wrong
    values."""
    import numpy as np

    from .. import reference_results
    from ..programs import result_tolerance

    kept = reference_results.kept_slips(qid, spec) if hints and not v.ok and _by_values(v.diagnosis) else None
    outs = [reference_results.sampled(o) for o in outputs or ()]
    if not kept or not outs or len(kept) != len(hints) * len(outs):
        return v
    for i, hint in enumerate(hints):
        theirs = kept[i * len(outs):(i + 1) * len(outs)]
        if all(t is not None and o.shape == t.shape and np.isfinite(o).all()
               and result_tolerance(spec.rtol, spec.atol, t).same(o.astype(np.float64), t)
               for o, t in zip(outs, theirs, strict=True)):
            return dataclasses.replace(v, message=with_hints(v.message, [hint]))
    return v


def with_slip_hint(v: Verdict, hints: dict[str, str]) -> Verdict:
    hint = None if v.ok else hints.get(v.diagnosis)
    return dataclasses.replace(v, message=with_hints(v.message, [hint])) if hint else v


def make_print(q: Program) -> dict[str, Any]:
    """The question, its slips' hints, and what its model moves at each spec (``model_traffic``: the grader's
    yardstick for a wasteful program, so that the self-check holds a program to the same one)."""
    from .. import model_traffic

    hints, traffic, by_values = slip_hints(q), model_traffic.expected(q), [s.hint for s in value_slips(q)]
    return {"program": q.spec.to_json(), **({"hints": hints} if hints else {}),
            **({"value_hints": by_values} if by_values else {}),
            **({"traffic": traffic} if traffic else {})}


def selfcheck_live(fp: dict[str, Any], qid: str, answer: Any, lowering_note: str = "") -> Verdict:
    """The self-check judges what the grader would: the function exported as ``encode`` records it, prepared as
    the grader prepares a record, and that artefact run here on the public inputs. ``lowering_note``: what the
    verdict on a function that could not be lowered adds (``course.answers``: the kernel's devices)."""
    from .. import model_traffic
    from ..programs import SELFCHECK_SEED, judge_report, run_exported

    prepared = prepare(ProgramSpec.from_json(fp["program"]), encode(fp, answer), lowering_note)
    if isinstance(prepared, Verdict):
        return prepared
    at, blob = prepared
    report = run_exported(at, blob, SELFCHECK_SEED, make_mesh=mesh)
    verdict = judge_report(at, report, seed=SELFCHECK_SEED, traffic=model_traffic.at(fp.get("traffic"), at))
    verdict = with_value_hint(verdict, qid, at, report.outputs, fp.get("value_hints") or [])
    return with_slip_hint(at_preferred(ProgramSpec.from_json(fp["program"]), at, verdict), fp.get("hints", {}))
