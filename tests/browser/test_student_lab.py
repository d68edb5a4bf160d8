"""The student's side in a real browser: JupyterLab shows the self-check's diagnosis, and nbgrader's Validate
button works from the notebook toolbar.

The unit tests call check() and nbgrader directly; only a browser shows that the feedback reaches the page
a student reads and that the lab extension, the server extension and the course config fit together.
Debian's chromium drives a JupyterLab started from this environment with throw-away Jupyter directories, so
the user's own Jupyter state is never touched. Screenshots go to test-artifacts/, and on a failure a
screenshot of that moment and the server log as well.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder.demo import filled_notebook
from autograder.questions import load_chapter

SKIP_VARIABLE = "SCALING_COURSE_SKIP_BROWSER"
if os.environ.get(SKIP_VARIABLE) == "1":
    pytest.skip(f"{SKIP_VARIABLE}=1: browser tests skipped", allow_module_level=True)

# Imported after the skip so that a machine told to skip the browser tests needs no playwright either.
from playwright.sync_api import Browser, Error, Locator, Page, expect, sync_playwright  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ch01]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHAPTER = "ch01_rooflines"
# The book's values (the lab's kernel knows no student, so it computes with the book's setting).
T_1E12_H100, T_1E12_V6E = (load_chapter(CHAPTER)[q].reference for q in ("ch01-e1-h100-time", "ch01-e1-v6e-time"))
E1_CHECKS = ("ch01-e1-h100-time", "ch01-e1-v6e-time")  # exercise E1's test cells, in notebook order
CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags chromium keeps dialling Google's update and sync services, which
# a closed network refuses; its sandbox will not start as root, which containers and CI often are.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Importing JAX and compiling for 8 simulated devices on a 2-core machine: seconds, sometimes tens of them.
KERNEL_MS = 120_000
VALIDATE_MS = 240_000  # nbgrader runs the whole chapter in a fresh kernel


@dataclass(frozen=True)
class Lab:
    url: str
    log: Path


def _free_port() -> int:
    """A port the OS just handed out; the server gets --port-retries=0, so a lost race fails loudly."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter_env(home: Path) -> dict[str, str]:
    """Environment whose Jupyter, JupyterLab and IPython directories all lie under ``home``, so the user's
    settings, workspaces and kernels neither leak into the test nor get written by it."""
    env = dict(os.environ)
    for var, name in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                      ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                      ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")]:
        (home / name).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / name)
    # The announcements plugin asks, in a toast over the notebook, whether to fetch Jupyter news; nobody
    # can answer it here and it may sit on top of what the test clicks.
    labconfig = home / "config" / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    return env


def _grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _prepare_work(work: Path) -> None:
    """The student's folder: the release notebook to type into, a reference-filled copy and an unanswered
    one to validate, and the course's nbgrader config, which the Validate handler reads from the server's
    cwd (per-cell timeout for JAX compiles, the pattern for XLA's stderr lines).

    The unanswered copy ends after exercise E1: the dialog's failure view needs only a few failing test
    cells, the whole release's failures are tests/test_notebooks.py's business, and every validation runs
    its notebook in a fresh kernel while the server waits, the costliest step of this file."""
    shutil.copytree(ROOT / "release" / CHAPTER, work)
    shutil.copy(ROOT / "nbgrader_config.py", work / "nbgrader_config.py")
    name = f"{CHAPTER}.ipynb"
    release_nb = nbformat.read(work / name, as_version=4)
    source_nb = nbformat.read(ROOT / "source" / CHAPTER / name, as_version=4)
    nbformat.write(filled_notebook(release_nb, source_nb), work / f"{CHAPTER}_reference.ipynb")
    ids = [_grade_id(c) for c in release_nb.cells]
    release_nb.cells = release_nb.cells[: ids.index(E1_CHECKS[-1]) + 1]
    nbformat.write(release_nb, work / f"{CHAPTER}_unanswered.ipynb")


def _wait_until_up(proc: subprocess.Popen, url: str, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(log, ARTIFACTS / "browser-server.log")
    state = f"exited with {proc.returncode}" if proc.poll() is not None else f"no answer after {timeout_s:.0f} s"
    pytest.fail(f"JupyterLab {state}; log in test-artifacts/browser-server.log:\n"
                f"{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM lets the server shut its kernels down (they run in sessions of their own); SIGKILL the
    whole group if it does not finish in time."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium: apt-get install chromium "
                    f"(or set {SKIP_VARIABLE}=1 to skip the browser tests)", pytrace=False)
    with sync_playwright() as playwright:
        # Playwright gives every launch a fresh temporary profile; it never downloads a browser here.
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("lab")
    work, log = home / "work", home / "server.log"
    _prepare_work(work)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
           "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={work}",
           "--allow-root"]  # containers and CI often run as root; the server refuses that without the flag
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=work, env=_jupyter_env(home), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_until_up(proc, url, log)
        yield Lab(url=url, log=log)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def page(browser: Browser, lab: Lab) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    context.close()


@pytest.fixture(autouse=True)
def evidence_on_failure(request: pytest.FixtureRequest, page: Page, lab: Lab) -> Iterator[None]:
    """What the page showed when the test failed, and the server's side of it."""
    yield
    report = getattr(request.node, "report_call", None)
    if report is None or not report.failed:
        return
    ARTIFACTS.mkdir(exist_ok=True)
    name = request.node.name
    try:
        page.screenshot(path=ARTIFACTS / f"{name}-failure.png")
    except Error as exc:  # a crashed page must not hide the log
        print(f"no failure screenshot: {exc}")
    shutil.copy(lab.log, ARTIFACTS / f"{name}-server.log")


