"""The local pool never waits forever: a job whose worker stops answering (a kernel that sabotaged the
pool's synchronisation, a worker frozen by a signal) is abandoned at its deadline, the jobs beside it
are run again, and the class goes on."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

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


def test_a_frozen_worker_stalls_only_its_own_job(tmp_path):
    script = tmp_path / "stall.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    results = got["results"]
    assert results["frozen"] == {"job": "frozen", "stalled": True}
    assert all(results[j] == {"job": j, "ok": True} for j in ("a", "b", "c")), results
    assert got["seconds"] < 60
