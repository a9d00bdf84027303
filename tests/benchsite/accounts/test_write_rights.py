"""One permission model for the pages and the API: every write, walked with every persona.

The API's writes are read from its OpenAPI schema and the pages from Django's URL resolver, so a
new endpoint or page the tables below do not classify fails the walk. Each write is then asked
for by an anonymous client, dave (an account with no rights), bob (a reader) and alice (staff),
through the API with their tokens and through the page with their session, and must follow the
rule ``benchsite.accounts.access.RIGHTS`` gives it: refused requests (401/403, or the login
page) change nothing, allowed ones do their write.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import yaml
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from benchsite.accounts.access import ACCESS_DENIED, RIGHTS
from benchsite.accounts.models import Action, ApiToken, AuditEvent
from benchsite.accounts.services import api_token_create
from runs.agents.cli.definition import DEFINITIONS_DIR
from runs.models import AgentCliDefinition, Attempt, ModelConfig, Run, RunStatus
from tasks_app.models import Suite, Task
from tests.runs.imports.test_run_import import MINI
from tests.support.bundle_fixtures import fresh_bundle
from tests.support.swebench_fixtures import LITE_DEV, rows
from tests.tasks_app.swebench.test_swebench_admin import zip_of

pytestmark = pytest.mark.django_db

PERSONAS = ("anonymous", "dave", "bob", "alice")
TASK_YAML = """\
task_spec_version: "1.0"
id: {id}
suite: uploaded
repo: {{url: https://example.org/repo.git, commit: abc123}}
environment: {{docker_image: agentbench/py-runner:0.1.0}}
run: {{command: pytest -q}}
"""

# Every write of the API: (method, path in the schema) -> the write it is.
API_WRITES: dict[tuple[str, str], Action] = {
    ("POST", "/api/model-configs"): Action.MODEL_CONFIG_CREATE,
    ("POST", "/api/runs"): Action.RUN_LAUNCH,
    ("POST", "/api/runs/{public_id}/cancel"): Action.RUN_CANCEL,
    ("POST", "/api/runs/{public_id}/retry"): Action.RUN_RETRY,
    ("POST", "/api/runs/{public_id}/evaluate"): Action.RUN_EVALUATE,
    ("POST", "/api/imports/tasks"): Action.TASKS_IMPORT,
    ("POST", "/api/imports/swebench"): Action.SWEBENCH_IMPORT,
    ("POST", "/api/imports/predictions"): Action.PREDICTIONS_IMPORT,
    ("POST", "/api/imports/results"): Action.RESULTS_IMPORT,
    ("POST", "/api/imports/run"): Action.RUN_IMPORT,
    ("POST", "/api/imports/bundle"): Action.RUN_IMPORT,
    ("POST", "/api/tokens"): Action.TOKEN_CREATE,
    ("POST", "/api/tokens/{public_id}/revoke"): Action.TOKEN_REVOKE,
    ("POST", "/api/agent-clis"): Action.AGENT_CLI_ADD,
}
# Every page (URL name, or the route of an unnamed one) that writes, and the write it is.
PAGE_WRITES: dict[str, Action] = {
    "run-cancel": Action.RUN_CANCEL,
    "run-retry": Action.RUN_RETRY,
    "run-resume": Action.RUN_RESUME,
    "run-evaluate": Action.RUN_EVALUATE,
    "suite-launch": Action.RUN_LAUNCH,
    "swebench-dataset-upload": Action.SWEBENCH_IMPORT,
    "tasks-archive-upload": Action.TASKS_IMPORT,
    "swebench-predictions-upload": Action.PREDICTIONS_IMPORT,
    "swebench-results-upload": Action.RESULTS_IMPORT,
    "swebench-run-upload": Action.RUN_IMPORT,
    "account-tokens": Action.TOKEN_CREATE,
    "account-token-revoke": Action.TOKEN_REVOKE,
}
# Pages that write nothing to our tables whoever posts to them.
PAGE_READS = {
    "healthz",
    "favicon.ico",
    "account-login",
    "account-logout",
    "home",
    "suite-detail",
    "task-detail",
    "run-detail",
    "run-progress",
    "task-image-progress",
    "transcript-search",
    "attempt-detail",
    "attempt-vs",
    "attempt-artifact",
    "attempt-patch",
    "suite-leaderboard",
    "suite-compare",
    "suite-taxonomy",
    "suite-taxonomy-chart",
    "suite-attempts",
    "attempt-atif",
    "model-config-detail",
}
# The pages of the staff admin (django.contrib.admin), refused to everyone but staff.
ADMIN_NAMESPACE = "admin"


def upload(name: str, content: bytes) -> io.BytesIO:
    buffer = io.BytesIO(content)
    buffer.name = name
    return buffer


def tasks_zip() -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("one/task.yaml", TASK_YAML.format(id=f"t{uuid.uuid4().hex[:8]}"))
    return buffer.getvalue()


def state() -> dict:
    """What any write here changes: rows of runs, attempts, configurations, tasks, tokens and
    the audit log (refusals aside)."""
    return {
        "runs": list(Run.objects.order_by("id").values_list("id", "status")),
        "attempts": list(Attempt.objects.order_by("id").values_list("id", "status")),
        "configs": ModelConfig.objects.count(),
        "agent_clis": AgentCliDefinition.objects.count(),
        "suites": Suite.objects.count(),
        "tasks": list(Task.objects.order_by("id").values_list("id", "revision")),
        "tokens": list(ApiToken.objects.order_by("id").values_list("id", "revoked_at")),
        "audit": AuditEvent.objects.exclude(action=ACCESS_DENIED).count(),
    }


@dataclass
class World:
    """The seeded data every request below acts on, and each persona's client and token."""

    seeded: dict
    active_run: Run
    users: dict
    tokens: dict[str, tuple[ApiToken, str]]

    def api_headers(self, persona: str) -> dict:
        if persona == "anonymous":
            return {}
        return {"HTTP_AUTHORIZATION": f"Bearer {self.tokens[persona][1]}"}

    def page_client(self, persona: str) -> Client:
        client = Client()
        if persona != "anonymous":
            client.force_login(self.users[persona])
        return client


@pytest.fixture
def world(seeded, alice, bob, dave, settings, tmp_path) -> World:
    from tasks_app.swebench.importer import swebench_import

    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "artifacts")},
        }
    }
    settings.API_WRITE_RATE = "100000/min"
    swebench_import(source=LITE_DEV, suite_name="lite-dev")
    # A run still queued (cancel needs one), of the staff's.
    active = Run.objects.create(
        suite=seeded["suite"], model_config=seeded["models"]["alpha"], samples=1, created_by=alice
    )
    Attempt.objects.create(
        run=active, task=seeded["tasks"][0], suite=active.suite, model_config=active.model_config
    )
    users = {"alice": alice, "bob": bob, "dave": dave}
    tokens = {name: api_token_create(user=user, name=f"{name}-t") for name, user in users.items()}
    return World(seeded=seeded, active_run=active, users=users, tokens=tokens)


