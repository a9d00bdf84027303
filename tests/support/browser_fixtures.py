"""Debian's Chromium through Playwright, for the browser tests of the transcript viewer, the
live run page, readers and the results pages."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between page actions are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, base_url: str, cookies: list[dict] | None = None) -> Iterator:
    """A page that may only reach ``base_url`` and fails the test on any script error."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    if cookies:
        context.add_cookies(cookies)
    outside: list[str] = []
    context.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(base_url)
            else (outside.append(route.request.url), route.abort())
        ),
    )
    page = context.new_page()
    # The machine is shared: on a loaded one a page can take longer than Playwright's 30 s.
    page.set_default_timeout(90_000)
    page.set_default_navigation_timeout(90_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert outside == []
    assert errors == []


@pytest.fixture
def page(browser, live_server, bob) -> Iterator:
    """A page of the live server, logged in as bob (a reader: patches, logs, transcripts).
    The conftest's autouse fixture has put the failure reasons back after the last flush."""
    from django.test import Client

    client = Client()
    client.force_login(bob)
    cookie = {"name": "sessionid", "value": client.cookies["sessionid"].value}
    yield from open_page(browser, live_server.url, [cookie | {"url": live_server.url}])


@pytest.fixture
def transcript_suite(artifacts_root):
    """A one-task suite ("browse") whose task has a gold patch, for the transcript viewer."""
    from tasks_app.models import Task
    from tests.support.pages_fixtures import make_suite

    suite = make_suite("browse", tasks=1)
    task = Task.objects.get(suite=suite)
    task.gold_patch = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    task.save()
    return suite


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
