"""What the browser tests share: a JupyterLab whose Jupyter directories are throw-away, Debian's chromium,
and the gestures a student makes in a notebook (open it, run a cell, type an answer, validate).

Importing this module skips the importing test module when SCALING_COURSE_SKIP_BROWSER=1, before playwright
is imported, so a machine told to skip the browser tests needs neither playwright nor chromium.
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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tests.paths import ROOT

SKIP_VARIABLE = "SCALING_COURSE_SKIP_BROWSER"
if os.environ.get(SKIP_VARIABLE) == "1":
    pytest.skip(f"{SKIP_VARIABLE}=1: browser tests skipped", allow_module_level=True)

# Imported after the skip so that a machine told to skip the browser tests needs no playwright either.
from playwright.sync_api import Browser, Error, Locator, Page, expect, sync_playwright  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
CHAPTER = "ch01_rooflines"  # the fastest chapter to run
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


def jupyter_env(home: Path) -> dict[str, str]:
    """Environment whose Jupyter, JupyterLab and IPython directories all lie under ``home`` (nbgrader reads a
    user's config from ``home/config`` and keeps its submission cache in ``home/data``), so the user's
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
    # nbgrader runs `alembic` when it creates a gradebook: this environment's scripts come first.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


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


@contextmanager
def running_lab(home: Path, work: Path, env: dict[str, str]) -> Iterator[Lab]:
    """JupyterLab serving ``work`` (also its cwd, where nbgrader's Validate and Assignment List handlers
    look for an nbgrader_config.py), with ``env`` (see ``jupyter_env``); its log is ``home/server.log``."""
    log, port = home / "server.log", _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
           "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={work}",
           "--allow-root"]  # containers and CI often run as root; the server refuses that without the flag
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_until_up(proc, url, log)
        yield Lab(url=url, log=log)
    finally:
        _stop(proc)


@contextmanager
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium: apt-get install chromium "
                    f"(or set {SKIP_VARIABLE}=1 to skip the browser tests)", pytrace=False)
    with sync_playwright() as playwright:
        # Playwright gives every launch a fresh temporary profile; it never downloads a browser here.
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def save_evidence(page: Page, lab: Lab, name: str) -> None:
    """What the page showed when a test failed, and the server's side of it."""
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        page.screenshot(path=ARTIFACTS / f"{name}-failure.png")
    except Error as exc:  # a crashed page must not hide the log
        print(f"no failure screenshot: {exc}")
    shutil.copy(lab.log, ARTIFACTS / f"{name}-server.log")


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / name)


def notebook_ready(page: Page) -> Locator:
    """The notebook in view, once its kernel is idle and the focus is in it: Lab connects the kernel and
    moves the focus into the notebook only after the cells show, and a click in between can be undone by
    that late focus."""
    panel = page.locator(".jp-NotebookPanel:visible")
    expect(panel.locator(".jp-CodeCell").first).to_be_visible(timeout=60_000)
    expect(page.locator("#jp-main-statusbar")).to_contain_text("| Idle", timeout=KERNEL_MS)
    page.wait_for_function("document.activeElement?.closest('.jp-Notebook') != null")
    return panel


def open_notebook(page: Page, lab: Lab, name: str) -> Locator:
    """Opens the notebook in a workspace of its own, so no earlier tab is restored over it."""
    page.goto(f"{lab.url}/lab/workspaces/{Path(name).stem}/tree/{name}")
    return notebook_ready(page)


def code_index(qid: str, notebook: Path = ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb") -> int:
    """Position among the code cells, from the notebook's nbgrader metadata: the page shows no ids."""
    nb = nbformat.read(notebook, as_version=4)
    return [grade_id(c) for c in nb.cells if c.cell_type == "code"].index(qid)


def run_cell(panel: Locator, cell: Locator, timeout_ms: int = KERNEL_MS) -> None:
    """Selects the cell and runs it with the toolbar's Run button (a key press depends on where the focus
    is), then waits for a new execution count: the old one, or [*] while queued, means a stale output."""
    prompt = cell.locator(".jp-InputPrompt")
    old = re.search(r"\d+", prompt.inner_text())
    prompt.click()  # selects locked cells as well
    expect(cell).to_have_class(re.compile(r"\bjp-mod-active\b"))
    panel.locator('jp-button[data-command="notebook:run-cell-and-select-next"]').click()
    fresh = rf"\[(?!{old.group()}\])\d+\]:" if old else r"\[\d+\]:"
    expect(prompt).to_have_text(re.compile(fresh), timeout=timeout_ms)


def type_answer(page: Page, cell: Locator, source: str) -> None:
    """Replaces the cell's source as a student does: click into the editor, select all, type."""
    editor = cell.locator(".cm-content")
    editor.click()
    expect(cell.locator(".cm-editor")).to_have_class(re.compile(r"\bcm-focused\b"))
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(source)
    for line in source.splitlines():
        expect(editor).to_contain_text(line)
    expect(editor).not_to_contain_text("NotImplementedError")


def validation_message(page: Page) -> Locator:
    """The result text of nbgrader's Validate dialog, once the server has run the notebook."""
    message = page.locator(".jp-Dialog #validation-message")
    expect(message).to_be_visible(timeout=VALIDATE_MS)
    return message


def close_dialog(page: Page) -> None:
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(page.locator(".jp-Dialog")).to_have_count(0)
