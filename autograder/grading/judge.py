"""Judge: compare a notebook's recorded answers with the references, in a bounded subprocess.

``simplify`` can run for minutes on adversarial input and ``signal.alarm`` cannot bound memory, so
all of a notebook's answers are judged in one fresh process that sets its own limits before
importing anything heavy (one sympy import per notebook, not per answer). If that process dies,
each answer is judged alone to find the culprit, which is reported invalid ("too expensive"); the
others keep their verdicts. No student Python runs here: answers are data. Program answers are
compiled artefacts; they run in a second, jailed process (run_programs.py) that cannot read the
references, and only their reports come back here to be judged.

    python -m autograder.grading.judge  < {"chapter": ..., "course_dir": ..., "items": [...]}
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..verdict import Status, Verdict

MEMORY_BYTES = 4 * 2**30
ITEM_SECONDS = 60
BATCH_SECONDS = 600
PROGRAM_MEMORY_BYTES = 12 * 2**30  # address space: XLA reserves much more than it touches
PROGRAM_SECONDS = 300


def judge_answers(chapter: str, course_dir: Path, answers: dict[str, Any]) -> dict[str, Verdict]:
    """Verdicts for ``answers`` (qid -> recorded answer), computed out of process."""
    if not answers:
        return {}
    items = [{"qid": q, "answer": a} for q, a in answers.items()]
    try:
        return _run(chapter, course_dir, items, BATCH_SECONDS)
    except _Failed:
        pass
    out = {}
    for item in items:  # find the answer that broke the batch
        try:
            out.update(_run(chapter, course_dir, [item], ITEM_SECONDS * 2))
        except _Failed as e:
            out[item["qid"]] = Verdict(Status.INVALID, 0.0, "too_expensive",
                                       f"Checking this answer exceeded the grader's limits ({e}).")
    return out


class _Failed(Exception):
    pass


def _run(chapter: str, course_dir: Path, items: list[dict[str, Any]], timeout: int) -> dict[str, Verdict]:
    request = json.dumps({"chapter": chapter, "course_dir": str(course_dir), "items": items})
    try:
        proc = subprocess.run([sys.executable, "-m", "autograder.grading.judge"], input=request, text=True,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise _Failed(f"over {timeout} s") from e
    if proc.returncode != 0:
        raise _Failed(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    try:
        raw = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise _Failed("no verdicts") from e
    return {qid: Verdict.from_json(v) for qid, v in raw.items()}


def judge_programs(chapter: Any, items: list[dict[str, Any]], course_dir: Path,
                   seconds: int = PROGRAM_SECONDS) -> dict[str, Verdict]:
    """Run every program answer of a notebook in one jailed process, then judge the reports here."""
    from ..checks import GRADING_SEED
    from ..programs import judge_report, report_from_json
    from .jail import isolation_paths, jail_command

    blobs = {i["qid"]: i["answer"] for i in items}
    verdicts = {qid: v for qid, blob in blobs.items() if (v := _not_a_program(blob)) is not None}
    todo = [{"qid": q, "spec": chapter[q].spec.to_json(), "blob": b, "seed": GRADING_SEED}
            for q, b in blobs.items() if q not in verdicts]
    if not todo:
        return verdicts
    deny, allow = isolation_paths(course_dir)
    scratch = Path(tempfile.mkdtemp(prefix="sc-run-"))
    cmd = jail_command(deny, allow, [scratch], PROGRAM_MEMORY_BYTES, seconds) + [
        "--", sys.executable, "-m", "autograder.grading.run_programs"]
    try:
        proc = subprocess.run(cmd, input=json.dumps({"items": todo}), text=True, capture_output=True,
                              timeout=seconds, cwd=scratch, env={**os.environ, "HOME": str(scratch)})
        reports = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        reports = {}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for item in todo:
        qid = item["qid"]
        if qid in reports:
            verdicts[qid] = judge_report(chapter[qid].spec, report_from_json(reports[qid]), GRADING_SEED)
        else:
            verdicts[qid] = Verdict(Status.INCORRECT, 0.0, "program_failed",
                                    "Your program could not be run within the grader's limits (time or memory).")
    return verdicts


def _not_a_program(blob: Any) -> Verdict | None:
    if isinstance(blob, dict) and "error" in blob:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"Your function could not be lowered: {blob['error']}")
    if not isinstance(blob, str):
        return Verdict(Status.INVALID, 0.0, "wrong_type", "Expected a function (no program was recorded).")
    return None


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (BATCH_SECONDS, BATCH_SECONDS))
    request = json.loads(sys.stdin.read())
    course_dir = Path(request["course_dir"])
    if (course_dir / "solutions" / "__init__.py").exists():
        sys.path.insert(0, str(course_dir))  # the course's own (possibly private) reference solutions
    from ..checks import judge
    from ..questions import Program, load_chapter

    chapter = load_chapter(request["chapter"])
    programs = [i for i in request["items"] if isinstance(chapter[i["qid"]], Program)]
    out = {qid: v.to_json() for qid, v in judge_programs(chapter, programs, course_dir).items()}
    signal.signal(signal.SIGALRM, _alarm)
    for item in request["items"]:
        if item["qid"] in out:
            continue
        signal.alarm(ITEM_SECONDS)
        try:
            v = judge(chapter[item["qid"]], item["answer"], symbolic=True)
        except TimeoutError:
            v = Verdict(Status.INVALID, 0.0, "too_expensive", "Checking this answer took too long.")
        except Exception as e:  # a grader bug must not cost the student: report it plainly
            v = Verdict(Status.INVALID, 0.0, "grader_error", f"The grader could not check this answer "
                        f"({type(e).__name__}); please tell the course staff.")
        finally:
            signal.alarm(0)
        out[item["qid"]] = v.to_json()
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (JAX's can take seconds)


if __name__ == "__main__":
    main()
