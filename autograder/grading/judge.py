"""Judge: compare a notebook's recorded answers with the references, in a bounded process.

sympy's work on an adversarial answer can run long or eat memory, and a timer cannot bound memory, so
answers are judged in a separate process that sets its own memory limit before it loads any
chapter. Inside it, each answer is judged under the stated bounds of ``autograder.bounds`` (CPU and wall
time per answer, and wall time for all of one notebook's answers); an answer past them is "too
expensive to check", and so are those of a notebook whose answers have used up its budget. Each
grading worker keeps that process alive across notebooks (a ``Service``, forked by the class's
factory with sympy imported), since loading a chapter's references costs more than judging a
notebook; it also draws the submission's function cases (``draw_cases``). If it dies or overruns on
a notebook anyway, each answer of that notebook is judged alone in a fresh process to find the
culprit, which is reported "too expensive to check"; the others keep their verdicts.

No student Python runs here: answers are data. Program answers are compiled artefacts; they run in
a second, jailed process (run_programs.py) that cannot read the references, and only their reports
come back here to be judged.

    forked by zygote.py; serves JSON lines: {"chapter", "course_dir", "items", "seed"} -> verdicts,
    {"draw": true, "chapter", "course_dir", "seed"} -> {"cases"}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import bounds
from ..verdict import Status, Verdict
from . import STATE, factory
from .service import Service

MEMORY_BYTES = 4 * 2**30
BATCH_SECONDS = 600
ALONE_SECONDS = 120  # one answer in a fresh process: sympy's import, the chapter, then the answer
PROGRAM_MEMORY_BYTES = 12 * 2**30  # address space: XLA reserves much more than it touches
PROGRAM_SECONDS = 300  # all the programs of one notebook
# One program: a chapter's programs compile and run in a second or two, so a minute is ample, and one that never
# ends costs a minute of its notebook's time, not the whole of it (nor its other programs' grades).
PROGRAM_EACH_SECONDS = 60
RUNNER_START_SECONDS = 60  # a fresh runner asked to run nothing: forked with JAX imported, it answers in seconds
RUNNER_PROGRAMS = 250  # programs a runner runs before it is replaced (about 25 notebooks' worth)

_judge: Service | None = None  # one per grading worker process
_runners: dict[tuple, Service] = {}  # one per judging process and isolation


def _forked(request: dict[str, Any], home: Path, max_requests: int = 50) -> Service:
    """A judging process or a program runner, forked by the class's factory."""
    def connect(req: dict[str, Any], timeout: float) -> Any:
        return factory.connect(req, timeout, home)
    return Service(connect, request, max_requests=max_requests)


def _judging(course_dir: Path, max_requests: int = 50) -> Service:
    # It asks the same factory for its program runner.
    env = {factory.ENV: os.environ[factory.ENV]} if factory.ENV in os.environ else {}
    return _forked({"kind": "judge", "env": env}, course_dir / STATE / "work", max_requests)


def _worker_judge(course_dir: Path) -> Service:
    """This worker's judging process, kept across notebooks."""
    global _judge
    if _judge is None:
        _judge = _judging(course_dir)
    return _judge


def judge_answers(chapter: str, course_dir: Path, answers: dict[str, Any], seed: str | None = None,
                  setting: dict[str, Any] | None = None) -> dict[str, Verdict]:
    """Verdicts for ``answers`` (qid -> recorded answer), computed out of process. ``seed``: the
    submission's grading seed (seeds.py), from which function and program inputs are drawn; ``setting``:
    the student's values of the chapter's settings (variants.py), for which the records are built."""
    if not answers:
        return {}
    items = [{"qid": q, "answer": a} for q, a in answers.items()]
    request = {"chapter": chapter, "course_dir": str(course_dir), "seed": seed, "setting": setting or {}}
    raw = _worker_judge(course_dir).request({**request, "items": items}, BATCH_SECONDS)
    if isinstance(raw, dict) and set(raw) == set(answers):
        return {qid: Verdict.from_json(v) for qid, v in raw.items()}
    from ..messages import phrase  # only here: this process judges nothing itself

    out = {}
    for item in items:  # find the answer that broke the batch, each in a process of its own
        alone = _judging(course_dir, max_requests=1)
        one = alone.request({**request, "items": [item]}, ALONE_SECONDS)
        alone.close()
        out[item["qid"]] = Verdict.from_json(one[item["qid"]]) if isinstance(one, dict) and item["qid"] in one \
            else Verdict(Status.INVALID, 0.0, "too_expensive", phrase("too_expensive:limits"))
    return out


