"""Neither runner waits forever: a job whose worker stops answering (a kernel that sabotaged the pool's
synchronisation, a worker frozen by a signal, a job that runs on) is abandoned at its deadline, the jobs
beside it are run again, and the class goes on. The local pool, and a Dask cluster."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    from autograder.grading.runners import run_local

    def work(job):
        if job == "frozen":
            os.kill(os.getpid(), signal.SIGSTOP)  # this worker never hands a result back
        time.sleep(0.2)
        return {"job": job, "ok": True}

    if __name__ == "__main__":
        jobs = ["a", "frozen", "b", "c"]
        out = {}
        started = time.monotonic()
        for job, result in run_local(work, jobs, 2, on_crash=lambda j: {"job": j, "crashed": True},
                                     seconds=5, on_stall=lambda j: {"job": j, "stalled": True}):
            out[job] = result
        print(json.dumps({"results": out, "seconds": time.monotonic() - started}))
""")


def _run(tmp_path, text: str, timeout: int) -> tuple[dict, float]:
    """Run a runner script in a process of its own; its results by job, and its seconds."""
    script = tmp_path / "runner.py"
    script.write_text(text)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    return got["results"], got["seconds"]


def test_a_frozen_worker_stalls_only_its_own_job(tmp_path):
    results, seconds = _run(tmp_path, SCRIPT, 120)
    assert results["frozen"] == {"job": "frozen", "stalled": True}
    assert all(results[j] == {"job": j, "ok": True} for j in ("a", "b", "c")), results
    assert seconds < 60


# A class of honest jobs with one bad job among them, on 4 workers; each result says when and where it ran.
CLASS_SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    from autograder.grading.runners import run_local

    MODE = sys.argv[1]

    def work(job):
        started = time.monotonic()
        if job == "bad" and MODE == "crash":
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
        if job == "bad" and MODE == "stall":
            time.sleep(3600)
        time.sleep(0.4)
        return {"ok": True, "pid": os.getpid(), "start": started, "end": time.monotonic()}

    if __name__ == "__main__":
        jobs = [f"h{i}" for i in range(3)] + ["bad"] + [f"h{i}" for i in range(3, 40)]
        out = {}
        started = time.monotonic()
        for job, result in run_local(work, jobs, 4, on_crash=lambda j: {"crashed": True},
                                     seconds=3, on_stall=lambda j: {"stalled": True}):
            assert job not in out, job  # each job's result comes once
            out[job] = result
        print(json.dumps({"results": out, "seconds": time.monotonic() - started}))
""")


@pytest.mark.parametrize("mode", ["crash", "stall"])
def test_one_bad_job_costs_only_its_own_grade_and_the_class_goes_on_at_full_width(tmp_path, mode):
    """A job that kills its worker (or stalls it) twice gets the failure; the jobs queued behind it were never
    suspects. Before, every job still queued when the pool broke got a strike, the rest of the class ran one
    at a time, and the jobs queued behind the bad one in that serial round got a second strike: zero."""
    script = tmp_path / "class.py"
    script.write_text(CLASS_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    assert results.pop("bad") == ({"crashed": True} if mode == "crash" else {"stalled": True})
    assert len(results) == 40 and all(r.get("ok") for r in results.values()), results
    # After the bad job's second failure (alone), the rest of the class runs side by side again: the last
    # third of the class to start did not run one at a time.
    late = sorted(results.values(), key=lambda r: r["start"])[-len(results) // 3:]
    assert any(a["start"] < b["end"] and b["start"] < a["end"] for a, b in itertools.combinations(late, 2)), late


DASK_SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    from autograder.grading.runners import run_dask

    def work(job):
        if job == "stuck":
            time.sleep(3600)  # runs on past any deadline, in a live worker
        if job == "frozen":
            os.kill(os.getpid(), signal.SIGSTOP)  # this worker never hands a result back
        time.sleep(0.2)
        return {"job": job, "ok": True}

    if __name__ == "__main__":
        from dask.distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            jobs = ["a", "stuck", "b", "frozen", "c"]
            out = {}
            started = time.monotonic()
            for job, result in run_dask(work, jobs, cluster.scheduler_address, lambda j: {"job": j, "crashed": True},
                                        seconds=3, on_stall=lambda j: {"job": j, "stalled": True}):
                out[job] = result
            print(json.dumps({"results": out, "seconds": time.monotonic() - started}))
""")


def test_a_stalled_dask_job_is_cancelled_and_the_class_goes_on(tmp_path):
    """Before the deadline, run_dask waited on the stuck job for good (still waiting after 90 s)."""
    pytest.importorskip("dask.distributed")
    results, seconds = _run(tmp_path, DASK_SCRIPT, 240)
    assert results["stuck"] == {"job": "stuck", "stalled": True}
    assert results["frozen"] == {"job": "frozen", "stalled": True}
    assert all(results[j] == {"job": j, "ok": True} for j in ("a", "b", "c")), results
    assert seconds < 120


TORN_SCRIPT = textwrap.dedent("""
    import gc, json, os, signal, struct, sys, time
    from multiprocessing.queues import SimpleQueue
    from autograder.grading.runners import run_local

    def work(job):
        if job == "torn":
            # The worker stops halfway through handing its result back: the pool's reader has a message's
            # length and a few of its bytes, and waits for the rest.
            results = next(o for o in gc.get_objects() if isinstance(o, SimpleQueue))
            os.write(results._writer.fileno(), struct.pack("!i", 1 << 20) + b"half a result")
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        time.sleep(0.2)
        return {"job": job, "ok": True}

    if __name__ == "__main__":
        out = {}
        for job, result in run_local(work, ["a", "torn", "b", "c"], 2, on_crash=lambda j: {"crashed": True},
                                     seconds=3, on_stall=lambda j: {"stalled": True}):
            out[job] = result
        print(json.dumps({"results": out, "seconds": 0}), flush=True)
""")


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_worker_stopped_while_handing_back_its_result_does_not_hold_the_grader_at_exit(tmp_path, how):
    """A worker killed (or frozen) halfway through writing its result left the pool's reading thread waiting
    for the rest of the message forever, and Python waits for that thread before it exits: a Ctrl-C that
    caught a worker handing back its result printed "interrupted" and then never returned."""
    script = tmp_path / "torn.py"
    script.write_text(TORN_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    assert results.pop("torn") == {"stalled": True}
    assert all(r.get("ok") for r in results.values()) and len(results) == 3, results
