"""The jail: what a grading kernel may read, write, connect to and signal."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading.jail import landlock_abi, readable_roots

PROBE = """
import os, socket, sys
def attempt(label, fn):
    try:
        fn(); print(label, "allowed")
    except OSError as e:
        print(label, "denied")
attempt("read-secret", lambda: open(sys.argv[1]).read())
attempt("read-package", lambda: open(sys.argv[2]).read())
attempt("write-work", lambda: open(sys.argv[3] + "/x", "w").write("x"))
attempt("write-outside", lambda: open(sys.argv[4] + "/y", "w").write("y"))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", 9), timeout=2))
attempt("signal-parent", lambda: os.kill(os.getppid(), 0))
"""


def test_readable_roots_skip_denied_trees(tmp_path):
    (tmp_path / "secret").mkdir()
    (tmp_path / "public").mkdir()
    (tmp_path / "public" / "up").symlink_to(tmp_path)  # a link above the secret must not re-open it
    (tmp_path / "public" / "in").symlink_to(tmp_path / "secret")
    roots = readable_roots([tmp_path / "secret"])
    assert tmp_path / "public" / "up" not in roots and tmp_path / "public" / "in" not in roots
    assert not any(r.is_symlink() and tmp_path in [r.resolve(), *r.resolve().parents] for r in roots)
    assert not any(r == tmp_path / "secret" or tmp_path / "secret" in r.parents for r in roots)
    assert not any(r in (tmp_path, tmp_path.parent) for r in roots)


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock on this kernel")
def test_kernel_reads_package_but_not_course_and_writes_only_its_folder(tmp_path):
    course, work, other = tmp_path / "course", tmp_path / "work", tmp_path / "other"
    for d in (course, work, other):
        d.mkdir()
    (course / "solutions.py").write_text("ANSWER = 42")
    package = course / "course_pkg.py"
    package.write_text("x = 1")
    cmd = [sys.executable, "-m", "autograder.grading.jail", "--deny", str(course), "--deny", str(other),
           "--allow", str(package), "--rw", str(work), "--",
           sys.executable, "-c", PROBE, str(course / "solutions.py"), str(package), str(work), str(other)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    result = dict(line.split() for line in out.stdout.splitlines())
    assert result["read-secret"] == "denied"
    assert result["read-package"] == "allowed"
    assert result["write-work"] == "allowed"
    assert result["write-outside"] == "denied"
    if landlock_abi() >= 4:
        assert result["connect"] == "denied"
    if landlock_abi() >= 6:
        assert result["signal-parent"] == "denied"


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock on this kernel")
def test_an_allowed_tree_does_not_reopen_a_denied_one_inside_it(tmp_path):
    """A grader installed from a wheel keeps ``solutions`` inside site-packages, under ``sys.prefix``, which
    kernels may read: Landlock adds rules up, so allowing the prefix used to re-open the denied folder."""
    prefix = tmp_path / "env"
    site = prefix / "lib" / "site-packages"
    (site / "solutions").mkdir(parents=True)
    (site / "solutions" / "ch01.py").write_text("ANSWER = 42")
    (site / "course").mkdir()
    (site / "course" / "hardware.py").write_text("x = 1")
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    cmd = [sys.executable, "-m", "autograder.grading.jail", "--deny", str(site / "solutions"), "--deny", str(other),
           "--allow", str(prefix), "--rw", str(work), "--",
           sys.executable, "-c", PROBE, str(site / "solutions" / "ch01.py"), str(site / "course" / "hardware.py"),
           str(work), str(other)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    result = dict(line.split() for line in out.stdout.splitlines())
    assert result["read-secret"] == "denied", out.stdout + out.stderr
    assert result["read-package"] == "allowed"
    # Python finds modules by listing site-packages: that still works, and imports from it too.
    probe = (f"import os, sys; sys.path.insert(0, {str(site)!r}); print(sorted(os.listdir({str(site)!r})));"
             " import course.hardware; print('imported')")
    cmd = cmd[:cmd.index("--") + 1] + [sys.executable, "-c", probe]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines() == ["['course', 'solutions']", "imported"], out.stdout + out.stderr


def test_memory_limit_applies_without_landlock_too():
    cmd = [sys.executable, "-m", "autograder.grading.jail", "--memory", str(2 * 2**30), "--",
           sys.executable, "-c", "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert int(out.stdout) == 2 * 2**30


LIMITS = """
import resource
print([resource.getrlimit(getattr(resource, name)) for name in ("RLIMIT_AS", "RLIMIT_CPU")])
"""


def test_a_jailed_process_cannot_raise_its_limits_again():
    """Only the soft limits were set: a kernel could raise its memory limit to the hard one it inherited (12 GiB to
    16 GiB) and its CPU time to a million seconds. Now its hard limits are its limits (raising one again takes a
    privilege no kernel has in its own user namespace)."""
    jail = [sys.executable, "-m", "autograder.grading.jail", "--memory", str(2 * 2**30), "--cpu", "300", "--",
            sys.executable, "-c", LIMITS]
    inherited = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (16 * 2**30, 16 * 2**30)); "
                 "resource.setrlimit(resource.RLIMIT_CPU, (10**6, 10**6)); os.execv(sys.executable, sys.argv[1:])")
    out = subprocess.run([sys.executable, "-c", inherited, *jail], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str([(2 * 2**30, 2 * 2**30), (300, 300)]), out.stdout + out.stderr


def test_dev_is_not_a_readable_root():
    """Block devices, the kernel log and the like are never in what a kernel may read."""
    assert not any(r == Path("/dev") or Path("/dev") in r.parents for r in readable_roots([]))


PRIVATE_VIEW = """
import os, socket, sys
from pathlib import Path
from autograder.grading.namespaces import isolate
own, other = Path(sys.argv[1]), Path(sys.argv[2])
isolate(keep=[own])
(own / "written").write_text("x")
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(str(other / "sock")); print("other-socket reached")
except OSError:
    print("other-socket hidden")
