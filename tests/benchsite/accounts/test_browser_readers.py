"""A reader logs in on the site's own login page in a real browser and sees a patch; an
account outside the readers group is told why it sees none."""

from __future__ import annotations

import pytest

from tasks_app.models import Task
from tests.support.browser_fixtures import open_page, shot
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PATCH = (
    "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def mean(values):\n"
    "-    return sum(values) // len(values)\n+    return sum(values) / len(values)\n"
)


@pytest.fixture
def attempt(artifacts_root, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    suite = make_suite("readers", tasks=1)
    task = Task.objects.get(suite=suite)
    return make_attempt(make_run(suite, make_model("solver")), task, None, final_patch=PATCH)


def log_in(page, username: str, password: str) -> None:
    page.click("#login-prompt a")
    page.wait_for_selector("#login-form")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-form button[type=submit]")


def test_a_reader_logs_in_and_sees_the_patch(browser, live_server, attempt, bob):
    for page in open_page(browser, live_server.url):
        page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
        assert page.locator("table.diff").count() == 0
        log_in(page, "bob", "wrong")
        assert "correct username and password" in page.locator(".notice.error").text_content()
        page.fill("#id_username", "bob")
        page.fill("#id_password", "bob-password")
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#agent-patch, table.diff")
        assert page.url.endswith(f"/attempts/{attempt.public_id}/")
        assert page.locator("#who").text_content() == "bob"
        assert "return sum(values) / len(values)" in page.locator("table.diff").text_content()
        shot(page, "reader-sees-patch")
        page.click("text=Log out")
        page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
        assert page.locator("table.diff").count() == 0


def test_an_account_outside_the_readers_group_is_told_why(browser, live_server, attempt, dave):
    for page in open_page(browser, live_server.url):
        page.goto(live_server.url + f"/attempts/{attempt.public_id}/")
        log_in(page, "dave", "dave-password")
        page.wait_for_selector("#who")
        assert page.locator("table.diff").count() == 0
        assert "readers" in page.locator("#login-prompt").text_content()
