"""What the program tests share: an artefact a hostile kernel could record by hand, and the grader's
verdicts on one notebook's program answers, run in the jailed runner as ``scaling-course grade`` runs them.
(What an honest kernel records for a function is ``tests.chapter_checks.recorded``.)"""

import base64
from pathlib import Path
from typing import Any

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder.grading.judge import judge_programs
from autograder.questions import Chapter, Program
from autograder.verdict import Verdict


def forged(q: Program, fn: Any, *custom_calls: str, **jit: Any) -> str:
    """``fn`` exported with ``jit``'s options and without JAX's refusal of the named custom calls (targets
    with no compatibility guarantee): what a kernel could record in place of ``grade``'s export."""
    mesh = course.mesh(**dict(q.spec.mesh))
    args = [jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=NamedSharding(mesh, P(*o.spec))) for o in q.spec.operands]
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in custom_calls]
    exported = jax.export.export(jax.jit(fn, **jit), disabled_checks=checks)(*args)
    return base64.b64encode(exported.serialize()).decode()


def judged(chapter: Chapter, answers: dict[str, Any], course_dir: Path, **limits: Any) -> dict[str, Verdict]:
    """The grader's verdicts on a notebook's program answers (qid -> record); ``limits``: judge_programs's."""
    return judge_programs(chapter, [{"qid": q, "answer": a} for q, a in answers.items()], course_dir, **limits)