print("dev", sorted(os.listdir("/dev")))
print("shm", os.listdir("/dev/shm"))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("127.0.0.1", 9)); print("udp sent")
except OSError:
    print("udp refused")
"""


def _namespaces_available() -> bool:
    """Asked in a fresh process: this one has JAX's threads, and the probe forks."""
    probe = "from autograder.grading.namespaces import available; raise SystemExit(0 if available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[2]).returncode == 0


@pytest.mark.skipif(not _namespaces_available(), reason="no user namespaces on this system")
def test_a_kernel_sees_its_own_folder_and_nothing_of_the_others(tmp_path):
    """In its private view a kernel keeps its own folder (writable, the real one), while another
    kernel's socket beside it, shared memory and the network are gone."""
    import socket
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="sc-view-"))  # in the shared temporary folder, as kernels' are
    try:
        own, other = root / "own", root / "other"
        own.mkdir()
        other.mkdir()
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(other / "sock"))
        listening.listen()
        shm = Path("/dev/shm") / f"sc-view-{os.getpid()}"
        shm.write_text("x")
        try:
            out = subprocess.run([sys.executable, "-c", PRIVATE_VIEW, str(own), str(other)], capture_output=True,
                                 text=True, timeout=60, cwd=Path(__file__).resolve().parents[2]).stdout
        finally:
            listening.close()
            shm.unlink()
        assert "other-socket hidden" in out and "udp refused" in out, out
        assert "dev ['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero']" in out
        assert "shm []" in out
        assert (own / "written").read_text() == "x"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_isolation_paths_never_allow_a_tree_that_holds_the_solutions(tmp_path):
    """Whatever the install (a checkout, or a wheel in site-packages), no allowed tree contains a denied one,
    and the rest of the allowed tree stays granted."""
    from autograder.grading.jail import allowed_paths, isolation_paths

    deny, allow = isolation_paths(Path.cwd())
    read, _ = allowed_paths(allow, deny)
    assert not any(a.resolve() in d.resolve().parents for a in read for d in deny)
    site = tmp_path / "env" / "lib" / "site-packages"
    for name in ("solutions", "course", "jax"):
        (site / name).mkdir(parents=True)
    read, listed = allowed_paths([tmp_path / "env"], [site / "solutions"])
    assert tmp_path / "env" not in read and site not in read and site / "solutions" not in read
    assert {site / "course", site / "jax"} <= set(read)
    assert listed == [tmp_path / "env", tmp_path / "env" / "lib", site]  # listed on the way down, not read
    assert allowed_paths([site / "course"], [site / "solutions"]) == ([site / "course"], [])


