"""A process-count fence around a grading worker's kernels, where the system lets us build one, and a
CPU group beside it.

``RLIMIT_NPROC`` cannot stop a fork bomb when grading runs as root (root ignores it) and counts the
user's other processes when it does not; a ``pids`` cgroup bounds exactly the processes of one
worker's kernel factory and everything they start, and lets the worker kill them all after each
notebook, including children that left the kernel's session. Where cgroups are not writable (no
root, no delegation) this does nothing and the other limits still apply.

The memory group (a kernel's fence only) bounds what the kernel and all it starts hold together, in RAM and in
shared memory: ``RLIMIT_AS`` bounds each process's address space, but System V shared memory, which a kernel's own
IPC namespace still grants, belongs to no process's, and a kernel held 6 GiB of it past a 4 GiB limit; had it taken
the machine's RAM, the system's OOM killer would have picked the process of the most resident memory, the grader.
Past its group's limit the kernel is stopped, its own notebook's loss alone.

The CPU group shares the machine's cores equally between the workers' kernels. Without it, the kernel
scheduler shares CPU per session: a notebook that starts spinning processes in sessions of their own
(``os.setsid``) took cores from the kernels graded beside it (a bystander's notebook ran 13 times slower
beside 32 of them), and the CPU-time limit, per process, does not add them up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))  # cgroup v1, then v2
# cgroup v1's cpu hierarchies, mounted alone or with cpuacct; under v2, the pids fence's own folder.
CPU_ROOTS = (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct"))
# cgroup v1's memory hierarchy, where a group is made inside the grader's own (a container's may be all it can write);
# under v2, the pids fence's own folder.
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")


PREFIX = "scaling-course-"


class PidsFence:
    def __init__(self, name: str, max_pids: int, memory: int | None = None):
        self.path: Path | None = None
        for root in ROOTS:
            _remove_stale(root)
            if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
                continue
            if root.name != "pids" and "pids" not in (root / "cgroup.controllers").read_text().split():
                continue
            try:
                path = root / name
                path.mkdir(exist_ok=True)
                (path / "pids.max").write_text(str(max_pids))
                self.path = path
                break
            except OSError:
                continue
        self.groups: list[Path] = [self.path] if self.path else []
        cpu = _cpu_group(self.path) if self.path else None
        if cpu is not None and cpu != self.path:
            self.groups.append(cpu)
        # ``memory``: the bytes the fenced processes may hold together (None: no memory group)
        self.memory = _memory_group(self.path, memory) if self.path and memory else None
        if self.memory is not None and self.memory not in self.groups:
            self.groups.append(self.memory)

    @property
    def shares_cpu(self) -> bool:
        """Do the fenced processes share the CPU as one group (a cpu cgroup), beside the other workers'?"""
        return self.path is not None and (len(self.groups) > 1 or _v2_cpu(self.path))

    @property
    def active(self) -> bool:
        return self.path is not None

    def add(self, pid: int) -> None:
        if self.path is not None:
            try:
                (self.path / "cgroup.procs").write_text(str(pid))
            except OSError:
                self.path = None
                return
            _join(self.groups[1:], pid)

    def pids(self) -> list[int]:
        if self.path is None:
            return []
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill_all(self, keep: int | None = None) -> int:
        """SIGKILL every process in the fence but ``keep``; returns how many were killed."""
        killed = 0
        for pid in self.pids():
            if pid != keep:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass
        return killed

    def remove(self) -> None:
        if self.path is not None:
            self.kill_all()
            for group in reversed(self.groups):
                _remove_when_empty(group)


def enter(fence: str) -> None:
    """The calling process joins the fence at path ``fence`` and its CPU and memory groups (a kernel forked by the
    factory, before it forks anything): what it starts stays in them. Should the machine run out of memory all the
    same, its OOM killer takes a kernel first (``oom_score_adj``: anyone may raise their own)."""
    pid, name = str(os.getpid()), Path(fence).name
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")
    with contextlib.suppress(OSError):
        Path(fence, "cgroup.procs").write_text(pid)
        memory = _own_memory_root()
        groups = [root / name for root in (*CPU_ROOTS, *([memory] if memory else [])) if (root / name).is_dir()]
        _join(groups, int(pid))


def _cpu_group(fence: Path) -> Path | None:
    """A CPU group named as the fence: under cgroup v1 a folder in the cpu hierarchy; under v2 the fence's own
    folder, once its parent hands the cpu controller down. None where neither can be made."""
    if fence.parent.name != "pids":  # cgroup v2: one hierarchy
        with contextlib.suppress(OSError):
            if "cpu" in (fence.parent / "cgroup.controllers").read_text().split():
                (fence.parent / "cgroup.subtree_control").write_text("+cpu")
        return fence if _v2_cpu(fence) else None
    for root in CPU_ROOTS:
        if not (root / "cgroup.procs").exists():
            continue
        _remove_stale(root)
        try:
            (root / fence.name).mkdir(exist_ok=True)
            return root / fence.name
        except OSError:
            continue
    return None


def _own_memory_root() -> Path | None:
    """The grader's own group in cgroup v1's memory hierarchy (None under v2, or where there is none)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                return MEMORY_ROOT / path.lstrip("/")
    except (OSError, ValueError):
        pass
    return None


def _memory_group(fence: Path, limit: int) -> Path | None:
    """A memory group named as the fence, holding at most ``limit`` bytes: under cgroup v2 the fence's own folder,
    once its parent hands the memory controller down; under v1 a folder in the grader's own memory group. None where
    neither can be made."""
    if fence.parent.name != "pids":  # cgroup v2: one hierarchy
        with contextlib.suppress(OSError):
            if "memory" in (fence.parent / "cgroup.controllers").read_text().split():
                (fence.parent / "cgroup.subtree_control").write_text("+memory")
        try:
            (fence / "memory.max").write_text(str(limit))
            return fence
        except OSError:
            return None
    root = _own_memory_root()
    if root is None or not (root / "cgroup.procs").exists():
        return None
    _remove_stale(root)
    group = root / fence.name
    try:
        group.mkdir(exist_ok=True)
        (group / "memory.limit_in_bytes").write_text(str(limit))
        return group
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None


def _v2_cpu(path: Path) -> bool:
    try:
        return (path / "cpu.weight").exists()
    except OSError:
        return False


def _join(groups: list[Path], pid: int) -> None:
    for group in groups:
        with contextlib.suppress(OSError):
            (group / "cgroup.procs").write_text(str(pid))


def _remove_when_empty(group: Path) -> None:
    """rmdir fails while a process is in the group: the killed ones leave it within moments."""
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def _remove_stale(root: Path) -> None:
    """Empty fences left by graders that were killed (their worker pid is in the name)."""
    for path in root.glob(PREFIX + "*"):
        try:
            worker = int(path.name[len(PREFIX):].split("-")[0])
            os.kill(worker, 0)
        except (ValueError, ProcessLookupError):
            with contextlib.suppress(OSError):
                path.rmdir()  # fails while processes remain in it: then it is not stale
        except OSError:
            pass
