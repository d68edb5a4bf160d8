"""A private view of the machine for one kernel: its own mounts, network, IPC and user namespace.

Landlock decides which files a kernel may read and write, but not everything a kernel can reach goes
through a file it opens: ``connect()`` to another kernel's Unix socket, a UDP datagram to a port on
the loopback, a POSIX semaphore or a file in ``/dev/shm``, a block device left readable. So each
kernel, right after it is forked and before it applies Landlock, enters new namespaces (Linux,
unprivileged through a user namespace, as root too, where the system allows it) and rebuilds its view:

- the shared temporary folders (``/tmp``, ``/var/tmp``, the grader's temporary folder) become an
  empty memory file system, into which only the kernel's own folders (its work and socket folders,
  and the read-only ones it is allowed, where they lie in those folders) are bound back: other
  kernels' sockets, of this class or of any other grader on the machine, are no longer there;
- ``/dev`` becomes a small memory file system with ``null``, ``zero``, ``full``, ``random`` and
  ``urandom`` bound from the real one, and a fresh ``/dev/shm``; nothing written there outlives the
  kernel or is seen by another;
- the network namespace is new and empty (not even a loopback that is up): no TCP, UDP or abstract
  sockets reach anything outside; the grader talks to the kernel over its socket files, which work
  across network namespaces;
- the IPC namespace is new (System V and POSIX message queues).

Paths opened through ``/proc/<pid>/root`` or ``cwd`` would lead back into another kernel's view;
Landlock refuses those, since they need ptrace access to a process outside the kernel's domain.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .jail import DEVICES

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18
SHM_BYTES = 256 * 2**20
_libc = ctypes.CDLL(None, use_errno=True)


def covered_folders() -> list[Path]:
    """The shared scratch folders a kernel sees empty (``/dev`` is rebuilt separately)."""
    folders = {Path(tempfile.gettempdir()).resolve(), Path("/tmp").resolve(), Path("/var/tmp").resolve()}
    return sorted(p for p in folders if p.is_dir())


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    args = [s.encode() if s is not None else None for s in (source, target, fstype)]
    _check(_libc.mount(*args, ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def _enter() -> None:
    """New user, mount, network and IPC namespaces, the caller mapped to itself."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates to the machine


def _bind_back(fds: dict[Path, int]) -> None:
    for path, fd in fds.items():
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        _mount(f"/proc/self/fd/{fd}", str(path), None, MS_BIND | MS_REC)
        os.close(fd)


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without those inside another one (binding the outer one shows them already)."""
    out: list[Path] = []
    for p in sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts)):
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def isolate(keep: Iterable[Path]) -> None:
    """Enter private namespaces and rebuild the view described above, keeping the ``keep`` paths
    (the kernel's own folders and what it may read) where they lie under a covered folder."""
    covered = covered_folders()
    keep = [p for p in _outermost(keep) if p.exists() and any(c == p or c in p.parents for c in covered)]
    _enter()
    # Opened in the new mount namespace (a bind mount's source must lie in it), before anything is
    # covered: once a folder is hidden, its contents cannot be found again.
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in keep}
    devices = {Path("/dev", d): os.open(f"/dev/{d}", os.O_PATH | os.O_CLOEXEC) for d in DEVICES
               if os.path.exists(f"/dev/{d}")}
    for folder in _outermost(covered):
        _mount("tmpfs", str(folder), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    _bind_back(fds)
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=1m")
    _bind_back(devices)
    Path("/dev/shm").mkdir()
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={SHM_BYTES}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{name}")


def available() -> bool:
    """Whether a forked child can enter the namespaces here (some containers and kernels forbid
    user namespaces); asked once, in a throwaway child, by the kernel factory before it serves."""
    if not hasattr(os, "fork") or not os.path.exists("/proc/self/uid_map"):
        return False
    pid = os.fork()
    if pid == 0:
        try:
            _enter()
            _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=1m")
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
