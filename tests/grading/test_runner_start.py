"""Starting a program runner is the grader's work: a runner the factory is slow to fork (a busy machine, the
first program of a class) must not eat the student's time for their programs, the way a kernel's start no longer
eats the notebook's time (tests/grading/test_budgets.py)."""

import json
import socket
import threading
import time

from autograder.grading import judge
from autograder.grading.service import Service

DELAY = 1.5  # seconds the factory takes to fork the runner
BUDGET = 1  # seconds for all of a notebook's programs


def _slow_fork(request, timeout):
    """Forks nothing: a socket whose far end answers every request with a report for each item, after DELAY."""
    time.sleep(DELAY)
    ours, theirs = socket.socketpair()

    def serve():
        with theirs, theirs.makefile("rw") as f:
            for line in f:
                items = json.loads(line)["items"]
                f.write(json.dumps({i["qid"]: {"report": "ok"} for i in items}) + "\n")
                f.flush()

    threading.Thread(target=serve, daemon=True).start()
    return {"pid": 2**22 + 1}, ours


def test_a_runner_slow_to_start_costs_no_program_its_report(monkeypatch, tmp_path):
    runner = Service(_slow_fork, {"kind": "runner"})
    monkeypatch.setattr(Service, "alive", lambda self: self.sock is not None)
    monkeypatch.setattr(judge, "_runner", lambda *a, **k: runner)
    got = {}

    def judge_all(chapter, answers, seed, run, reference):
        got.update(run([{"qid": qid, "answer": a} for qid, a in answers.items()]))
        return {}

    monkeypatch.setattr("autograder.kinds.program.judge_all", judge_all)
    judge.judge_programs(None, [{"qid": "q1", "answer": {}}, {"qid": "q2", "answer": {}}], tmp_path, seconds=BUDGET,
                         each=BUDGET)
    assert got == {"q1": {"report": "ok"}, "q2": {"report": "ok"}}, got
