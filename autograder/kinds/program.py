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
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from typing import Any

from ..meshes import mesh
from ..messages import phrase
from ..questions import Program, ProgramSpec
from ..verdict import Status, Verdict

SELFCHECK_SEED = 0  # public: the self-check runs the live function offline


def input_seed(seed: str | None, qid: str) -> int:
    """The seed of a program's inputs at grading time: one per question, from the submission's grading
    seed. Without one (tests, the demo) a fixed seed, other than the self-check's."""
    return int.from_bytes(hashlib.sha256(f"{seed or ''}/{qid}".encode()).digest()[:8], "big")


def encode(fp: dict[str, Any], answer: Any) -> Any:
    """The function exported for the question's shapes and shardings, or why it could not be."""
    from ..programs import error_text, export

    try:
        return export(ProgramSpec.from_json(fp["program"]), answer, make_mesh=mesh)
    except Exception as e:  # the student's function cannot be traced: record why
        return {"error": f"{type(e).__name__}: {error_text(e)}"}


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

    verdicts = {qid: v for qid, blob in answers.items() if (v := not_a_program(blob)) is not None}
    todo = [{"qid": q, "spec": chapter[q].spec.to_json(), "blob": b, "seed": input_seed(seed, q)}
            for q, b in answers.items() if q not in verdicts]
    if not todo:
        return verdicts
    reports = run(todo)
    for item in todo:
        qid = item["qid"]
        if isinstance(reports, dict) and qid in reports:
            verdicts[qid] = judge_report(chapter[qid].spec, report_from_json(reports[qid]), item["seed"])
        else:
            verdicts[qid] = Verdict(Status.INCORRECT, 0.0, "program_failed", phrase("program_failed"))
    return verdicts


def judge(q: Program, answer: Any, seed: str | None = None) -> Verdict:
    """The grader's verdict, with the artefact run in this process (``judge_all``)."""
    from ..programs import run_items  # imports jax only when a program is judged

    return judge_all({q.qid: q}, {q.qid: answer}, seed, partial(run_items, make_mesh=mesh))[q.qid]


def make_print(q: Program) -> dict[str, Any]:
    return {"program": q.spec.to_json()}


def selfcheck_live(fp: dict[str, Any], qid: str, answer: Any) -> Verdict:
    """The self-check runs the live function (an exported artefact cannot be run in the kernel)."""
    from ..programs import judge_report, run

    spec = ProgramSpec.from_json(fp["program"])
    return judge_report(spec, run(spec, answer, seed=SELFCHECK_SEED, make_mesh=mesh), seed=SELFCHECK_SEED)
