"""Readers: the site's own login page, the "readers" group that shows patches, logs and
transcripts (pages and API tokens alike), and anonymous reading as a setting."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from benchsite.accounts.access import READERS_GROUP
from benchsite.accounts.services import api_token_create
from tasks_app.models import Task
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

pytestmark = pytest.mark.django_db

PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-return a // b\n+return a / b\n"


@pytest.fixture
def attempt(artifacts_root, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    suite = make_suite("rd", tasks=1)
    task = Task.objects.get(suite=suite)
    attempt = make_attempt(make_run(suite, make_model("m")), task, None, final_patch=PATCH)
    write_artifact(attempt, "logs/final_test.txt", b"1 passed\n")
    return attempt


def shows_patch(body: str) -> bool:
    return 'class="diff hl unified"' in body and "calc.py" in body


def test_the_readers_group_exists_after_migrating_and_holds_the_permission():
    group = Group.objects.get(name=READERS_GROUP)
    assert list(group.permissions.values_list("codename", flat=True)) == ["read_artifacts"]


def test_a_non_staff_account_logs_in_on_the_sites_page_and_lands_on_next(bob, attempt):
    client = Client()
    url = reverse("attempt-detail", args=[attempt.public_id])
    login = client.get(reverse("account-login") + f"?next={url}")
    body = login.content.decode()
    assert login.status_code == 200
    assert 'id="login-form"' in body and "admin" not in login.templates[0].name
    wrong = client.post(
        reverse("account-login"), {"username": "bob", "password": "nope", "next": url}
    )
    assert wrong.status_code == 200 and "correct username and password" in wrong.content.decode()
    response = client.post(
        reverse("account-login"), {"username": "bob", "password": "bob-password", "next": url}
    )
    assert response.status_code == 302 and response["Location"] == url
    page = client.get(url).content.decode()
    assert shows_patch(page) and 'id="login-prompt"' not in page
    assert client.post(reverse("account-logout")).status_code == 302
    assert 'id="login-prompt"' in client.get(url).content.decode()


def test_visitors_are_sent_to_the_sites_login_page(client, attempt):
    body = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    assert not shows_patch(body)
    assert reverse("account-login") + "?next=" in body
    download = client.get(
        reverse("attempt-artifact", args=[attempt.public_id, "logs/final_test.txt"])
    )
    assert download.status_code == 302
    assert download["Location"].startswith(reverse("account-login") + "?next=")


def test_an_account_outside_the_readers_group_sees_no_patch_and_gets_403(client, dave, attempt):
    client.force_login(dave)
    body = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    assert not shows_patch(body)
    assert "your account is not one" in body and "readers" in body
    log = reverse("attempt-artifact", args=[attempt.public_id, "logs/final_test.txt"])
    assert client.get(log).status_code == 403
    assert (
        client.get(reverse("attempt-patch", args=[attempt.public_id, "final"])).status_code == 403
    )


def test_a_readers_api_token_reads_patches_and_a_plain_accounts_token_gets_403(
    client, bob, dave, attempt
):
    _, reader_token = api_token_create(user=bob, name="reader")
    _, plain_token = api_token_create(user=dave, name="plain")
    detail = f"/api/attempts/{attempt.public_id}"
    log = f"/api/attempts/{attempt.public_id}/artifacts/logs/final_test.txt"
    ok = client.get(detail, HTTP_AUTHORIZATION=f"Bearer {reader_token}")
    assert ok.status_code == 200 and ok.json()["final_patch"] == PATCH
    assert (
        b"".join(client.get(log, HTTP_AUTHORIZATION=f"Bearer {reader_token}").streaming_content)
        == b"1 passed\n"
    )
    refused = client.get(detail, HTTP_AUTHORIZATION=f"Bearer {plain_token}")
    assert refused.status_code == 403 and "readers" in refused.json()["detail"]
    assert client.get(log, HTTP_AUTHORIZATION=f"Bearer {plain_token}").status_code == 403
    # Outcomes (no artifacts) stay open to every token.
    assert (
        client.get("/api/attempts", HTTP_AUTHORIZATION=f"Bearer {plain_token}").status_code == 200
    )


def test_anonymous_reading_of_artifacts_stays_a_setting(client, attempt, settings):
    url = reverse("attempt-detail", args=[attempt.public_id])
    assert not shows_patch(client.get(url).content.decode())
    settings.ANONYMOUS_READ_ARTIFACTS = True
    assert shows_patch(client.get(url).content.decode())
    assert client.get(f"/api/attempts/{attempt.public_id}").status_code == 200


def test_staff_read_without_the_group(client, alice, attempt):
    client.force_login(alice)
    assert shows_patch(
        client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
    )
