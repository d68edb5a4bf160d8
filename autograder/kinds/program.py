"""Program answers: a JAX function for a mesh of devices, graded as the compiled program.

Encoded in the kernel by exporting the function for the question's shapes and shardings
(``programs.export``). ``judge_all`` is the one way a recorded artefact is judged: the grader runs it
in a jailed process (grading/judge.py), ``judge`` in this one, on inputs drawn from the grading seed,
and both turn the report into a verdict here. The self-check runs the live function on public inputs
and judges its report with the same ``programs.judge_report``, so all say the same thing.

The grader's inputs come from the submission's grading seed, which the notebook never sees: a program
that returned the expected result for inputs it could compute in advance (from a seed in public code)
would pass without computing anything.

Meshes are the course's (``autograder.meshes.mesh``, which notebooks call as ``course.mesh``): the
kernel lowers the function on such a mesh, and the grader runs the artefact on one built the same way.

Where the student chooses the mesh's shape (``ProgramSpec.mesh_choices``), the function takes the shape as
keyword parameters named after the axes, ``def step(x, w, *, X=2, Y=4)``, and builds its mesh from them: its
shardings name the axes, so it runs at any shape, and its defaults are the choice. The kernel records the
defaults as data beside the program exported at that shape; the grader checks the recorded shape itself
(``at_choice``) and judges the program at it, and the self-check reads the live function's the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import numbers
from collections.abc import Callable
from functools import partial
from typing import Any

from ..meshes import mesh
from ..messages import phrase, with_hints
from ..questions import Program, ProgramSpec
from ..verdict import Status, Verdict

SELFCHECK_SEED = 0  # public: the self-check runs the live function offline


def input_seed(seed: str | None, qid: str) -> int:
    """The seed of a program's inputs at grading time: one per question, from the submission's grading
    seed. Without one (tests, the demo) a fixed seed, other than the self-check's."""
    return int.from_bytes(hashlib.sha256(f"{seed or ''}/{qid}".encode()).digest()[:8], "big")


def encode(fp: dict[str, Any], answer: Any) -> Any:
    """The function exported for the question's shapes and shardings, or why it could not be. Where the
    student chooses the mesh, ``{"mesh": <the function's choice, as data>, "program": <exported at it>}``
    (no program where the choice is not one the question allows)."""
    spec = ProgramSpec.from_json(fp["program"])
    if not spec.mesh_choices:
        return _exported(spec, answer)
    chosen = mesh_of(spec, answer)
    at = at_choice(spec, chosen)
    return {"mesh": chosen, **({"program": _exported(at, answer)} if isinstance(at, ProgramSpec) else {})}


def _exported(spec: ProgramSpec, answer: Any) -> Any:
    from ..programs import error_text, export

    try:
        return export(spec, answer, make_mesh=mesh)
    except Exception as e:  # the student's function cannot be traced: record why
        return {"error": f"{type(e).__name__}: {error_text(e)}"}


def mesh_of(spec: ProgramSpec, answer: Any) -> dict[str, Any] | None:
    """The mesh shape a function chose (in the kernel, before anything is judged): the default of each of its
    parameters named after a mesh axis, a whole number or the text of whatever else it is; None when the
    answer is not a function."""
    if not callable(answer):
        return None
    try:
        parameters = inspect.signature(answer).parameters
    except (TypeError, ValueError):  # a callable Python cannot describe (a builtin, an extension type)
        return {}
    chosen: dict[str, Any] = {}
    for axis, _ in spec.mesh:
        p = parameters.get(axis)
        if p is not None and p.default is not inspect.Parameter.empty:
            d = p.default
            whole = isinstance(d, numbers.Integral) and not isinstance(d, bool)
            chosen[axis] = int(d) if whole else repr(d)[:40]
    return chosen