def draw_cases(chapter: str, course_dir: Path, seed: str,
               setting: dict[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The cases each function question of a submission is run on (seeds.py), drawn by this worker's
    judging process, which has the chapter's references loaded: the course's own where it has them."""
    request = {"draw": True, "chapter": chapter, "course_dir": str(course_dir), "seed": seed, "setting": setting or {}}
    for _ in range(2):  # a process that died or hung (no reply) is replaced once; one that answered is believed
        reply = _worker_judge(course_dir).request(request, BATCH_SECONDS)
        if reply is not None:
            break
    if not isinstance(reply, dict) or not isinstance(reply.get("cases"), dict):
        raise RuntimeError(f"the judging process could not draw the test cases: {str(reply)[:300]}")
    return reply["cases"]


def judge_programs(chapter: Any, items: list[dict[str, Any]], course_dir: Path, seed: str | None = None,
                   seconds: int = PROGRAM_SECONDS, each: float = PROGRAM_EACH_SECONDS) -> dict[str, Verdict]:
    """Run every program answer of a notebook in the jailed runner, then judge the reports here
    (``kinds.program.judge_all``). The inputs come from the submission's grading ``seed``. Each program is a
    request of its own, stopped after ``each`` seconds: one that never ends, or that kills the runner, loses
    only its own report (the runner is started afresh for the next); all of them share ``seconds``. The runner
    serves many notebooks, and its CPU limit covers its whole life, so each program's budget is made its own:
    the runner is replaced before a program that could take it past its limit (``_runner``), and a program whose
    runner died before the program's time was up, having served others before it, is run once more in a fresh
    one: only there is its death its own. And only if a runner works at all: a program that got no report is asked
    about once more, of a fresh runner with nothing to run; one that does not answer that is the grader's failure
    (a person looks), never the student's. The time the factory takes to fork a runner is the grader's own: it is
    added to ``seconds`` (``tests/grading/test_runner_start.py``)."""
    from ..kinds.program import judge_all

    return judge_all(chapter, {i["qid"]: i["answer"] for i in items}, seed, program_runs(course_dir, seconds, each),
                     _reference)


def program_runs(course_dir: Path, seconds: float, each: float) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """What runs a notebook's programs in the runner (``judge_programs``): every call shares the one budget of
    ``seconds``, so a program run once more (at the self-check's inputs, to tell a slip of wrong values by its
    results: ``kinds.program``) takes no time of its own beyond the notebook's."""
    from ..programs import GRADER_ERROR

    budget: list[float] = []  # the deadline, set at the first call

    def run(todo: list[dict[str, Any]]) -> dict[str, Any]:
        if not budget:
            budget.append(time.monotonic() + seconds)
        deadline = budget[0]
        reports = {}
        works: list[bool] = []  # whether a runner starts and answers, asked once, when a program got no report
        for item in todo:
            reply = None
            for _ in range(2):
                if deadline - time.monotonic() <= 0:
                    break
                runner = _runner(course_dir, seconds, each)
                shared = runner.alive() and 0 < runner.served < runner.max_requests  # not started for this one
                forking = time.monotonic()
                if not runner.ready(RUNNER_START_SECONDS):
                    break  # asked below whether a runner starts at all: the grader's failure, never the student's
                deadline += time.monotonic() - forking  # the factory's latency in forking it is not the student's
                budget[0] = deadline
                left = min(each, deadline - time.monotonic())
                start = time.monotonic()
                reply = runner.request({"items": [item]}, left)
                if reply is not None or not shared or time.monotonic() - start >= left:
                    break
            if isinstance(reply, dict) and item["qid"] in reply:
                reports[item["qid"]] = reply[item["qid"]]
                continue
            if not works:
                works.append(_runner(course_dir, seconds, each).request({"items": []}, RUNNER_START_SECONDS) == {})
            if not works[0]:
                reports[item["qid"]] = {"error": "the program runner did not start", "error_code": GRADER_ERROR}
        return reports

    return run


def _reference(q: Any, spec: Any) -> str:
    """A question's reference exported as a student's function is, on the course's simulated CPU devices, which this
    judging process asks for at its first unreadable program (``SetupError`` where JAX started otherwise: the
    flagged verdict names it)."""
    from course.devices import mesh, simulated_cpus

    from ..programs import reference_program

    simulated_cpus()
    return reference_program(q, spec, make_mesh=mesh)


def _runner(course_dir: Path, seconds: int, each: float = PROGRAM_EACH_SECONDS) -> Service:
    """The runner for the next program, which may run ``each`` seconds: replaced (at its next request) where what
    it has used so far and what that program could use on every core would pass its CPU limit."""
    from .jail import isolation_paths, readable_roots

    deny, allow = isolation_paths(course_dir, runner=True)
    key = (tuple(deny), tuple(allow), seconds)
    if key not in _runners:
        scratch = Path(tempfile.mkdtemp(prefix="sc-run-"))
        # CPU seconds accumulate over the runner's life: allow many notebooks' worth (and replace it, below, before a
        # program could take it past them).
        request = {"kind": "runner", "workdir": str(scratch), "env": {"HOME": str(scratch)},
                   "memory": PROGRAM_MEMORY_BYTES, "cpu": seconds * 50, "roots": [str(p) for p in readable_roots(deny)],
                   "allow": [str(p) for p in allow], "deny": [str(p) for p in deny]}
        _runners[key] = _forked(request, course_dir / STATE / "work", max_requests=RUNNER_PROGRAMS)
    runner = _runners[key]
    if runner.pid is not None and cpu_used(runner.pid) + each * _cores() > int(runner.fork_request["cpu"]):
        runner.close()
    return runner


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cpu_used(pid: int) -> float:
    """CPU seconds used by the busiest process of the tree under ``pid`` (Linux; 0 elsewhere): a runner in private
    namespaces runs its programs in a grandchild of the process the factory forked, and its CPU limit is that
    process's own."""
    used = [0.0]
    for p in _descendants(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = _stat(p)
            used.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return max(used)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the process's name (which may hold spaces and parentheses)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _descendants(pid: int) -> list[int]:
    """``pid`` and the processes under it, from each thread's list of children (or, where the kernel keeps none,
    from every process's parent)."""
    listed = Path(f"/proc/{pid}/task/{pid}/children").exists()
    children: dict[int, list[int]] = {}
    for entry in [] if listed else Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo and len(found) < 64:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children") if listed else []:
            with contextlib.suppress(OSError, ValueError):
                todo += [int(c) for c in task.read_text().split()]
        todo += children.get(p, [])
    return found


# Verdicts already given in this process, by (course, chapter, question, answer as judged: see
# ``_canonical``). A class repeats its answers (most students who get a question right type the same
# formula), judging is deterministic, and judging a formula costs milliseconds each time.
# A "too expensive" verdict is not remembered: it depends on the machine's load and on the notebook's
# other answers.
_memo: dict[tuple[str, str, str, str], dict[str, Any]] = {}
MEMO_ENTRIES = 100_000
_TRANSIENT = ("too_expensive", "grader_error", "program_failed")  # judged again


def _memo_key(request: dict[str, Any], item: dict[str, Any], seed: str | None = None,
              values: Any = None) -> tuple[str, str, str, str]:
    """``seed``: the grading seed, for an answer judged on inputs or points drawn from it (a function, a program,
    a formula);
    ``values``: the student's values of the question's setting, for a varied question."""
    answer = json.dumps([item["answer"], seed, values], sort_keys=True, default=str)
    return (request["course_dir"], request["chapter"], item["qid"], hashlib.sha256(answer.encode()).hexdigest())


def _canonical(question: Any, answer: Any) -> Any:
    """The answer as it is judged and remembered: ``record.canonical``, the one reading of text that the
    self-check shares (each run of spaces and tabs one space), so that respaced copies of an answer share one
    memo entry."""
    from ..record import canonical

    return canonical(question.kind, answer)


def _judge_one(judge: Any, question: Any, answer: Any, deadline: float) -> Verdict:
    """One answer's verdict, judged within its bounds and what is left of the notebook's."""
    from ..kinds.common import too_expensive

    try:
        with bounds.bounded(bounds.ANSWER_CPU_SECONDS, min(bounds.ANSWER_WALL_SECONDS, deadline - time.monotonic())):
            return judge(question, answer)
    except bounds.TooExpensive:
        return too_expensive(notebook=time.monotonic() >= deadline - 0.01)
    except Exception as e:
        return fault(judge, question, e)


def fault(judge: Any, question: Any, e: Exception) -> Verdict:
    """The verdict on an answer whose judging raised ``e``: the grader's fault, flagged for a person and judged
    again next run, only where the reference, judged the same way, fails too; else the answer's own
    (``unjudgeable``: the student is told to write it plainly, as the self-check tells them). A student cannot
    send every answer to a person by writing them so that judging raises."""
    from ..kinds import reference_record, unjudgeable
    from ..messages import phrase

    reference = reference_record(question)
    if reference is not None:
        try:
            with bounds.bounded():
                if judge(question, reference).ok:
                    return unjudgeable(e)
        except (Exception, bounds.TooExpensive):
            pass
    return Verdict(Status.INVALID, 0.0, "grader_error", phrase("grader_error", error=type(e).__name__))


_chapters: dict[str, Any] = {}  # a student's chapter by its values: students share them
CHAPTERS = 256


def student_chapter(name: str, setting: dict[str, Any]) -> Any:
    """The records of chapter ``name`` built for a student's values (labels by setting)."""
    from ..questions import load_chapter

    key = json.dumps([name, setting], sort_keys=True)
    if key not in _chapters:
        if len(_chapters) > CHAPTERS:
            _chapters.clear()
        _chapters[key] = load_chapter(name).variant(setting)
    return _chapters[key]


def _values_of(chapter: Any, qid: str) -> Any:
    s = chapter.setting_of(qid)
    return None if s is None else chapter.choice.get(s.name)


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Verdicts (as JSON) for one notebook's answers."""
    course_dir = Path(request["course_dir"])
    if (course_dir / "solutions" / "__init__.py").exists() and str(course_dir) not in sys.path:
        sys.path.insert(0, str(course_dir))  # the course's own (possibly private) reference solutions
    from ..checks import judge
    from ..kinds import DRAWN
    from ..kinds.common import too_expensive
    from ..questions import Program
    from .copied_values import KEY, right_elsewhere

    chapter = student_chapter(request["chapter"], request.get("setting") or {})
    book = student_chapter(request["chapter"], {})  # a book's answer at other values is told so (kinds.at_book)
    if request.get("draw"):
        from .seeds import drawn_cases

        return {"cases": drawn_cases(chapter, request["seed"])}
    seed = request.get("seed")
    items = [{**i, "answer": _canonical(chapter[i["qid"]], i["answer"])} for i in request["items"]]
    # A formula's credit also rests on points drawn from the seed (kinds/formula.py, grader_points).
    keys = {item["qid"]: _memo_key(request, item, seed if chapter[item["qid"]].kind in (*DRAWN, "formula") else None,
                                   _values_of(chapter, item["qid"])) for item in items}
    out = {qid: _memo[key] for qid, key in keys.items() if key in _memo}
    programs = [i for i in items if i["qid"] not in out and isinstance(chapter[i["qid"]], Program)]
    out |= {qid: v.to_json() for qid, v in judge_programs(chapter, programs, course_dir, seed).items()}
    deadline = time.monotonic() + bounds.NOTEBOOK_SECONDS  # the programs ran under bounds of their own
    for item in items:
        if item["qid"] in out:
            continue
        if time.monotonic() < deadline:
            s = chapter.setting_of(item["qid"])
            at = (book[item["qid"]], s.name) if s is not None else (None, None)
            v = _judge_one(lambda q, a, at=at: judge(q, a, seed, *at), chapter[item["qid"]], item["answer"], deadline)
            if s is not None and chapter[item["qid"]].kind == "number" and v.status is Status.INCORRECT:
                elsewhere = right_elsewhere(s, item["qid"], item["answer"], chapter.choice.get(s.name))
                v = replace(v, data={**v.data, KEY: {"setting": s.name, "values": elsewhere}}) if elsewhere else v
        else:
            v = too_expensive(notebook=True)
        out[item["qid"]] = v.to_json()
    if len(_memo) > MEMO_ENTRIES:
        _memo.clear()
    for qid, key in keys.items():
        if out[qid].get("diagnosis") not in _TRANSIENT:
            _memo[key] = out[qid]
    return out


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    import sympy  # noqa: F401  (paid once per process, before the first request)

    for line in sys.stdin:
        try:
            reply = handle(json.loads(line))
        except Exception as e:  # an unreadable request or a broken chapter: answer, don't die
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    os._exit(0)
