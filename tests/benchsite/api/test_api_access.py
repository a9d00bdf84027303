"""Who may read and write through the API: tokens, sessions, CSRF, anonymous settings."""

from __future__ import annotations

import pytest
from django.test import Client

from benchsite.accounts.models import Action, ApiToken, AuditEvent
from benchsite.accounts.services import api_token_create, api_token_revoke, token_digest

pytestmark = pytest.mark.django_db


def test_it_stores_only_a_prefix_and_a_digest_of_a_token(bob):
    token, raw = api_token_create(user=bob, name="laptop")
    stored = ApiToken.objects.get(pk=token.pk)
    assert raw.startswith("ab_") and len(raw) > 40
    assert stored.token_hash == token_digest(raw) != raw
    assert raw.startswith(stored.prefix)
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert all(raw not in str(value) for value in row.values())


def test_a_write_without_a_token_gets_401_with_a_json_body(client, seeded):
    response = client.post(
        "/api/runs", {"suite": "custom-dev", "model": "alpha"}, content_type="application/json"
    )
    assert response.status_code == 401
    assert response.json()["detail"] == "authentication required"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_an_unknown_or_revoked_token_gets_401_even_on_public_reads(client, seeded, bob):
    token, raw = api_token_create(user=bob, name="old")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.get("/api/suites", **headers).status_code == 200
    api_token_revoke(token=token, by=bob)
    for path in ("/api/suites", "/api/tokens"):
        response = client.get(path, **headers)
        assert response.status_code == 401
        assert "revoked" in response.json()["detail"]
    bogus = client.get("/api/suites", HTTP_AUTHORIZATION="Bearer ab_not-a-real-token-at-all")
    assert bogus.status_code == 401
    malformed = client.get("/api/suites", HTTP_AUTHORIZATION="Token abc")
    assert malformed.status_code == 401


def test_it_records_when_a_token_was_last_used(client, bob, bob_token, seeded):
    assert ApiToken.objects.get(user=bob).last_used_at is None
    client.get("/api/suites", HTTP_AUTHORIZATION=f"Bearer {bob_token}")
    assert ApiToken.objects.get(user=bob).last_used_at is not None


def test_a_token_of_a_deactivated_user_gets_401(client, bob, bob_token, seeded):
    bob.is_active = False
    bob.save()
    response = client.get("/api/tokens", HTTP_AUTHORIZATION=f"Bearer {bob_token}")
    assert response.status_code == 401


def test_anonymous_leaderboard_reads_follow_the_setting(client, seeded, settings, auth):
    paths = ["/api/leaderboard?suite=custom-dev", "/api/suites", "/api/tasks", "/api/runs"]
    settings.ANONYMOUS_READ_LEADERBOARDS = True
    assert [client.get(p).status_code for p in paths] == [200] * len(paths)
    settings.ANONYMOUS_READ_LEADERBOARDS = False
    assert [client.get(p).status_code for p in paths] == [401] * len(paths)
    assert [client.get(p, **auth).status_code for p in paths] == [200] * len(paths)


def test_anonymous_artifact_reads_follow_the_setting(client, attempt_with_artifacts, settings):
    detail = f"/api/attempts/{attempt_with_artifacts.public_id}"
    log = f"{detail}/artifacts/logs/tests.txt"
    settings.ANONYMOUS_READ_ARTIFACTS = False
    assert client.get(detail).status_code == 401
    assert client.get(log).status_code == 401
    # The outcome list stays public: it carries no logs or patches.
    assert client.get("/api/attempts").status_code == 200
    settings.ANONYMOUS_READ_ARTIFACTS = True
    assert client.get(detail).status_code == 200
    assert client.get(log).status_code == 200


