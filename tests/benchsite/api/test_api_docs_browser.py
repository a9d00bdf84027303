"""/api/docs in a real browser (Debian's Chromium) with every request off the site refused:
swagger-ui comes from the installed django-ninja package, so the docs work offline."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def test_the_interactive_docs_render_every_operation_without_the_internet(live_server):
    from playwright.sync_api import sync_playwright

    site = urlparse(live_server.url).netloc
    refused: list[str] = []

    def only_the_site(route):
        if urlparse(route.request.url).netloc == site:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", only_the_site)
            page.goto(f"{live_server.url}/api/docs")
            page.wait_for_selector(".opblock", timeout=20_000)
            summaries = page.locator(".opblock-summary-path").all_inner_texts()
            title = page.locator(".info .title").inner_text()
        finally:
            browser.close()
    assert "AgentBench API" in title
    assert "/api/leaderboard" in summaries and "/api/runs" in summaries
    assert len(summaries) >= 25
    assert refused == []
