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


def test_a_requester_that_leaves_before_the_reply_does_not_take_the_factory_down(own, tmp_path, monkeypatch):
    """A worker killed mid-request (the OOM killer, a stalled pool abandoned) closes its connection before
    the factory answers. Before, the reply's BrokenPipeError ended the factory, and every kernel, judging
    process and program runner of the class died with it. Now the reply is given up, and the child it
    forked is killed."""
    import socket

    import psutil

    monkeypatch.setenv(factory.ENV, own.socket)
    _judge(own, tmp_path)[1].close()  # the factory has imported everything: it answers at once from now on
    before = {p.pid for p in psutil.Process(own.proc.pid).children()}
    for _ in range(3):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(own.socket)
        sock.sendall(json.dumps({"kind": "judge"}).encode() + b"\n")
        sock.close()
    time.sleep(2)
    assert own.proc.poll() is None, "the factory died"
    reply, sock = _judge(own, tmp_path)  # and it still serves
    sock.close()
    os.kill(reply["pid"], 9)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = {p.pid for p in psutil.Process(own.proc.pid).children()} - before - {reply["pid"]}
        if not left:
            return
        time.sleep(0.1)
    pytest.fail(f"children forked for requesters that left are still running: {left}")


# One notebook, run by execute() in a process of its own: the grader's environment holds an instructor's
# token, the grading user's home holds a secret (two homes are denied: a scratch one, and the folder that
# holds the Python environment, as when the environment lives in the home), and Landlock is lowered to ABI 5
# (Linux 6.10 and earlier: no signal scoping), as by the sitecustomize in argv[2].
KERNEL = r'''
import json, os, subprocess, sys
from pathlib import Path
import nbformat
from autograder.grading import jail
from autograder.grading.execute import Limits, execute

root = Path(sys.argv[1])
home = root / "home"
home.mkdir()
(home / "secret").write_text("the grading user's secret")
jail.homes = lambda: [home, Path(sys.prefix).resolve().parent]
course = root / "class"  # not "course": the working folder is on sys.path
course.mkdir()
deny, allow = jail.isolation_paths(course)
decoy = subprocess.Popen(["sleep", "120"])
cells = {
    "env": "import os\nprint(sorted(os.environ))\n"
           "print(open('/proc/self/environ', 'rb').read().decode(errors='replace'))",
    "home": f"for p in [{str(home / 'secret')!r}, {str(Path(sys.prefix).resolve().parent / 'pyproject.toml')!r}"
            "]:\n"
            "    try:\n        open(p).read()\n        print('READ', p, 'ALLOWED')\n"
            "    except OSError as e:\n        print('READ', p, 'blocked', type(e).__name__)",
    "imports": "import sys\nfresh = 'sympy.physics.units' not in sys.modules\n"
               "import sympy.physics.units, xml.dom.minidom\n"
               "import course.plots\nprint('IMPORTED', fresh)",
    "signal": f"import os, signal\ntry:\n    os.kill({decoy.pid}, signal.SIGKILL)\n    print('SIGNAL ALLOWED')\n"
              "except OSError as e:\n    print('SIGNAL blocked', type(e).__name__)",
    "small-widget": "from comm import create_comm\nsmall = create_comm(target_name='x-small', "
                    "data={'state': {'_model_name': 'S'}, 'buffer_paths': [['b']]}, buffers=[b'tiny' * 25])",
    "widget-buffers": "from comm import create_comm\nbig = create_comm(target_name='x-big', "
                      "data={'state': {'_model_name': 'M'}, 'buffer_paths': []})\nbuf = bytes(2**20)\n"
                      "for k in range(30):\n"
                      "    big.send(data={'state': {}, 'buffer_paths': [[f'p{k}']]}, buffers=[buf])",
}
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells.values()])
run = execute(nb, course / ".scaling-course" / "work" / "w" / "k", deny, allow, Limits(), root / "kernel.log")
alive = decoy.poll() is None
decoy.kill()
outputs = {name: "".join(o.get("text", "") + str(o.get("data", "")) for o in c.get("outputs", []))
           for name, c in zip(cells, nb.cells)}
print(json.dumps({"outputs": outputs, "problems": run.problems, "isolation": run.isolation,
                  "decoy_alive": alive, "widgets": nb.metadata.get("widgets", {}),
                  "nb_bytes": len(nbformat.writes(nb))}))
'''

