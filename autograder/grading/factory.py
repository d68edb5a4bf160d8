"""The class's process factory (zygote.py), seen from a grading worker: start it, or find the one the
grader started, and ask it for kernels, judging processes and program runners.

``scaling-course grade`` starts one factory before its workers and names its socket in the
environment they inherit, so a class pays the factory's imports once, not once per worker. A
process without one (a Dask worker, a test, a worker whose factory died) starts its own on first
use, served to it alone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .cgroup import PREFIX as FENCE_PREFIX
from .cgroup import PidsFence
from .zygote import read_line

ENV = "SCALING_COURSE_FACTORY"  # the socket of the factory this process's parent started
START_SECONDS = 120  # the first request waits for the factory's imports
MEMORY_BYTES = 16 * 2**30
MAX_PIDS = 4096  # the factory, judges and runners of a class (JAX alone starts dozens of threads)


class Factory:
    """A factory this process started, with its pids fence; it dies with this process."""

    def __init__(self, home: Path):
        from .jail import PYTHON, jail_command, kernel_environment

        folder = Path(tempfile.mkdtemp(prefix="sc-f-"))  # 0700: other users cannot even reach the socket
        self.socket = str(folder / "z")
        self.fence = PidsFence(f"{FENCE_PREFIX}{os.getpid()}-factory", MAX_PIDS)
        cmd = jail_command([], [], [], MEMORY_BYTES, 10**6, limits_only=True) + [
            "--", *PYTHON, "-m", "autograder.grading.zygote", self.socket]
        self.log = home / f"factory-{os.getpid()}.log"
        home.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True,
                                         env=kernel_environment(os.environ) | {"HOME": str(home)})
        self.fence.add(self.proc.pid)
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the factory, and with it what it forked (its children die with it)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.fence.remove()
        with contextlib.suppress(OSError):
            os.unlink(self.socket)
            os.rmdir(os.path.dirname(self.socket))
        with contextlib.suppress(OSError):  # one per run: kept only where it says something
            if self.log.stat().st_size == 0:
                self.log.unlink()


_own: list[Factory] = []
_refused: set[str] = set()  # shared factories found dead


def _socket_path(home: Path) -> str:
    shared = os.environ.get(ENV)
    if shared and shared not in _refused:
        return shared
    if not _own or _own[0].proc.poll() is not None:
        _own[:] = [Factory(home)]
    return _own[0].socket


@contextlib.contextmanager
def shared(home: Path) -> Iterator[None]:
    """One factory for every worker started inside this block (they inherit its socket's name)."""
    factory = Factory(home)
    deadline = time.monotonic() + START_SECONDS
    while not os.path.exists(factory.socket) and factory.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # bound before its imports: a fraction of a second
    before = os.environ.get(ENV)
    os.environ[ENV] = factory.socket
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before
        factory.close()


def connect(request: dict[str, Any], timeout: float, home: Path) -> tuple[dict[str, Any], socket.socket] | None:
    """Ask the factory for a child; its reply, and the connection (a service's stdin and stdout).
    None if the factory cannot be reached or does not answer in ``timeout`` seconds (the first
    request waits for the factory's imports)."""
    deadline = time.monotonic() + max(timeout, START_SECONDS)
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = _socket_path(home)
        try:
            sock.connect(path)
            break
        except OSError as e:  # not bound yet (the factory is starting), or gone
            sock.close()
            if path == os.environ.get(ENV) and isinstance(e, ConnectionRefusedError | FileNotFoundError):
                _refused.add(path)  # the grader's factory is gone: this process starts its own
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
    try:
        sock.sendall((json.dumps(request) + "\n").encode())
        line = read_line(sock, max(0.1, deadline - time.monotonic()))
        if not line.endswith(b"\n"):
            raise OSError("the factory closed the connection")
        return json.loads(line), sock
    except (OSError, ValueError):
        sock.close()
        return None
