"""The course as a package to install: where it is published, and one wheel for each audience.

One release, two wheels of the same distribution (``scaling-course``, same version, so a notebook's
``import course`` and its version note work with either, and installing one replaces the other):

- **grader**: everything ``pyproject.toml`` packages (``course``, ``autograder``, ``solutions``), as
  ``pip install`` of the repository gives it. Self-study learners get this one from the notebooks'
  first cell; a grading machine or a Gradescope image needs it, since the references live in it.
- **student**: for the image of a class whose students must not hold the references. It leaves out
  ``solutions/`` and the modules only the grader and the author run (``GRADER_ONLY``); what stays is
  what a notebook's self-check and ``scaling-course selfcheck``/``progress``/``equiv`` import, found
  by installing the wheel alone and checking every chapter (``tests/test_distribution.py``). A file
  ``autograder/EDITION`` tells the package which one it is, so a command that needs the references
  can say so instead of failing on a missing module.

The wheel is written here, not by ``pip wheel``: the build must run offline and leave the checkout
untouched, and the setuptools that Python 3.11's ``venv`` bundles cannot build a wheel without the
separate ``wheel`` package. A wheel is a zip of the package files plus ``*.dist-info`` (PEP 427);
the metadata comes from ``pyproject.toml``'s ``[project]`` table, the one place it is written.
Entries carry a fixed date, so building the same checkout twice gives the same bytes.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import io
import os
import tempfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

DISTRIBUTION = "scaling-course"
COURSE_ROOT = Path(__file__).resolve().parents[1]
KINDS = ("grader", "student")
EDITION_FILE = "autograder/EDITION"
# Left out of the student wheel: the reference answers (the records, and the single-device references of program
# questions, whose results at the self-check's seed the wheel keeps as data: reference_results.py), and the modules
# that read them or write the course (release, authoring, fingerprints from the records, the batch grader).
GRADER_ONLY = (
    "solutions/",
    "autograder/program_references/",
    "autograder/grading/",
    "autograder/authoring.py",
    "autograder/checks.py",
    "autograder/course_config.py",
    "autograder/demo.py",
    "autograder/fingerprint.py",
    "autograder/release.py",
    "autograder/variant_report.py",
)
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip entry can carry: reproducible wheels


class DistributionError(ValueError):
    """A wheel that cannot be built as asked (unknown kind, missing project metadata)."""


# --- where the course is published --------------------------------------------------------------

def _pyproject(root: Path = COURSE_ROOT) -> dict[str, Any] | None:
    """The course's ``pyproject.toml`` at ``root``, or None where there is none (an installed package)."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return None
    data = tomllib.loads(path.read_text())
    return data if data.get("project", {}).get("name") == DISTRIBUTION else None


def _checkout(root: Path) -> dict[str, Any]:
    """``root``'s pyproject.toml, which a build needs, or a sentence saying where to run it."""
    data = _pyproject(root)
    if data is None or "version" not in data["project"]:
        raise DistributionError(f"{root} holds no pyproject.toml of {DISTRIBUTION} with a version: build the "
                                "wheels in the course repository (or give its folder as --course-dir)")
    return data


def _installed_urls() -> dict[str, str]:
    """The installed distribution's ``Project-URL: <label>, <url>`` lines, by label."""
    try:
        lines = metadata.metadata(DISTRIBUTION).get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return {}
    return {label.strip(): url.strip() for label, _, url in (line.partition(",") for line in lines)}


def repository_url() -> str:
    """The course's repository: what the first cell installs from and the README's Colab links open.

    In a checkout ``pyproject.toml`` decides (an editable install keeps the metadata of the day it was
    installed, so a publisher's new URL would not show until a reinstall); an installed package reads
    its own metadata, which the wheel or pip wrote from that same file."""
    project = _pyproject()
    urls = project["project"].get("urls", {}) if project else _installed_urls()
    url = urls.get("Repository")
    if not url:
        where = "pyproject.toml" if project else f"the installed {DISTRIBUTION} metadata"
        raise DistributionError(f"{where} names no Repository URL: set [project.urls] Repository in pyproject.toml")
    return url.rstrip("/")


def project_version() -> str:
    """The course's version: ``[project] version`` in a checkout, else the installed package's."""
    project = _pyproject()
    return project["project"]["version"] if project else metadata.version(DISTRIBUTION)


def edition() -> str:
    """``"student"`` in the student wheel, ``"grader"`` everywhere else (a checkout, the full package)."""
    marker = Path(__file__).resolve().parents[1] / EDITION_FILE
    return marker.read_text().strip() if marker.is_file() else "grader"


def student_package_notice(command: str) -> str:
    """What a command that needs the references says in the student package."""
    version = project_version()
    return (f"scaling-course {command}: this is the student package of scaling-course {version}, without the "
            f"reference solutions and the grader that {command} needs. Run it on the grader's machine, which "
            f"has the course repository or the full package (pip install "
            f"'{DISTRIBUTION} @ git+{repository_url()}@v{version}').")