def _own_spare_token(world: World, persona: str) -> ApiToken:
    """A token of the persona's own (dave's for anonymous visitors) to revoke: not the one its
    requests carry, which the following requests still need."""
    user = world.users.get(persona, world.users["dave"])
    token, _ = api_token_create(user=user, name="spare")
    return token


# --- The API ---------------------------------------------------------------------------------


def api_write_operations() -> set[tuple[str, str]]:
    from benchsite.api.site import api

    schema = api.get_openapi_schema()
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method.lower() in ("post", "put", "patch", "delete")
    }


def test_every_api_write_is_classified():
    """A new write endpoint must be added to API_WRITES (with its right) to pass."""
    found = api_write_operations()
    assert found - set(API_WRITES) == set(), "unclassified API writes"
    assert set(API_WRITES) - found == set(), "API_WRITES names endpoints that are gone"


def _api_request(world: World, op: tuple[str, str], persona: str) -> tuple[str, dict]:
    """The path and the client.post arguments of a valid request for ``op``."""
    _, path = op
    run = world.active_run
    lite = [r["instance_id"] for r in rows(LITE_DEV)]
    name = f"{persona}-{uuid.uuid4().hex[:6]}"
    json_body: Callable[[dict], dict] = lambda body: {  # noqa: E731
        "data": json.dumps(body),
        "content_type": "application/json",
    }
    bodies: dict[str, tuple[str, dict]] = {
        "/api/model-configs": (path, json_body({"name": name, "agent_variant": "scripted"})),
        "/api/runs": (path, json_body({"suite": "custom-dev", "model": "alpha", "samples": 1})),
        "/api/runs/{public_id}/cancel": (f"/api/runs/{run.public_id}/cancel", {}),
        "/api/runs/{public_id}/retry": (
            f"/api/runs/{world.seeded['runs']['alpha'].public_id}/retry",
            {},
        ),
        "/api/runs/{public_id}/evaluate": (f"/api/runs/{run.public_id}/evaluate", {}),
        "/api/imports/tasks": (path, {"data": {"file": upload("t.zip", tasks_zip())}}),
        "/api/imports/swebench": (
            path,
            {"data": {"suite": "lite-two", "file": upload("l.jsonl", LITE_DEV.read_bytes())}},
        ),
        "/api/imports/predictions": (
            path,
            {
                "data": {
                    "suite": "lite-dev",
                    "model": name,
                    "enqueue": "false",
                    "file": upload(
                        "p.jsonl",
                        json.dumps(
                            {"instance_id": lite[0], "model_patch": "diff --git a/x b/x\n"}
                        ).encode(),
                    ),
                }
            },
        ),
        "/api/imports/results": (
            path,
            {
                "data": {
                    "suite": "lite-dev",
                    "model": name,
                    "file": upload(
                        "r.json",
                        json.dumps({"resolved_ids": lite[:2], "submitted_ids": lite[:3]}).encode(),
                    ),
                }
            },
        ),
        "/api/imports/run": (
            path,
            {
                "data": {
                    "suite": "verified-mini",
                    "model": name,
                    "file": upload("run.zip", zip_of(MINI)),
                }
            },
        ),
        "/api/tokens": (path, json_body({"name": name})),
        "/api/agent-clis": (path, json_body({"definition": _agent_cli(name)})),
    }
    if path == "/api/imports/bundle":  # made only when asked: an export of a seeded run
        bundle = fresh_bundle(world.seeded["runs"]["alpha"])
        return path, {"data": {"file": upload("run.tar.gz", bundle)}}
    if path == "/api/tokens/{public_id}/revoke":
        return f"/api/tokens/{_own_spare_token(world, persona).public_id}/revoke", {}
    return bodies[path]


