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


# System V shared memory, which no process's address space counts (RLIMIT_AS), held and touched after a line on stdin
# (so that the process is in the fence first); the segment is marked for removal at once, so none outlives the test.
SHARED_MEMORY = """
import ctypes, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype, libc.shmat.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
size = 256 * 2**20
sys.stdin.readline()
segment = libc.shmget(0, ctypes.c_size_t(size), 0o1000 | 0o600)
address = libc.shmat(segment, None, 0)
libc.shmctl(segment, 0, None)
ctypes.memset(address, 1, size)
print("held", flush=True)
"""


def test_a_kernels_fence_bounds_the_shared_memory_it_holds():
    """A kernel held 6 GiB of System V shared memory under a 4 GiB address-space limit: its fence's memory group
    counts it, and stops the process past the group's limit."""
    made = PidsFence(f"{cgroup.PREFIX}{os.getpid()}-test-memory", 64, memory=64 * 2**20)
    try:
        if made.memory is None:
            pytest.skip("no writable memory cgroup here")
        proc = subprocess.Popen([sys.executable, "-c", SHARED_MEMORY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        made.add(proc.pid)
        out, _ = proc.communicate("go\n", timeout=60)
        assert "held" not in out and proc.returncode == -9, (out, proc.returncode)
    finally:
        made.remove()


def test_a_process_entering_a_fence_is_the_first_the_oom_killer_takes(fence):
    script = (f"from autograder.grading.cgroup import enter; enter({str(fence.path)!r}); "
              "print(open('/proc/self/oom_score_adj').read())")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "1000"