def test_a_session_reads_artifacts_and_writes_only_with_the_csrf_token(seeded, bob):
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    attempt = seeded["runs"]["beta"].attempts.first()
    assert client.get(f"/api/attempts/{attempt.public_id}").status_code == 200
    without = client.post("/api/tokens", {"name": "x"}, content_type="application/json")
    assert without.status_code == 403
    assert "CSRF" in without.json()["detail"]
    page = client.get("/account/tokens/")
    csrf = page.cookies["csrftoken"].value
    with_csrf = client.post(
        "/api/tokens", {"name": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf
    )
    assert with_csrf.status_code == 201


def test_it_creates_lists_and_revokes_tokens_through_the_api(client, bob, auth):
    created = client.post(
        "/api/tokens", {"name": "deploy"}, content_type="application/json", **auth
    )
    assert created.status_code == 201
    body = created.json()
    assert body["token"].startswith(body["prefix"])
    blank = client.post("/api/tokens", {"name": "   "}, content_type="application/json", **auth)
    assert blank.status_code == 400 and blank.json()["errors"][0]["field"] == "name"
    listing = client.get("/api/tokens", **auth).json()
    assert {t["name"] for t in listing["items"]} == {"bob-ci", "deploy"}
    assert all("token" not in t for t in listing["items"])
    new_headers = {"HTTP_AUTHORIZATION": f"Bearer {body['token']}"}
    assert client.get("/api/tokens", **new_headers).status_code == 200
    revoked = client.post(f"/api/tokens/{body['public_id']}/revoke", **auth)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    assert client.get("/api/tokens", **new_headers).status_code == 401
    active = client.get("/api/tokens", {"revoked": "false"}, **auth).json()
    assert [t["name"] for t in active["items"]] == ["bob-ci"]
    actions = list(AuditEvent.objects.filter(actor=bob).values_list("action", flat=True))
    assert Action.TOKEN_CREATE in actions and Action.TOKEN_REVOKE in actions


def test_nobody_revokes_someone_elses_token(client, alice, bob, auth):
    token, _ = api_token_create(user=alice, name="alice-only")
    response = client.post(f"/api/tokens/{token.public_id}/revoke", **auth)
    assert response.status_code == 404
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_the_token_page_shows_a_new_token_once_and_revokes(client, bob):
    assert client.get("/account/tokens/").status_code == 302  # login required
    client.force_login(bob)
    created = client.post("/account/tokens/", {"name": "<b>laptop</b>"})
    assert created.status_code == 200
    body = created.content.decode()
    token = ApiToken.objects.get(user=bob)
    shown = body.split('<code id="new-token">', 1)[1].split("</code>", 1)[0]
    assert shown.startswith(token.prefix) and token_digest(shown) == token.token_hash
    assert "&lt;b&gt;laptop&lt;/b&gt;" in body and "<b>laptop</b>" not in body
    again = client.get("/account/tokens/").content.decode()
    assert shown not in again and token.prefix in again
    empty = client.post("/account/tokens/", {"name": "  "})
    assert empty.status_code == 400 and "name" in empty.content.decode()
    revoke = client.post(f"/account/tokens/{token.public_id}/revoke/")
    assert revoke.status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_the_token_page_refuses_a_post_without_csrf(bob):
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    assert client.post("/account/tokens/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.filter(user=bob).exists()


def test_only_staff_see_everyones_audit_events_and_the_admin(client, alice, bob, auth):
    api_token_create(user=alice, name="alice-token")
    mine = client.get("/api/audit-events", **auth).json()
    assert {e["actor"] for e in mine["items"]} == {"bob"}
    client.force_login(alice)
    everyone = client.get("/api/audit-events").json()
    assert {e["actor"] for e in everyone["items"]} == {"alice", "bob"}
    for name in ("accounts_apitoken", "accounts_auditevent"):
        assert client.get(f"/admin/accounts/{name.split('_')[1]}/").status_code == 200
    client.force_login(bob)
    assert client.get("/admin/accounts/apitoken/").status_code == 302


def test_the_docs_and_schema_work_offline(client):
    schema = client.get("/api/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/leaderboard", "/api/runs", "/api/imports/tasks", "/api/tokens"} <= set(paths)
    docs = client.get("/api/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in docs
    assert "cdn" not in docs.lower()
    assert client.get("/static/ninja/swagger-ui-bundle.js").status_code == 200


def test_staff_revoke_tokens_from_the_admin_and_it_is_audited(client, alice, bob, bob_token):
    token = ApiToken.objects.get(user=bob)
    client.force_login(alice)
    response = client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    assert response.status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    event = AuditEvent.objects.get(action=Action.TOKEN_REVOKE)
    assert (event.actor, event.via, event.object_ids) == (alice, "admin", [str(token.public_id)])
    client.logout()
    assert client.get("/api/tokens", HTTP_AUTHORIZATION=f"Bearer {bob_token}").status_code == 401