# The first lines of every notebook's setup cell. On Colab, or any Python without the course, they install
# the package at the notebook's own version from the repository (SCALING_COURSE_PACKAGE overrides what
# pip installs: a wheel, a folder, a URL), say in one sentence what to do if that fails, then set up
# the devices and note another installed version. ``release.complete_setup_cell`` writes them.
BOOTSTRAP = """\
try:
    import course
except ModuleNotFoundError:  # Colab or a new environment: install this notebook's version of the course
    import importlib, os, subprocess, sys
    package = os.environ.get("SCALING_COURSE_PACKAGE",
                             "scaling-course @ git+{repository}@v{version}")
    if subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", package]).returncode:
        raise SystemExit(f"Could not install {{package}} (pip says why above): the course may not be published "
                         "there. Run %env SCALING_COURSE_PACKAGE=<its wheel, folder or URL>, or ask your instructor.")
    importlib.invalidate_caches()
    import course
print(course.setup(version="{version}"))  # 8 simulated CPU devices, or the real accelerators here"""
# Where the bootstrap ends: a setup cell's lines after it are the chapter's own imports.
BOOTSTRAP_END = "print(course.setup("


def bootstrap(version: str | None = None) -> str:
    """The setup cell's first lines, installing this (or the given) version from ``repository_url()``."""
    return BOOTSTRAP.format(repository=repository_url(), version=version or project_version())


def colab_prefix() -> str:
    """The start of a Colab link to a notebook of the repository (``<prefix>release/ch01_x/ch01_x.ipynb``);
    Colab opens notebooks from GitHub only."""
    url = repository_url()
    slug = url.removeprefix("https://github.com/")
    if slug == url or slug.count("/") != 1:
        raise DistributionError(f"Colab opens notebooks from GitHub only; the Repository URL in pyproject.toml "
                                f"is {url} (expected https://github.com/<owner>/<name>)")
    return f"https://colab.research.google.com/github/{slug}/blob/main/"


# --- building a wheel ----------------------------------------------------------------------------

def _grader_only(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in GRADER_ONLY)


def package_files(kind: str, root: Path = COURSE_ROOT) -> list[str]:
    """The repo-relative paths of the files a ``kind`` wheel holds, sorted: the Python files of the
    packages ``[tool.setuptools.packages.find]`` includes and their ``package-data``."""
    if kind not in KINDS:
        raise DistributionError(f"unknown wheel kind {kind!r}: choose one of {', '.join(KINDS)}")
    tool = _checkout(root).get("tool", {}).get("setuptools", {})
    include = tool.get("packages", {}).get("find", {}).get("include", [])
    data = tool.get("package-data", {})
    tops = sorted(d.name for d in root.iterdir() if d.is_dir() and any(fnmatch.fnmatch(d.name, p) for p in include))
    if not tops:
        raise DistributionError(f"{root / 'pyproject.toml'}: [tool.setuptools.packages.find] includes no package")
    found = []
    for top in tops:
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if path.suffix == ".py" or _is_package_data(rel, data):
                found.append(rel)
    return [f for f in found if kind == "grader" or not _grader_only(f)]


def _is_package_data(rel: str, data: dict[str, list[str]]) -> bool:
    """Whether ``rel`` matches a ``package-data`` glob of its package (``course = ["fingerprints/*.json"]``)."""
    for package, patterns in data.items():
        prefix = package.replace(".", "/") + "/"
        if rel.startswith(prefix) and any(fnmatch.fnmatch(rel[len(prefix):], p) for p in patterns):
            return True
    return False


def _metadata(project: dict[str, Any], readme: str) -> str:
    """Core metadata 2.1 (``METADATA``) of ``[project]``: what pip reads to install the dependencies."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}"]
    if "text" in project.get("license", {}):
        lines.append(f"License: {project['license']['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Project-URL: {label}, {url}" for label, url in project.get("urls", {}).items()]
    lines += [f"Requires-Dist: {req}" for req in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {req}; extra == "{extra}"' for req in reqs]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def _entry_points(project: dict[str, Any]) -> str:
    scripts = project.get("scripts", {})
    return "[console_scripts]\n" + "".join(f"{name} = {target}\n" for name, target in scripts.items())


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(kind: str, out_dir: Path, root: Path = COURSE_ROOT) -> Path:
    """Write the ``kind`` wheel (``"grader"`` or ``"student"``) of the course at ``root`` into ``out_dir``
    and return its path. Both kinds have the same file name: give each its own folder."""
    files = package_files(kind, root)
    project = _checkout(root)["project"]
    readme = root / project.get("readme", "README.md")
    stem = f"{project['name'].replace('-', '_')}-{project['version']}"
    info = f"{stem}.dist-info"
    entries = [(f, (root / f).read_bytes()) for f in files]
    if kind == "student":
        entries.append((EDITION_FILE, b"student\n"))
    entries += [
        (f"{info}/METADATA", _metadata(project, readme.read_text() if readme.is_file() else "").encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: scaling-course distribution\nRoot-Is-Purelib: true\n"
                          b"Tag: py3-none-any\n"),
        (f"{info}/entry_points.txt", _entry_points(project).encode()),
    ]
    record = "\n".join([_record_line(n, d) for n, d in entries] + [f"{info}/RECORD,,"]) + "\n"
    entries.append((f"{info}/RECORD", record.encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            entry = zipfile.ZipInfo(name, _ZIP_DATE)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{stem}-py3-none-any.whl"
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".part")  # a reader never sees half a wheel
    with os.fdopen(fd, "wb") as f:
        f.write(buffer.getvalue())
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return target
