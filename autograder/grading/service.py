"""A long-lived helper process spoken to in JSON lines, restarted when it fails.

Judging needs sympy, and running program answers needs JAX: importing them costs seconds, more
than the judging itself, so each grading worker keeps one judging process (and that one keeps one
jailed program runner) alive across notebooks instead of starting one per notebook. A request that
times out or kills the process gets None back; the process is started afresh for the next request,
and recycled after ``max_requests`` so nothing a program did can accumulate.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import Any


class Service:
    def __init__(self, command: list[str], cwd: str | None = None, env: dict[str, str] | None = None,
                 max_requests: int = 50, log: str | None = None, on_start: Callable[[int], None] | None = None):
        self.command, self.cwd, self.env, self.log, self.on_start = command, cwd, env, log, on_start
        self.max_requests = max_requests
        self.proc: subprocess.Popen | None = None
        self.served = 0

    def request(self, payload: Any, timeout: float) -> Any | None:
        """The process's answer to ``payload``, or None if it failed or ran out of time."""
        if self.proc is None or self.proc.poll() is not None or self.served >= self.max_requests:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(payload) + "\n")
            self.proc.stdin.flush()
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

    def _readline(self, timeout: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # the process died
                return None
            buf += chunk
        return buf.decode()

    def _start(self) -> None:
        self.close()
        stderr = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, cwd=self.cwd, env=self.env, start_new_session=True)
        if self.log:
            stderr.close()
        if self.on_start is not None:
            self.on_start(self.proc.pid)
        self.served = 0

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait()
            self.proc = None
