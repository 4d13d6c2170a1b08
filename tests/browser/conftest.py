"""Headless Chromium driving the admin of a live server (Playwright with Debian's browser).

Debian's ``chromium`` package provides ``/usr/bin/chromium``; Playwright only drives it
(``executable_path``), it never downloads a browser build. ``make test`` installs the package
when it is missing and the machine allows it (root with apt-get); elsewhere these tests fail
with a message naming the package.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
PASSWORD = "browser-test-password"


def _require_chromium() -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} not found: the browser tests need Debian's 'chromium' package "
            "(as root: apt-get install -y chromium; `make test` does this itself when it can)",
            pytrace=False,
        )


@pytest.fixture
def page(live_server, transactional_db, monkeypatch) -> Iterator[Any]:
    """A fresh browser per test, started after the live server and the database and stopped
    before them: Playwright's sync API runs an event loop in this thread while it is up, which
    Django takes for async code (it would refuse the ORM, the test's and the database
    teardown's). The test's own queries are plain synchronous ones, so they are allowed."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(20_000)
        yield context.new_page()
        context.close()
        browser.close()


@pytest.fixture
def admin_page(page, live_server, django_user_model) -> Any:
    """Logged in through the admin's own login form."""
    django_user_model.objects.create_superuser("curator", "curator@example.com", PASSWORD)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "curator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    return page


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    path = tmp_path / "screenshots"
    path.mkdir()
    return path
