"""The browser tests' shared fixtures: one chromium and one page per module, and evidence when a test fails.

Every module here defines a ``lab`` fixture (the JupyterLab its page talks to). ``tests.browser.lab`` is
imported inside the fixtures: importing it skips the browser tests when they are switched off, and the test
modules, which import it first, are skipped before any fixture runs.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from tests.browser.lab import Lab


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Lets the fixtures see whether the test they wrap has failed, to save evidence."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from tests.browser.lab import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def page(browser: Browser, lab: Lab) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    yield tab
    context.close()


@pytest.fixture(autouse=True)
def evidence_on_failure(request: pytest.FixtureRequest, page: Page, lab: Lab) -> Iterator[None]:
    yield
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        from tests.browser.lab import save_evidence

        save_evidence(page, lab, request.node.name)
