"""The class's process factory (autograder/grading/zygote.py, factory.py): it forks for the grader
alone, and what a worker asked for does not outlive the worker."""

import json
import os
import subprocess
import sys
import time

import pytest

from autograder.grading import factory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Asks the factory at argv[1] for a judging process, as a kernel that found its socket would; prints
# what came back.
ASK = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.settimeout(60)
try:  # refused: the factory may close the connection before the request is even sent
    s.sendall(json.dumps({"kind": "kernel", "roots": ["/"], "allow": ["/"], "writable": ["/"]}).encode() + b"\\n")
    print("REPLY", s.recv(4096).decode() or "<closed>")
except (BrokenPipeError, ConnectionResetError):
    print("REPLY <closed>")
"""


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    made = factory.Factory(tmp_path_factory.mktemp("factory"))
    yield made
    made.close()


def _judge(own, tmp_path):
    got = factory.connect({"kind": "judge"}, factory.START_SECONDS, tmp_path)
    assert got is not None, "the factory did not fork a judging process for its starter"
    return got


def test_the_factory_serves_the_process_that_started_it(own, tmp_path, monkeypatch):
    monkeypatch.setenv(factory.ENV, own.socket)
    reply, sock = _judge(own, tmp_path)
    with sock:
        sock.sendall(json.dumps({"chapter": "ch01_rooflines", "course_dir": str(tmp_path), "items": []}).encode()
                     + b"\n")
        sock.settimeout(60)
        assert json.loads(sock.makefile().readline()) == {}  # a judging process, answering
    os.kill(reply["pid"], 9)


def test_the_factory_refuses_processes_the_grader_did_not_start(own):
    """A kernel is the factory's own child, never the grader's: even where it can reach the socket (no
    private namespaces), asking for an unjailed kernel gets it nothing. Here a grandchild of the grader
    asks, which the same check refuses."""
    outer = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {ASK!r}, {own.socket!r}])"
    out = subprocess.run([sys.executable, "-c", outer], capture_output=True, text=True, timeout=120)
    assert "REPLY <closed>" in out.stdout, out.stdout + out.stderr


def test_a_worker_that_is_gone_takes_its_processes_with_it(own, tmp_path):
    """A worker the grader abandons (stalled) or that dies: the factory kills what it asked for."""
    worker = f"""
import os, sys
sys.path.insert(0, {ROOT!r})
os.environ[{factory.ENV!r}] = {own.socket!r}
from pathlib import Path
from autograder.grading import factory
reply, sock = factory.connect({{"kind": "judge"}}, 120, Path({str(tmp_path)!r}))
print(reply["pid"], flush=True)
os._exit(0)
"""
    out = subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True, timeout=180)
    judge = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(judge, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"the judging process {judge} of a dead worker is still running")
