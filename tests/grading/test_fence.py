"""The fence around a worker's kernels shares the CPU as well as bounding processes: a notebook that starts
spinning processes in sessions of their own (``os.setsid``, which leaves the kernel's session and the kernel
scheduler's per-session sharing) still gets only its group's share, beside the kernels graded next to it."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.grading import cgroup
from autograder.grading.cgroup import PidsFence

SPINNER = "import os, time; os.setsid(); end = time.time() + 30\nwhile time.time() < end: pass"


@pytest.fixture
def fence():
    made = PidsFence(f"{cgroup.PREFIX}{os.getpid()}-test-cpu", 64)
    if not made.active:
        pytest.skip("no writable pids cgroup here")
    yield made
    made.remove()


def _groups(pid: int) -> dict[str, str]:
    """The process's cgroup per controller ("cpu", "pids"; "" for cgroup v2's one hierarchy)."""
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _cpu_group(pid: int) -> str:
    groups = _groups(pid)
    return groups.get("cpu", groups.get(""))


def test_a_fenced_process_and_the_sessions_it_starts_share_one_cpu_group(fence):
    if not fence.shares_cpu:
        pytest.skip("no writable cpu cgroup here")
    proc = subprocess.Popen([sys.executable, "-c", SPINNER])
    try:
        fence.add(proc.pid)
        time.sleep(0.2)
        assert _cpu_group(proc.pid).endswith(fence.path.name), _groups(proc.pid)
        assert _cpu_group(proc.pid) != _cpu_group(os.getpid())
    finally:
        proc.kill()
        proc.wait()


def test_a_child_entering_the_fence_by_its_path_joins_the_cpu_group_too(fence):
    """The factory's forked kernel enters the fence itself, from the path in its request (zygote.py)."""
    if not fence.shares_cpu:
        pytest.skip("no writable cpu cgroup here")
    code = f"from autograder.grading import cgroup; cgroup.enter({str(fence.path)!r}); {SPINNER}"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 20
        while _cpu_group(proc.pid) == _cpu_group(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _cpu_group(proc.pid).endswith(fence.path.name), _groups(proc.pid)
        assert _groups(proc.pid)["pids" if "pids" in _groups(proc.pid) else ""].endswith(fence.path.name)
    finally:
        proc.kill()
        proc.wait()


def test_removing_the_fence_removes_its_cpu_group(fence):
    if not fence.shares_cpu:
        pytest.skip("no writable cpu cgroup here")
    groups = list(fence.groups)
    fence.remove()
    assert not any(g.exists() for g in groups)
