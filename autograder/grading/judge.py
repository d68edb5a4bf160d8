"""Judge: compare a notebook's recorded answers with the references, in a bounded process.

``simplify`` can run for minutes on adversarial input and ``signal.alarm`` cannot bound memory, so
answers are judged in a separate process that sets its own memory limit before importing anything
heavy, with an alarm per answer. Each grading worker keeps that process alive across notebooks (a
``Service``), since importing sympy costs more than judging a notebook. If it dies or overruns on a
notebook, each answer of that notebook is judged alone in a fresh process to find the culprit, which
is reported "too expensive to check"; the others keep their verdicts.

No student Python runs here: answers are data. Program answers are compiled artefacts; they run in
a second, jailed process (run_programs.py) that cannot read the references, and only their reports
come back here to be judged.

    python -m autograder.grading.judge        # serves JSON lines: {"chapter", "course_dir", "items"}
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..verdict import Status, Verdict
from .service import Service

MEMORY_BYTES = 4 * 2**30
ITEM_SECONDS = 60
BATCH_SECONDS = 600
PROGRAM_MEMORY_BYTES = 12 * 2**30  # address space: XLA reserves much more than it touches
PROGRAM_SECONDS = 300

_judge: Service | None = None  # one per grading worker process
_runners: dict[tuple, Service] = {}  # one per judging process and isolation


def judge_answers(chapter: str, course_dir: Path, answers: dict[str, Any]) -> dict[str, Verdict]:
    """Verdicts for ``answers`` (qid -> recorded answer), computed out of process."""
    global _judge
    if not answers:
        return {}
    items = [{"qid": q, "answer": a} for q, a in answers.items()]
    if _judge is None:
        _judge = Service([sys.executable, "-m", "autograder.grading.judge"])
    raw = _judge.request({"chapter": chapter, "course_dir": str(course_dir), "items": items}, BATCH_SECONDS)
    if isinstance(raw, dict) and set(raw) == set(answers):
        return {qid: Verdict.from_json(v) for qid, v in raw.items()}
    out = {}
    for item in items:  # find the answer that broke the batch, each in a process of its own
        alone = Service([sys.executable, "-m", "autograder.grading.judge"], max_requests=1)
        one = alone.request({"chapter": chapter, "course_dir": str(course_dir), "items": [item]}, ITEM_SECONDS * 2)
        alone.close()
        out[item["qid"]] = Verdict.from_json(one[item["qid"]]) if isinstance(one, dict) and item["qid"] in one \
            else Verdict(Status.INVALID, 0.0, "too_expensive",
                         "Checking this answer exceeded the grader's limits (time or memory).")
    return out


def judge_programs(chapter: Any, items: list[dict[str, Any]], course_dir: Path,
                   seconds: int = PROGRAM_SECONDS) -> dict[str, Verdict]:
    """Run every program answer of a notebook in the jailed runner, then judge the reports here."""
    from ..checks import GRADING_SEED
    from ..programs import judge_report, report_from_json

    blobs = {i["qid"]: i["answer"] for i in items}
    verdicts = {qid: v for qid, blob in blobs.items() if (v := _not_a_program(blob)) is not None}
    todo = [{"qid": q, "spec": chapter[q].spec.to_json(), "blob": b, "seed": GRADING_SEED}
            for q, b in blobs.items() if q not in verdicts]
    if not todo:
        return verdicts
    reports = _runner(course_dir, seconds).request({"items": todo}, seconds)
    for item in todo:
        qid = item["qid"]
        if isinstance(reports, dict) and qid in reports:
            verdicts[qid] = judge_report(chapter[qid].spec, report_from_json(reports[qid]), GRADING_SEED)
        else:
            verdicts[qid] = Verdict(Status.INCORRECT, 0.0, "program_failed",
                                    "Your program could not be run within the grader's limits (time or memory).")
    return verdicts


def _runner(course_dir: Path, seconds: int) -> Service:
    from .jail import isolation_paths, jail_command

    deny, allow = isolation_paths(course_dir)
    key = (tuple(deny), tuple(allow), seconds)
    if key not in _runners:
        scratch = Path(tempfile.mkdtemp(prefix="sc-run-"))
        # CPU seconds accumulate over the runner's life: allow many notebooks' worth.
        cmd = jail_command(deny, allow, [scratch], PROGRAM_MEMORY_BYTES, seconds * 50) + [
            "--", sys.executable, "-m", "autograder.grading.run_programs"]
        _runners[key] = Service(cmd, cwd=str(scratch), env={**os.environ, "HOME": str(scratch)}, max_requests=25)
    return _runners[key]


def _not_a_program(blob: Any) -> Verdict | None:
    if isinstance(blob, dict) and "error" in blob:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"Your function could not be lowered: {blob['error']}")
    if not isinstance(blob, str):
        return Verdict(Status.INVALID, 0.0, "wrong_type", "Expected a function (no program was recorded).")
    return None


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError


# Verdicts already given in this process, by (course, chapter, question, answer). A class repeats its
# answers (most students who get a question right type the same formula), judging is deterministic,
# and the symbolic confirmation of a formula costs tens of milliseconds each time.
_memo: dict[tuple[str, str, str, str], dict[str, Any]] = {}
MEMO_ENTRIES = 100_000
_TRANSIENT = ("too_expensive", "grader_error", "program_failed")  # may depend on load: judged again


def _memo_key(request: dict[str, Any], item: dict[str, Any]) -> tuple[str, str, str, str]:
    answer = json.dumps(item["answer"], sort_keys=True, default=str)
    return (request["course_dir"], request["chapter"], item["qid"], hashlib.sha256(answer.encode()).hexdigest())


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Verdicts (as JSON) for one notebook's answers."""
    course_dir = Path(request["course_dir"])
    if (course_dir / "solutions" / "__init__.py").exists() and str(course_dir) not in sys.path:
        sys.path.insert(0, str(course_dir))  # the course's own (possibly private) reference solutions
    from ..checks import judge
    from ..questions import Program, load_chapter

    chapter = load_chapter(request["chapter"])
    keys = {item["qid"]: _memo_key(request, item) for item in request["items"]}
    out = {qid: _memo[key] for qid, key in keys.items() if key in _memo}
    programs = [i for i in request["items"] if i["qid"] not in out and isinstance(chapter[i["qid"]], Program)]
    out |= {qid: v.to_json() for qid, v in judge_programs(chapter, programs, course_dir).items()}
    for item in request["items"]:
        if item["qid"] in out:
            continue
        signal.alarm(ITEM_SECONDS)
        try:
            v = judge(chapter[item["qid"]], item["answer"])
        except TimeoutError:
            v = Verdict(Status.INVALID, 0.0, "too_expensive", "Checking this answer took too long.")
        except Exception as e:  # a grader bug must not cost the student: flag it for a person
            v = Verdict(Status.INVALID, 0.0, "grader_error", f"The grader could not check this answer "
                        f"({type(e).__name__}); please tell the course staff.")
        finally:
            signal.alarm(0)
        out[item["qid"]] = v.to_json()
    if len(_memo) > MEMO_ENTRIES:
        _memo.clear()
    for qid, key in keys.items():
        if out[qid].get("diagnosis") not in _TRANSIENT:
            _memo[key] = out[qid]
    return out


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    signal.signal(signal.SIGALRM, _alarm)
    import sympy  # noqa: F401  (paid once per process, before the first request)

    for line in sys.stdin:
        try:
            reply = handle(json.loads(line))
        except Exception as e:  # an unreadable request or a broken chapter: answer, don't die
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