def _open(page: Page, lab: Lab, name: str) -> Locator:
    """Opens the notebook in a workspace of its own, so no earlier tab is restored over it."""
    page.goto(f"{lab.url}/lab/workspaces/{Path(name).stem}/tree/{name}")
    panel = page.locator(".jp-NotebookPanel:visible")
    expect(panel.locator(".jp-CodeCell").first).to_be_visible(timeout=60_000)
    # Lab connects the kernel and moves the focus into the notebook only after the cells show; a click in
    # between can be undone by that late focus.
    expect(page.locator("#jp-main-statusbar")).to_contain_text("| Idle", timeout=KERNEL_MS)
    page.wait_for_function("document.activeElement?.closest('.jp-Notebook') != null")
    return panel


def _code_index(grade_id: str) -> int:
    """Position among the code cells, from the release notebook's nbgrader metadata: the page shows no ids."""
    nb = nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    return [_grade_id(c) for c in nb.cells if c.cell_type == "code"].index(grade_id)


def _run(panel: Locator, cell: Locator, timeout_ms: int = KERNEL_MS) -> None:
    """Selects the cell and runs it with the toolbar's Run button (a key press depends on where the focus
    is), then waits for a new execution count: the old one, or [*] while queued, means a stale output."""
    prompt = cell.locator(".jp-InputPrompt")
    old = re.search(r"\d+", prompt.inner_text())
    prompt.click()  # selects locked cells as well
    expect(cell).to_have_class(re.compile(r"\bjp-mod-active\b"))
    panel.locator('jp-button[data-command="notebook:run-cell-and-select-next"]').click()
    fresh = rf"\[(?!{old.group()}\])\d+\]:" if old else r"\[\d+\]:"
    expect(prompt).to_have_text(re.compile(fresh), timeout=timeout_ms)


def _type(page: Page, cell: Locator, source: str) -> None:
    """Replaces the cell's source as a student does: click into the editor, select all, type."""
    editor = cell.locator(".cm-content")
    editor.click()
    expect(cell.locator(".cm-editor")).to_have_class(re.compile(r"\bcm-focused\b"))
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(source)
    for line in source.splitlines():
        expect(editor).to_contain_text(line)
    expect(editor).not_to_contain_text("NotImplementedError")


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / name)


def test_self_check_feedback_in_the_page(page: Page, lab: Lab) -> None:
    panel = _open(page, lab, f"{CHAPTER}.ipynb")
    cells = panel.locator(".jp-CodeCell")
    setup = cells.nth(_code_index("setup"))
    answer = cells.nth(_code_index("ch01-e1-answer"))
    check = cells.nth(_code_index("ch01-e1-h100-time"))
    expect(setup).to_contain_text("course.setup(")
    expect(answer).to_contain_text("raise NotImplementedError()")
    expect(check).to_contain_text('check("ch01-e1-h100-time", t_h100)')

    _run(panel, setup)
    expect(setup.locator(".jp-OutputArea")).to_contain_text("device(s)")

    # A factor-two slip: the self-check must name it without giving the answer away.
    _type(page, answer, f"t_h100 = {2 * T_1E12_H100!r}\nt_v6e = {2 * T_1E12_V6E!r}")
    _run(panel, answer)
    expect(answer.locator(".jp-OutputArea")).to_have_text("")  # the answer cell itself ran cleanly
    _run(panel, check)
    feedback = check.locator(".jp-OutputArea")
    expect(feedback).to_contain_text("ch01-e1-h100-time: not right yet")
    expect(feedback).to_contain_text("Off by a factor of 2")
    expect(feedback).to_contain_text('A hint is unlocked: run course.hint("ch01-e1-h100-time")')
    expect(feedback).not_to_contain_text("✓")
    expect(feedback).not_to_contain_text("answers.py")  # the diagnosis alone, not the course's internals
    check.scroll_into_view_if_needed()
    _shot(page, "ch01-e1-wrong-answer.png")

    _type(page, answer, f"t_h100 = {T_1E12_H100!r}\nt_v6e = {T_1E12_V6E!r}")
    _run(panel, answer)
    expect(answer.locator(".jp-OutputArea")).to_have_text("")
    _run(panel, check)
    expect(feedback).to_contain_text("✓ ch01-e1-h100-time: correct.")
    expect(feedback).not_to_contain_text("not right yet")
    check.scroll_into_view_if_needed()
    _shot(page, "ch01-e1-right-answer.png")


def _validate(page: Page, panel: Locator) -> Locator:
    """Clicks the toolbar's Validate button (it saves, then asks the server) and returns the result text."""
    panel.locator(".validate-button").click()
    message = page.locator(".jp-Dialog #validation-message")
    expect(message).to_be_visible(timeout=VALIDATE_MS)
    return message


def _close_dialog(page: Page) -> None:
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(page.locator(".jp-Dialog")).to_have_count(0)


def test_validate_button(page: Page, lab: Lab) -> None:
    panel = _open(page, lab, f"{CHAPTER}_reference.ipynb")
    message = _validate(page, panel)
    expect(message).to_have_class(re.compile(r"\bvalidation-success\b"))
    expect(message).to_contain_text("Success! Your notebook passes all the tests.")
    _shot(page, "validate-reference.png")
    _close_dialog(page)

    panel = _open(page, lab, f"{CHAPTER}_unanswered.ipynb")
    message = _validate(page, panel)
    expect(message).to_have_class(re.compile(r"\bvalidation-failed\b"))
    expect(message).to_contain_text("The following cell failed:")
    expect(message).to_contain_text('check("ch01-e1-h100-time", t_h100)')
    expect(message).to_contain_text('check("ch01-e1-v6e-time", t_v6e)')
    expect(message).not_to_contain_text("Success!")
    _shot(page, "validate-unanswered.png")
    _close_dialog(page)
