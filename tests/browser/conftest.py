"""Real-browser fixtures: Debian's Chromium driven by Playwright, the studio as a subprocess.

Without /usr/bin/chromium the browser tests are skipped with the reason, except in CI (CI=true), which
installs it and where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from webui.jobs.supervisor_registry import SupervisorRegistry

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing (apt-get install chromium)"
        if _in_ci():
            pytest.fail(message + "; CI must install it")
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium: Path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    opened = context.new_page()
    # Every action (a click right after page.goto included) waits as long as the tests' UI waits: on a loaded
    # two-core machine the studio can take over playwright's default 30 s to make its tabs clickable.
    opened.set_default_timeout(60_000)
    yield opened
    context.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def studio_workspace(demo_workspace, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the demo workspace; every run started in it is force-stopped afterwards."""
    workspace = tmp_path / "workspace"
    shutil.copytree(demo_workspace.root, workspace, ignore=shutil.ignore_patterns("runs", "jobs"))
    yield workspace
    for status in SupervisorRegistry(workspace).statuses(running_only=True):
        SupervisorRegistry(workspace).get(status.output_dir).force_stop()