def _agent_cli(name: str) -> str:
    """A valid added definition: Claude Code's, under ``name``."""
    raw = yaml.safe_load((DEFINITIONS_DIR / "claude-code.yaml").read_text())
    return yaml.safe_dump(raw | {"name": name.lower()[:41]})


@pytest.mark.slow
def test_every_api_write_follows_the_pages_rule_for_every_persona(client, world):
    for op in sorted(API_WRITES):
        action = API_WRITES[op]
        right = RIGHTS[action]
        for persona in PERSONAS:
            path, kwargs = _api_request(world, op, persona)
            before = state()
            response = client.post(path, **kwargs, **world.api_headers(persona))
            allowed = persona == "alice" or (persona != "anonymous" and not right.staff)
            where = (op, persona, response.status_code, response.content[:300])
            if persona == "anonymous":
                assert response.status_code == 401, where
            elif not allowed:
                assert response.status_code == 403, where
                detail = response.json()["detail"]
                assert str(action) in detail and "staff" in detail, where
            else:
                assert 200 <= response.status_code < 300, where
            changed = state() != before
            assert changed == allowed, (where, "a refused request wrote" if changed else "no write")


def test_a_refusal_is_audited_once_a_minute_per_account_and_action(client, world):
    headers = world.api_headers("dave")
    for _ in range(3):
        assert client.post(f"/api/runs/{world.active_run.public_id}/cancel", **headers).status_code
    (event,) = AuditEvent.objects.filter(action=ACCESS_DENIED)
    assert event.actor == world.users["dave"] and event.via == "api"
    assert event.details["action"] == "run.cancel"
    assert event.details["path"] == f"/api/runs/{world.active_run.public_id}/cancel"
    assert event.token is not None and event.token.name == "dave-t"
    world.active_run.refresh_from_db()
    assert world.active_run.status == RunStatus.QUEUED


def test_a_token_acts_with_exactly_its_accounts_rights_now(client, world):
    alice = world.users["alice"]
    headers = world.api_headers("alice")
    cancel = f"/api/runs/{world.active_run.public_id}/cancel"
    alice.is_staff = False
    alice.save()
    assert client.post(cancel, **headers).status_code == 403
    alice.is_staff, alice.is_active = True, False
    alice.save()
    assert client.post(cancel, **headers).status_code == 401  # an inactive account has no token
    session = Client()
    session.force_login(alice)  # a session of an inactive account is no session
    assert session.post(reverse("run-cancel", args=[world.active_run.public_id])).status_code == 302
    world.active_run.refresh_from_db()
    assert world.active_run.status == RunStatus.QUEUED
    alice.is_active = True
    alice.save()
    assert client.post(cancel, **headers).status_code == 200