SIM_ABI5 = """
import autograder.grading.jail as _jail
_real = _jail.landlock_abi
_jail.landlock_abi = lambda: min(_real(), 5)
"""


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernel")
    (root / "sim").mkdir()
    (root / "sim" / "sitecustomize.py").write_text(SIM_ABI5)
    (root / "run.py").write_text(KERNEL)
    env = {**os.environ, "SC_INSTRUCTOR_TOKEN": "hub-token-4f1c9e2a",
           "PYTHONPATH": os.pathsep.join([str(root / "sim"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop(factory.ENV, None)
    proc = subprocess.run([sys.executable, str(root / "run.py"), str(root)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_kernel_sees_none_of_the_graders_environment(kernel_run):
    """Before, kernels inherited the grader's whole environment (an instructor's tokens), which a cell could
    print into its feedback."""
    env = kernel_run["outputs"]["env"]
    assert "SC_INSTRUCTOR_TOKEN" not in env and "hub-token-4f1c9e2a" not in env, env
    assert "PATH" in env and "HOME" in env and "SCALING_COURSE_GRADER" in env, env
    assert factory.ENV not in env, env


def test_a_kernel_cannot_read_the_grading_users_home_but_imports_from_its_environment(kernel_run):
    home = kernel_run["outputs"]["home"]
    assert "ALLOWED" not in home and home.count("blocked") >= 1, home
    assert "IMPORTED True" in kernel_run["outputs"]["imports"], kernel_run["outputs"]["imports"]


def test_a_kernel_cannot_signal_the_graders_processes_below_landlock_abi_6(kernel_run):
    """With no signal scoping (Landlock ABI < 6), the kernel's own PID namespace keeps every process of the
    grader out of its reach; where it has none, the isolation line says that signals are not confined."""
    if "private namespaces" not in kernel_run["isolation"]:
        assert "signals: not confined" in kernel_run["isolation"], kernel_run["isolation"]
        pytest.skip("no private namespaces on this system")
    assert "SIGNAL blocked" in kernel_run["outputs"]["signal"] and kernel_run["decoy_alive"], kernel_run["outputs"]


def test_widget_buffers_count_against_the_output_budget(kernel_run):
    """Before, binary buffers of widget messages were never counted: 30 MiB of them went into the notebook's
    metadata with a 5 MB budget. A small widget is kept, with its buffer."""
    assert kernel_run["nb_bytes"] < 2_000_000, kernel_run["nb_bytes"]
    assert any("output over the limit" in p for p in kernel_run["problems"]), kernel_run["problems"]
    small = [w for w in kernel_run["widgets"].get("application/vnd.jupyter.widget-state+json", {})
             .get("state", {}).values() if w.get("model_name") == "S"]
    assert small and small[0].get("buffers"), kernel_run["widgets"]


def test_the_isolation_line_says_when_signals_are_not_confined():
    """Before, "landlock ABI 5" without private namespaces read like full isolation, though a kernel could kill
    every process of the grading user."""
    from autograder.grading.execute import isolation

    assert "signals: not confined" in isolation(5, private=False)
    assert "signals: not confined" in isolation(0, private=False)
    assert "signals" not in isolation(6, private=False) and "signals" not in isolation(5, private=True)


def test_a_closed_factory_leaves_its_log_only_where_it_says_something(tmp_path):
    """Every run starts a factory with a log of its own: an empty one is removed when the factory stops, so runs
    do not pile up empty files in the course's work folder."""
    quiet = factory.Factory(tmp_path / "quiet")
    assert quiet.log.exists()
    quiet.close()
    assert not quiet.log.exists()
    loud = factory.Factory(tmp_path / "loud")
    loud.log.write_text("a traceback the staff may want\n")
    loud.close()
    assert loud.log.read_text() == "a traceback the staff may want\n"


# Imports the packages a notebook reads as a fresh kernel has them, then tries each module of argv[1] as an attribute
# of its parent; prints those that are not there.
FRESH = """
import importlib, json, sys
for top in ("course", "jax", "numpy", "sympy"):
    importlib.import_module(top)
missing = []
for name in json.loads(sys.argv[1]):
    parent, _, child = name.rpartition(".")
    if parent in sys.modules and not hasattr(sys.modules[parent], child):
        missing.append(name)
print(json.dumps(missing))
"""
PRELOADED = """
import json, sys
from autograder.grading import zygote
zygote._preload()
print(json.dumps(sorted(sys.modules)))
"""


def test_what_a_grading_kernel_reaches_without_importing_it_a_fresh_kernel_reaches_too():
    """A grading kernel is forked with the course's modules imported (and JAX, NumPy, SymPy), so ``course.models``
    resolves there after a plain ``import course``. Where a fresh kernel lacked it, an answer cell that used it passed
    the grader and failed in the student's own notebook. Matplotlib's modules are left out: no answer is a figure."""
    def last_line(args):
        out = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, check=True, cwd=ROOT)
        return json.loads(out.stdout.strip().splitlines()[-1])

    tops = ("course", "jax", "numpy", "sympy")
    preloaded = [m for m in last_line([PRELOADED]) if "." in m and m.split(".")[0] in tops
                 and not any(part.startswith("_") for part in m.split("."))]  # a package's private modules aside
    assert any(m.startswith("course.") for m in preloaded), preloaded  # the test sees what the zygote loads
    assert last_line([FRESH, json.dumps(preloaded)]) == []