def test_a_class_graded_outside_the_checkout_cannot_read_the_checkout(tmp_path):
    """The checkout the package is installed from holds answers besides solutions/ (its tests' table of the book's
    answers, which a kernel read for 11 of 58 points of Chapter 6 where the class was graded in another folder):
    the whole checkout is denied, its packages and environment excepted."""
    from autograder.grading.jail import allowed_paths, isolation_paths

    checkout = Path(__file__).resolve().parents[2]
    deny, allow = isolation_paths(tmp_path)
    read, _ = allowed_paths(allow, deny)
    assert checkout in deny
    assert not any(r == checkout / "tests" or checkout / "tests" in r.parents for r in read)
    assert {checkout / "course" / "answers.py", checkout / "autograder" / "collectives.py"} <= set(read)


def test_grading_processes_import_the_installed_course_whatever_folder_the_grader_runs_in(tmp_path):
    """An instructor who runs the grader from a course folder that holds a copy of ``course/`` (a clone of the
    repository) must not have kernels import that copy: the jail hides the course folder, so every kernel's setup
    cell would fail and the whole class score zero."""
    from autograder.grading.jail import PYTHON, jail_command

    decoy = tmp_path / "course"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the course folder copy was imported')")
    show = ["-c", "import course; print(course.__file__)"]
    plain = subprocess.run([sys.executable, *show], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "copy was imported" in plain.stderr  # the attack: Python's own default
    cmd = jail_command([], [], [], 2**31, 120, limits_only=True) + ["--", *PYTHON, *show]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    import course
    assert Path(out.stdout.strip()).resolve() == Path(course.__file__).resolve()


def _checkout(root: Path) -> Path:
    """A second checkout of the course: its answers where a kernel's imports could find them."""
    for package in ("solutions", "course", "autograder"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "course" / "fingerprints").mkdir()
    (root / "autograder" / "program_references").mkdir()
    (root / "autograder" / "compiled_hlo").mkdir()
    (root / "pyproject.toml").write_text("")
    return root


class _Editable:
    """A finder as an editable install leaves in ``sys.meta_path``: it maps the course's packages to a checkout
    whatever ``sys.path`` holds."""

    root: Path

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        import importlib.util

        if name in ("solutions", "course", "autograder"):
            return importlib.util.spec_from_file_location(name, cls.root / name / "__init__.py")
        return None


@pytest.mark.parametrize("how", ["editable finder", "path entry"])
def test_a_second_checkout_the_imports_can_reach_is_denied_too(tmp_path, monkeypatch, how):
    """The grader ran from one checkout (first on PYTHONPATH) while the environment's editable install mapped the
    packages to another: a kernel dropped its first path entry, imported ``solutions`` from the other checkout,
    and answered every number, choice and formula question of three chapters from the references."""
    from autograder.grading.jail import allowed_paths, isolation_paths

    other = _checkout(tmp_path / "other")
    if how == "editable finder":
        _Editable.root = other
        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, _Editable])
    else:
        monkeypatch.setattr(sys, "path", [sys.path[0], str(other), *sys.path[1:]])
    deny, allow = isolation_paths(tmp_path / "course")
    read, _ = allowed_paths(allow, deny)
    for answers in (other / "solutions", other / "course" / "fingerprints", other / "autograder" /
                    "program_references", other / "autograder" / "compiled_hlo", other):
        assert answers in deny, (answers, deny)
        assert not any(r == answers or answers in r.parents for r in read), answers