def at_choice(spec: ProgramSpec, chosen: Any) -> ProgramSpec | Verdict:
    """The question at the mesh shape an answer chose (``mesh_of``: recorded by the kernel for the grader, read
    from the live function by the self-check), or the verdict on a choice that cannot be judged: not a
    function, no shape given, a size that is not a whole number, a shape the question does not allow."""
    if not spec.mesh_choices:
        return spec
    names = [a for a, _ in spec.mesh]
    ctx = {"axes": " and ".join(names), "example": ", ".join(f"{a}={n}" for a, n in spec.mesh_choices[0].mesh),
           "call": ", ".join(f"{a}={a}" for a in names), "shape_axes": " x ".join(names),
           "allowed": _or([_shape_text(c.mesh) for c in spec.mesh_choices])}
    if not isinstance(chosen, dict):
        return _invalid_choice("not_a_function", ctx)
    missing = [a for a in names if a not in chosen]
    if missing:
        return _invalid_choice("missing", ctx, missing=" and ".join(missing))
    for a in names:
        if not isinstance(chosen[a], int) or isinstance(chosen[a], bool):
            return _invalid_choice("not_whole", ctx, axis=a, value=str(chosen[a])[:40])
    shape = tuple((a, chosen[a]) for a in names)
    if shape not in [c.mesh for c in spec.mesh_choices]:
        return _invalid_choice("not_allowed", ctx, shape=_shape_text(shape))
    return spec.at(shape)


def _shape_text(shape: tuple[tuple[str, int], ...]) -> str:
    return " x ".join(str(n) for _, n in shape)


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


def judge_all(chapter: Any, answers: dict[str, Any], seed: str | None, run: Run) -> dict[str, Verdict]:
    """Verdicts on program ``answers`` (qid -> what the kernel recorded; ``chapter[qid]`` is the question).
    A record that holds no program is judged as it is; the others go to ``run`` together, and each report
    that comes back is judged against the reference. One that does not come back ran out of limits."""
    from ..programs import judge_report, not_a_program, report_from_json

    verdicts: dict[str, Verdict] = {}
    specs: dict[str, ProgramSpec] = {}  # each question as judged: at the mesh the answer chose, if it chooses
    blobs: dict[str, Any] = {}
    for qid, blob in answers.items():
        spec = chapter[qid].spec
        if spec.mesh_choices:  # the record holds the shape chosen and the program exported at it
            spec = at_choice(spec, blob.get("mesh") if isinstance(blob, dict) else None)
            blob = blob.get("program") if isinstance(blob, dict) else None
        verdict = spec if isinstance(spec, Verdict) else not_a_program(blob)
        if verdict is not None:
            verdicts[qid] = verdict
        else:
            specs[qid], blobs[qid] = spec, blob
    todo = [{"qid": q, "spec": spec.to_json(), "blob": blobs[q], "seed": input_seed(seed, q)}
            for q, spec in specs.items()]
    if not todo:
        return verdicts
    reports = run(todo)
    for item in todo:
        qid = item["qid"]
        if isinstance(reports, dict) and qid in reports:
            verdict = judge_report(specs[qid], report_from_json(reports[qid]), item["seed"])
            verdicts[qid] = with_slip_hint(verdict, slip_hints(chapter[qid]))
        else:
            verdicts[qid] = Verdict(Status.INCORRECT, 0.0, "program_failed", phrase("program_failed"))
    return verdicts


def judge(q: Program, answer: Any, seed: str | None = None) -> Verdict:
    """The grader's verdict, with the artefact run in this process (``judge_all``)."""
    from ..programs import run_items  # imports jax only when a program is judged

    return judge_all({q.qid: q}, {q.qid: answer}, seed, partial(run_items, make_mesh=mesh))[q.qid]


def slip_hints(q: Program) -> dict[str, str]:
    """A program slip's hint, by its diagnosis. No two programs are the same answer, so a program is matched
    to a slip by what is wrong with it; the record check keeps such a diagnosis to one slip of the question."""
    return {s.diagnosis: s.hint for s in q.slips if s.hint}


def with_slip_hint(v: Verdict, hints: dict[str, str]) -> Verdict:
    hint = None if v.ok else hints.get(v.diagnosis)
    return dataclasses.replace(v, message=with_hints(v.message, [hint])) if hint else v


def make_print(q: Program) -> dict[str, Any]:
    hints = slip_hints(q)
    return {"program": q.spec.to_json(), **({"hints": hints} if hints else {})}


def selfcheck_live(fp: dict[str, Any], qid: str, answer: Any) -> Verdict:
    """The self-check runs the live function (an exported artefact cannot be run in the kernel)."""
    from ..programs import judge_report, run

    spec = ProgramSpec.from_json(fp["program"])
    at = at_choice(spec, mesh_of(spec, answer)) if spec.mesh_choices else spec
    if isinstance(at, Verdict):
        return at
    verdict = judge_report(at, run(at, answer, seed=SELFCHECK_SEED, make_mesh=mesh), seed=SELFCHECK_SEED)
    return with_slip_hint(verdict, fp.get("hints", {}))
