"""The notebook tests' browser: Debian's chromium driven by Playwright (no browser
download), one headless profile per test in its tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def chromium_page(tmp_path: Path) -> Iterator[Page]:
    """A page of a fresh chromium, closed after the test (and after what the test
    started in it, such as JupyterLab, has stopped)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-system-packages")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()
