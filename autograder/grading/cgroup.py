"""A process-count fence around a grading worker's kernels, where the system lets us build one.

``RLIMIT_NPROC`` cannot stop a fork bomb when grading runs as root (root ignores it) and counts the
user's other processes when it does not; a ``pids`` cgroup bounds exactly the processes of one
worker's kernel factory and everything they start, and lets the worker kill them all after each
notebook, including children that left the kernel's session. Where cgroups are not writable (no
root, no delegation) this does nothing and the other limits still apply.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))  # cgroup v1, then v2


PREFIX = "scaling-course-"


class PidsFence:
    def __init__(self, name: str, max_pids: int):
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

    @property
    def active(self) -> bool:
        return self.path is not None

    def add(self, pid: int) -> None:
        if self.path is not None:
            try:
                (self.path / "cgroup.procs").write_text(str(pid))
            except OSError:
                self.path = None

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
            with contextlib.suppress(OSError):
                self.path.rmdir()


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
