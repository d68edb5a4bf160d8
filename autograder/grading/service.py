"""A long-lived helper process spoken to in JSON lines, restarted when it fails.

Judging needs sympy, and running program answers needs JAX: importing them costs seconds, more
than the judging itself, so a grading worker keeps one judging process and one jailed program runner
alive across notebooks instead of starting one per notebook (both forked by the class's factory,
zygote.py, which has those modules imported already). A request that times out or kills the process
gets None back; the process is started afresh for the next request, and recycled after
``max_requests`` so nothing a program did can accumulate.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

Connect = Callable[[dict[str, Any], float], tuple[dict[str, Any], socket.socket] | None]


class Service:
    """A helper forked by the class's factory: ``request`` says which (factory.connect asks for it);
    the connection that asked becomes its stdin and stdout. Not our child, so it is killed, never
    waited for (the factory reaps it)."""

    def __init__(self, connect: Connect, request: dict[str, Any], max_requests: int = 50):
        self.connect, self.fork_request, self.max_requests = connect, request, max_requests
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.served = 0

    def request(self, payload: Any, timeout: float) -> Any | None:
        """The process's answer to ``payload``, or None if it failed or ran out of time."""
        if not self.ready(timeout):
            return None
        assert self.sock is not None
        try:
            self.sock.sendall((json.dumps(payload) + "\n").encode())
            line = self._readline(timeout)
        except (OSError, ValueError):
            line = None
        self.served += 1
        if line is None:
            self.close()
            return None
        try:
            return json.loads(line)
        except ValueError:
            self.close()
            return None

    def ready(self, timeout: float) -> bool:
        """Whether the process is up, forked afresh (within ``timeout``) where it died or served its share: a caller
        that times what the process runs for someone starts it first, and keeps that wait out of their time."""
        if self.alive() and self.served < self.max_requests:
            return True
        self.close()
        return self._start(timeout)

    def _readline(self, timeout: float) -> str | None:
        assert self.sock is not None
        deadline = time.monotonic() + timeout
        buf = bytearray()  # grows in place: a long reply (a program's results) costs its length, not its square
        fd = self.sock.fileno()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # the process died
                return None
            buf += chunk
        return buf.decode()

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def _start(self, timeout: float) -> bool:
        got = self.connect(self.fork_request, timeout)
        if got is None:
            return False
        reply, self.sock = got
        self.pid, self.served = int(reply["pid"]), 0
        return True

    def close(self) -> None:
        if self.pid is not None:
            for kill in (os.killpg, os.kill):  # its group, and itself if it had no session of its own yet
                with contextlib.suppress(OSError):
                    kill(self.pid, signal.SIGKILL)
            self.pid = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