def test_a_staff_account_needs_the_admins_permission_to_add_model_configurations(
    client, world, django_user_model
):
    """The admin's Add page needs runs.add_modelconfig on top of staff; so does the API."""
    from django.contrib.auth.models import Permission

    erin = django_user_model.objects.create_user("erin", password="x", is_staff=True)
    _, raw = api_token_create(user=erin, name="erin-t")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    body = {"name": "erin-config", "agent_variant": "scripted"}
    refused = client.post(
        "/api/model-configs", json.dumps(body), content_type="application/json", **headers
    )
    assert refused.status_code == 403 and "runs.add_modelconfig" in refused.json()["detail"]
    page = Client()
    page.force_login(erin)
    assert page.get(reverse("admin:runs_modelconfig_add")).status_code == 403
    erin.user_permissions.add(Permission.objects.get(codename="add_modelconfig"))
    erin = django_user_model.objects.get(pk=erin.pk)  # permissions are cached per instance
    page.force_login(erin)
    assert page.get(reverse("admin:runs_modelconfig_add")).status_code == 200
    allowed = client.post(
        "/api/model-configs", json.dumps(body), content_type="application/json", **headers
    )
    assert allowed.status_code == 201, allowed.content


def test_only_a_superuser_sets_where_a_configurations_key_goes(client, world, django_user_model):
    """``Action.MODEL_CONFIG_UPSTREAM`` on top of the create right (issue 28): every persona, and
    staff with the admin's permission who is no superuser (tests/runs/test_model_config_upstreams.py
    has the admin and the launch)."""
    from django.contrib.auth.models import Permission

    erin = django_user_model.objects.create_user("erin", password="x", is_staff=True)
    erin.user_permissions.add(Permission.objects.get(codename="add_modelconfig"))
    _, raw = api_token_create(user=erin, name="erin-t")
    headers = {p: world.api_headers(p) for p in PERSONAS} | {
        "erin": {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    }
    expected = {"anonymous": 401, "dave": 403, "bob": 403, "erin": 403, "alice": 201}
    upstream = {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}
    for persona, status in expected.items():
        body = {"name": f"up-{persona}", "agent_variant": "llm", "model_name": "gpt-4o"} | upstream
        before = state()
        response = client.post(
            "/api/model-configs",
            json.dumps(body),
            content_type="application/json",
            **headers[persona],
        )
        assert response.status_code == status, (persona, response.content[:300])
        assert (state() != before) == (status == 201), persona
    refusal = AuditEvent.objects.get(action=ACCESS_DENIED, actor=erin)
    assert refusal.details["action"] == "model_config.upstream"


def test_no_token_revokes_another_accounts_token(client, world):
    bobs, _ = world.tokens["bob"]
    for persona in ("dave", "alice"):
        response = client.post(f"/api/tokens/{bobs.public_id}/revoke", **world.api_headers(persona))
        assert response.status_code == 404
        page = world.page_client(persona)
        assert page.post(reverse("account-token-revoke", args=[bobs.public_id])).status_code == 404
    bobs.refresh_from_db()
    assert bobs.revoked_at is None


# --- The pages -------------------------------------------------------------------------------


def page_patterns() -> dict[str, str]:
    """Every URL pattern outside /api/ and the admin's own pages: name (or route) -> route."""
    found: dict[str, str] = {}

    def walk(patterns, prefix: str, namespace: str | None) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = pattern.namespace or namespace
                walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
            elif isinstance(pattern, URLPattern):
                route = prefix + str(pattern.pattern)
                if route.startswith("api/") or namespace == ADMIN_NAMESPACE:
                    continue
                found[pattern.name or route] = route

    walk(get_resolver().url_patterns, "", None)
    return found


def test_every_page_is_classified():
    found = set(page_patterns())
    assert found - set(PAGE_WRITES) - PAGE_READS == set(), "unclassified pages"
    assert (set(PAGE_WRITES) | PAGE_READS) - found == set(), "classified pages that are gone"


def _page_request(world: World, name: str, persona: str) -> tuple[str, dict]:
    run = world.active_run
    lite = [r["instance_id"] for r in rows(LITE_DEV)]
    model = f"{persona}-{uuid.uuid4().hex[:6]}"
    if name in ("run-cancel", "run-resume", "run-evaluate"):
        return reverse(name, args=[run.public_id]), {}
    if name == "run-retry":
        return reverse(name, args=[world.seeded["runs"]["alpha"].public_id]), {}
    if name == "suite-launch":
        return reverse(name, args=["custom-dev"]), {"model": "alpha", "samples": 1}
    if name == "tasks-archive-upload":
        return reverse(name), {"file": upload("t.zip", tasks_zip())}
    if name == "swebench-dataset-upload":
        return reverse(name), {
            "suite": "lite-two",
            "file": upload("l.jsonl", LITE_DEV.read_bytes()),
        }
    if name == "swebench-predictions-upload":
        line = json.dumps({"instance_id": lite[0], "model_patch": "diff --git a/x b/x\n"})
        return reverse(name), {
            "suite": "lite-dev",
            "model": model,
            "file": upload("p.jsonl", line.encode()),
        }
    if name == "swebench-results-upload":
        report = json.dumps({"resolved_ids": lite[:2], "submitted_ids": lite[:3]}).encode()
        return reverse(name), {
            "suite": "lite-dev",
            "model": model,
            "file": upload("r.json", report),
        }
    if name == "swebench-run-upload":
        archive = upload("run.zip", zip_of(MINI))
        return reverse(name), {"suite": "verified-mini", "model": model, "file": archive}
    if name == "account-tokens":
        return reverse(name), {"name": model}
    if name == "account-token-revoke":
        return reverse(name, args=[_own_spare_token(world, persona).public_id]), {}
    raise AssertionError(f"no request for page {name}")


def _refused(response, persona: str) -> bool:
    """A refusal as a page gives it: the login page for anonymous visitors (the admin's for
    admin pages, which also send signed-in non-staff there), else 403."""
    if response.status_code == 403:
        return persona != "anonymous"
    location = response.get("Location", "") if response.status_code == 302 else ""
    return "/login/" in location


def test_every_page_write_follows_the_same_rule_for_every_persona(world):
    for name in sorted(PAGE_WRITES):
        right = RIGHTS[PAGE_WRITES[name]]
        for persona in PERSONAS:
            path, data = _page_request(world, name, persona)
            before = state()
            response = world.page_client(persona).post(path, data)
            allowed = persona == "alice" or (persona != "anonymous" and not right.staff)
            where = (name, persona, response.status_code)
            assert _refused(response, persona) != allowed, where
            changed = state() != before
            assert changed == allowed, (where, "a refused request wrote" if changed else "no write")


def _sample_path(route: str, world: World) -> str:
    """``route`` with each converter filled by an object of the seeded data."""
    import re

    attempt = Attempt.objects.filter(run=world.seeded["runs"]["beta"]).first()
    samples = {
        "public_id": str(world.active_run.public_id),
        "a": str(attempt.public_id),
        "b": str(attempt.public_id),
        "name": "custom-dev",
        "suite": "custom-dev",
        "task_id": world.seeded["tasks"][0].task_id,
        "which": "final",
        "path": "logs/x.txt",
        "slug": attempt.model_config.slug,
    }
    if route.startswith("attempts/"):
        samples["public_id"] = str(attempt.public_id)
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: samples[m.group(1)], route)


