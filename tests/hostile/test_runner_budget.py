"""A program runner serves many notebooks, of many students, and its CPU limit covers its whole life: each
program's budget must still be its own. One student's programs that spend the runner's CPU must not cost a later
program of a bystander its grade: the runner is replaced before a program could pass its limit, and a program
whose runner dies of what earlier programs used is run again in a fresh one. A program that passes its own time
limit still fails, once. Scaled down (a runner CPU limit of a few seconds) so that it runs in seconds."""

import os
import resource

import jax
import jax.numpy as jnp

from autograder.grading import judge
from autograder.grading.service import Service
from autograder.questions import load_chapter
from tests.chapter_checks import recorded

CH = load_chapter("ch03_sharding")
Q = CH["ch03-cx2-case1-local"]  # x[64, 256] split on X, y[256, 128] on every device
LIMIT = 6  # CPU seconds over the runner's life (seconds * 50 in the grader), lowered here
MARGIN = 3  # the burners stop this close to the limit: less than the bystander's program uses


def _busy(y, n):
    """n steps of a small matmul on the replicated operand: CPU time and no collective."""
    w = y[:128, :]
    return jax.lax.fori_loop(0, n, lambda i, a: jnp.tanh(a @ w * 1e-2 + w), w).sum()


def _burner(x, y):
    """About a CPU-second of work, and a wrong answer."""
    return x[:, :128] + _busy(y, 2000)


def _slow(x, y):
    """The model's answer, after about three and a half CPU-seconds of work that changes nothing: more than the
    margin, and in a fresh runner well inside the limit on a slower machine too. Judged in full, it earns half: its
    matrix products are the waste the grader weighs (``programs.COMPUTE_SLACK``), not a budget spent."""
    return Q.solution(x, y) + 0.0 * _busy(y, 9000)


def _tree(pid):
    """A runner's processes: the one the factory forked, and (in private namespaces) the ones it forked."""
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [q for c in f.read().split() for q in _tree(int(c))]
    except OSError:
        pass
    return out


def _cpu(pid):
    """CPU seconds of the runner's busiest process: the one its limit bounds."""
    used = [0.0]
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            used.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
        except OSError:
            pass
    return max(used)


def _runner():
    (service,) = [s for s in judge._runners.values() if s.alive()]
    return service


def _judged(fn, course_dir, student, seconds=30, each=20):
    answer = recorded(Q, fn)
    return judge.judge_programs(CH, [{"qid": Q.qid, "answer": answer}], course_dir, student, seconds=seconds,
                                each=each)[Q.qid]


def test_others_programs_do_not_spend_a_bystanders_budget(tmp_path, runner_request):
    runner_request["cpu"] = LIMIT
    first = None
    for k in range(6):  # one student's programs bring the runner close to its limit (or have it replaced)
        v = _judged(_burner, tmp_path, f"mallory{k}")
        assert v.diagnosis == "wrong_values", v.message
        first = first or _runner().pid
        if _cpu(_runner().pid) > LIMIT - MARGIN or _runner().pid != first:
            break
    v = _judged(_slow, tmp_path, "bystander")
    assert (v.score, v.diagnosis) == (0.5, "compute"), v.message


def test_a_program_whose_runner_died_of_earlier_programs_is_run_again(tmp_path, runner_request):
    assert _judged(_burner, tmp_path, "mallory", seconds=31).diagnosis == "wrong_values"
    spent = _runner()
    pid, used = spent.pid, _cpu(spent.pid)
    for p in _tree(pid):  # what earlier programs used leaves the runner no CPU time: as if spent by others
        resource.prlimit(p, resource.RLIMIT_CPU, (max(1, int(used)),) * 2)
    v = _judged(_slow, tmp_path, "bystander", seconds=31)
    assert (v.score, v.diagnosis) == (0.5, "compute"), v.message
    assert _runner().pid != pid


def test_a_runner_with_room_is_kept(tmp_path, runner_request):
    assert _judged(Q.solution, tmp_path, "alice", seconds=32).score == 1
    pid = _runner().pid
    assert _judged(_burner, tmp_path, "mallory", seconds=32).diagnosis == "wrong_values"
    assert _judged(Q.solution, tmp_path, "bob", seconds=32).score == 1
    assert _runner().pid == pid


def _forever(x, y):
    return jax.lax.while_loop(lambda c: c.sum() < jnp.inf, lambda c: c + 1.0, Q.solution(x, y))


def test_a_program_past_its_own_limit_still_fails_and_is_not_run_again(tmp_path, runner_request, monkeypatch):
    assert _judged(Q.solution, tmp_path, "alice", seconds=33).score == 1  # the runner has served before
    asked = []
    request = Service.request

    def counted(self, payload, timeout):
        asked.append(payload)
        return request(self, payload, timeout)

    monkeypatch.setattr(Service, "request", counted)
    v = _judged(_forever, tmp_path, "mallory", seconds=33, each=3)
    assert (v.score, v.diagnosis) == (0, "program_failed"), v.message
    assert [p for p in asked if p["items"]] == asked[:1]  # run once; then a fresh runner is asked to run nothing
    assert asked[1:] == [{"items": []}]
