"""Program answers: a JAX function for a mesh of devices, graded as the compiled program.

Encoded in the kernel by exporting the function for the question's shapes and shardings
(``programs.export``); the grader runs the artefact in a jailed process on inputs it draws itself and
judges the report (``programs.judge_report``); the self-check runs the live function on public
inputs and judges its report with the same function, so both say the same thing.
"""

from __future__ import annotations

from typing import Any

from ..questions import Program, ProgramSpec
from ..verdict import Verdict

# Program inputs at grading time come from a seed the notebook never sees (the self-check uses 0).
GRADING_SEED = 20260101


def encode(fp: dict[str, Any], answer: Any) -> Any:
    """The function exported for the question's shapes and shardings, or why it could not be."""
    from ..programs import export

    try:
        return export(ProgramSpec.from_json(fp["program"]), answer)
    except Exception as e:  # the student's function cannot be traced: record why
        return {"error": f"{type(e).__name__}: {str(e)[:400]}"}


def hint(q: Program) -> str:
    """The collectives the expected program runs: what a wrong one's diagnosis names anyway."""
    from ..programs import describe_counts

    needed = {k: v for k, v in q.spec.collectives.items() if v}
    if not needed:
        return ("The expected program needs no collective at all: with the right input shardings every "
                "device computes its own block of the result.")
    return f"The expected program runs {describe_counts(needed)} and nothing else."


def judge(q: Program, answer: Any) -> Verdict:
    from ..programs import judge_program  # imports jax only when a program is judged

    return judge_program(q.spec, answer, seed=GRADING_SEED)


def make_print(q: Program) -> dict[str, Any]:
    return {"program": q.spec.to_json()}


def selfcheck_live(fp: dict[str, Any], qid: str, answer: Any) -> Verdict:
    """The self-check runs the live function (an exported artefact cannot be run in the kernel)."""
    from ..programs import judge_report, run

    spec = ProgramSpec.from_json(fp["program"])
    return judge_report(spec, run(spec, answer, seed=0), seed=0)