def test_posting_to_a_page_that_reads_writes_nothing(world):
    patterns = page_patterns()
    for persona in PERSONAS:
        client = world.page_client(persona)
        for name in sorted(PAGE_READS):
            path = _sample_path(patterns[name], world)
            before = state()
            response = client.post(path, {"name": "x", "model": "alpha", "samples": 1})
            assert response.status_code < 500, (persona, path)
            assert state() == before, (persona, path)


def test_the_admin_refuses_every_post_from_anyone_but_staff(world):
    """Django's admin (model pages, actions) is staff-only: walk each of its URLs."""
    admin_routes = []

    def walk(patterns, prefix: str, namespace: str | None) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(
                    pattern.url_patterns,
                    prefix + str(pattern.pattern),
                    pattern.namespace or namespace,
                )
            elif namespace == ADMIN_NAMESPACE and pattern.name not in ("login", "logout"):
                admin_routes.append(prefix + str(pattern.pattern))

    walk(get_resolver().url_patterns, "", None)
    assert len(admin_routes) > 30
    run = world.seeded["runs"]["alpha"]
    for persona in ("anonymous", "dave", "bob"):
        client = world.page_client(persona)
        for route in admin_routes:
            path = "/" + route.replace("<path:object_id>", str(run.pk)).replace(
                "^(?P<app_label>auth|accounts|tasks_app|runs)/$", "runs/"
            ).replace("(?P<url>.*)$", "nowhere/")
            before = state()
            response = client.post(
                path, {"action": "cancel_runs", "_selected_action": [run.pk], "name": "x"}
            )
            assert response.status_code in (302, 404), (persona, path, response.status_code)
            if response.status_code == 302:
                assert "/admin/login/" in response["Location"], (persona, path)
            assert state() == before, (persona, path)
