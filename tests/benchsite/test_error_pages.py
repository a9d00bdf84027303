"""Styled error pages (404, 400, 403) in the site's layout."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_an_unknown_address_gets_the_styled_404_page_with_the_path_escaped(client):
    response = client.get("/suites/no-such-suite/<script>x</script>/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "Not found" in body and 'class="topbar"' in body and "favicon.svg" in body
    assert "<script>x</script>" not in body and "&lt;script&gt;x&lt;/script&gt;" in body


def test_an_unknown_suite_is_a_404_in_the_same_layout(client):
    response = client.get("/suites/nope/leaderboard/")
    assert response.status_code == 404 and "Back to the suites" in response.content.decode()


def test_a_host_the_site_does_not_answer_to_gets_the_styled_400_page():
    response = Client(HTTP_HOST="evil.example").get("/")
    assert response.status_code == 400
    assert "Bad request" in response.content.decode()


def test_a_signed_in_non_reader_gets_the_styled_403_page_saying_why(client, dave, settings):
    from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

    settings.ANONYMOUS_READ_ARTIFACTS = False
    suite = make_suite("err", tasks=1)
    attempt = make_attempt(make_run(suite, make_model("m")), suite.tasks.get(), None)
    client.force_login(dave)
    response = client.get(f"/attempts/{attempt.public_id}/final.diff")
    assert response.status_code == 403
    assert (
        "readers group" in response.content.decode() and "Not allowed" in response.content.decode()
    )
