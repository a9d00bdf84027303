"""Writes through the API: each calls the pages' service, is audited and rate-limited."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from benchsite.accounts.models import Action, AuditEvent
from runs.models import Attempt, AttemptStatus, ModelConfig, Run, RunStatus
from tasks_app.models import Suite, Task

pytestmark = pytest.mark.django_db

TASK_YAML = """\
task_spec_version: "1.0"
id: {id}
suite: uploaded
repo: {{url: https://example.org/repo.git, commit: abc123}}
environment: {{docker_image: agentbench/py-runner:0.1.0}}
run: {{command: pytest -q}}
labels: [api]
"""


def post(client, path, data, headers):
    return client.post(path, data, content_type="application/json", **headers)


def the_event(action: str) -> AuditEvent:
    (event,) = AuditEvent.objects.filter(action=action)
    return event


def test_it_launches_a_run_and_audits_who_and_from_where(client, seeded, alice, staff_auth):
    response = post(
        client, "/api/runs", {"suite": "custom-dev", "model": "alpha", "samples": 2}, staff_auth
    )
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(public_id=body["public_id"])
    assert (run.created_by, run.samples, run.status) == (alice, 2, RunStatus.QUEUED)
    non_flaky = Task.objects.for_suite(seeded["suite"]).without_label("flaky").count()
    assert run.attempts.count() == 2 * non_flaky
    assert body["model"]["name"] == "alpha" and body["created_by"] == "alice"
    event = the_event(Action.RUN_LAUNCH)
    assert (event.actor, event.ip, event.via) == (alice, "127.0.0.1", "api")
    assert event.object_ids == [str(run.public_id)]
    assert event.token is not None and event.token.name == "alice-ops"


def test_it_names_the_field_of_a_bad_launch(client, seeded, staff_auth):
    unknown_suite = post(client, "/api/runs", {"suite": "nope", "model": "alpha"}, staff_auth)
    assert unknown_suite.status_code == 404
    assert unknown_suite.json()["errors"][0]["field"] == "suite"
    unknown_model = post(client, "/api/runs", {"suite": "custom-dev", "model": "zeta"}, staff_auth)
    assert unknown_model.status_code == 404
    assert unknown_model.json()["errors"][0]["field"] == "model"
    bad_task = post(
        client,
        "/api/runs",
        {"suite": "custom-dev", "model": "alpha", "task_ids": ["x"]},
        staff_auth,
    )
    assert bad_task.status_code == 400
    assert bad_task.json()["errors"][0]["field"] == "task_ids"
    zero = post(
        client, "/api/runs", {"suite": "custom-dev", "model": "alpha", "samples": 0}, staff_auth
    )
    assert zero.status_code == 422
    assert zero.json()["errors"][0]["field"] == "samples"
    not_json = client.post("/api/runs", "{", content_type="application/json", **staff_auth)
    assert not_json.status_code in (400, 422)
    assert Run.objects.count() == 3  # the seeded ones only
    assert not AuditEvent.objects.filter(action=Action.RUN_LAUNCH).exists()


def test_it_cancels_a_run_once(client, seeded, staff_auth):
    launched = post(
        client, "/api/runs", {"suite": "custom-dev", "model": "beta"}, staff_auth
    ).json()
    response = client.post(f"/api/runs/{launched['public_id']}/cancel", **staff_auth)
    assert response.status_code == 200
    body = response.json()
    assert body["run"]["status"] == "cancelled"
    run = Run.objects.get(public_id=launched["public_id"])
    assert body["affected"] == run.attempts.count() > 0
    assert not run.attempts.exclude(status=AttemptStatus.CANCELLED).exists()
    assert the_event(Action.RUN_CANCEL).details == {"cancelled_attempts": body["affected"]}
    again = client.post(f"/api/runs/{launched['public_id']}/cancel", **staff_auth)
    assert again.status_code == 409
    assert "cancelled" in again.json()["detail"]


def test_it_retries_a_runs_infrastructure_failures(client, seeded, staff_auth):
    run = seeded["runs"]["alpha"]
    response = client.post(f"/api/runs/{run.public_id}/retry", **staff_auth)
    assert response.status_code == 200
    assert response.json()["affected"] == 1
    assert Attempt.objects.filter(run=run, status=AttemptStatus.QUEUED).count() == 1
    assert the_event(Action.RUN_RETRY).object_ids == [str(run.public_id)]
    unknown = client.post("/api/runs/00000000-0000-0000-0000-000000000000/retry", **staff_auth)
    assert unknown.status_code == 404


def test_it_creates_a_model_configuration_like_the_admin(client, db, staff_auth):
    payload = {"name": "gpt x/1", "agent_variant": "llm", "model_name": "x", "temperature": 0.2}
    created = post(client, "/api/model-configs", payload, staff_auth)
    assert created.status_code == 201, created.content
    config = ModelConfig.objects.get(name="gpt x/1")
    assert (config.slug, config.temperature) == ("gpt-x-1", 0.2)
    assert the_event(Action.MODEL_CONFIG_CREATE).object_ids == [str(config.public_id)]
    duplicate = post(client, "/api/model-configs", payload, staff_auth)
    assert duplicate.status_code == 400
    assert duplicate.json()["errors"][0]["field"] == "name"
    alike = post(client, "/api/model-configs", {**payload, "name": "gpt x 1"}, staff_auth)
    assert alike.status_code == 201 and alike.json()["slug"] == "gpt-x-1-2"
    hot = post(
        client, "/api/model-configs", {**payload, "name": "hot", "temperature": 9}, staff_auth
    )
    assert hot.status_code == 422
    assert hot.json()["errors"][0]["field"] == "temperature"
    key = post(
        client, "/api/model-configs", {**payload, "name": "k", "api_key_env": "sk-1"}, staff_auth
    )
    assert key.status_code == 422 and key.json()["errors"][0]["field"] == "api_key_env"
    nan = client.post(
        "/api/model-configs",
        '{"name": "n", "agent_variant": "llm", "extra_params": {"top_k": NaN}}',
        content_type="application/json",
        **staff_auth,
    )
    assert nan.status_code == 422 and nan.json()["errors"][0]["field"] == "extra_params"
    assert not ModelConfig.objects.filter(name__in=["hot", "k", "n"]).exists()


def zip_of(files: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    buffer.seek(0)
    return buffer


def test_it_imports_uploaded_tasks_and_keeps_the_files(client, db, staff_auth, settings, tmp_path):
    settings.API_UPLOADS_ROOT = tmp_path
    upload = zip_of(
        {f"{i}/task.yaml": TASK_YAML.format(id=i) for i in ("one", "two")} | {"README": "hi"}
    )
    upload.name = "tasks.zip"
    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)
    assert response.status_code == 200, response.content
    assert response.json()["created"] == ["uploaded/one", "uploaded/two"]
    assert Suite.objects.get(name="uploaded").tasks.count() == 2
    (kept,) = (tmp_path / "tasks").iterdir()
    assert (kept / "one" / "task.yaml").exists()
    event = the_event(Action.TASKS_IMPORT)
    assert event.object_ids == ["uploaded/one", "uploaded/two"]
    assert event.details["file"] == "tasks.zip"

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = TASK_YAML.format(id="one").replace("pytest -q", "pytest -x").encode()
        info = tarfile.TarInfo("one/task.yaml")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    buffer.name = "again.tar.gz"
    again = client.post("/api/imports/tasks", {"file": buffer}, **staff_auth)
    assert again.status_code == 200, again.content
    assert again.json()["updated"] == ["uploaded/one"]


def test_a_bad_task_file_names_file_and_field_and_imports_nothing(
    client, db, staff_auth, settings, tmp_path
):
    settings.API_UPLOADS_ROOT = tmp_path
    broken = TASK_YAML.format(id="bad").replace("run: {command: pytest -q}", "run: {command: 3}")
    upload = zip_of({"good/task.yaml": TASK_YAML.format(id="good"), "bad/task.yaml": broken})
    upload.name = "tasks.zip"
    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)
    assert response.status_code == 400
    body = response.json()
    (error,) = body["errors"]
    assert error["field"] == "run.command"
    assert error["location"].startswith("bad/task.yaml")
    assert str(tmp_path) not in body["detail"]
    assert not Suite.objects.filter(name="uploaded").exists()
    assert not any((tmp_path / "tasks").iterdir())


def test_a_dotted_suite_name_is_refused_before_anything_is_stored(
    client, db, staff_auth, settings, tmp_path
):
    settings.API_UPLOADS_ROOT = tmp_path
    dotted = TASK_YAML.format(id="one").replace("suite: uploaded", "suite: my.suite")
    upload = zip_of({"one/task.yaml": dotted})
    upload.name = "tasks.zip"
    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "suite"
    assert not Suite.objects.exists()
    assert client.get("/api/suites").status_code == 200


@pytest.mark.parametrize(
    ("name", "content", "status"),
    [
        ("evil.zip", {"../escape/task.yaml": "x"}, 400),
        ("notes.txt", None, 400),
        ("broken.zip", None, 400),
    ],
)
def test_it_refuses_unsafe_or_unknown_uploads(
    client, db, staff_auth, settings, tmp_path, name, content, status
):
    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    upload = zip_of(content) if content else io.BytesIO(b"not an archive")
    upload.name = name
    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)
    assert response.status_code == status
    assert response.json()["errors"][0]["field"] == "file"
    assert not (tmp_path / "escape").exists()


def test_it_names_a_member_whose_compression_it_cannot_read(
    client, db, staff_auth, settings, tmp_path
):
    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    data = bytearray(zip_of({"one/task.yaml": TASK_YAML.format(id="one")}).getvalue())
    # Method 99 (AES encryption) in the local and central headers: zipfile has no decoder.
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    data[local + 8 : local + 10] = (99).to_bytes(2, "little")
    data[central + 10 : central + 12] = (99).to_bytes(2, "little")
    upload = io.BytesIO(bytes(data))
    upload.name = "tasks.zip"
    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "file"
    assert "cannot read 'one/task.yaml'" in error["message"]
    assert not Suite.objects.exists()


def test_an_oversized_upload_gets_413(client, db, staff_auth, settings, tmp_path):
    settings.API_UPLOADS_ROOT = tmp_path
    settings.API_UPLOAD_MAX_BYTES = 10
    upload = zip_of({"one/task.yaml": TASK_YAML.format(id="one")})
    upload.name = "tasks.zip"
    assert client.post("/api/imports/tasks", {"file": upload}, **staff_auth).status_code == 413


def test_writes_are_rate_limited_per_token_with_a_json_429(
    client, seeded, alice, staff_auth, settings
):
    from benchsite.accounts.services import api_token_create

    settings.API_WRITE_RATE = "2/min"
    run = seeded["runs"]["gamma"]
    statuses = [
        client.post(f"/api/runs/{run.public_id}/retry", **staff_auth).status_code for _ in "abc"
    ]
    assert statuses == [200, 200, 429]
    limited = client.post(f"/api/runs/{run.public_id}/retry", **staff_auth)
    assert limited.status_code == 429
    assert "API_WRITE_RATE" in limited.json()["detail"]
    assert int(limited["Retry-After"]) >= 1
    # Reads are not limited, and another token has its own budget.
    assert client.get("/api/runs", **staff_auth).status_code == 200
    _, other = api_token_create(user=alice, name="second")
    other_headers = {"HTTP_AUTHORIZATION": f"Bearer {other}"}
    assert client.post(f"/api/runs/{run.public_id}/retry", **other_headers).status_code == 200
    assert AuditEvent.objects.filter(action=Action.RUN_RETRY).count() == 3


@pytest.mark.services
def test_the_write_budget_lives_in_redis_when_cache_url_points_there(
    client, seeded, staff_auth, settings
):
    import redis

    from benchsite.settings import _cache_from_url

    settings.CACHES = {"default": _cache_from_url("redis://127.0.0.1:6379/13")}
    settings.API_WRITE_RATE = "2/min"
    server = redis.Redis.from_url("redis://127.0.0.1:6379/13")
    server.flushdb()
    run = seeded["runs"]["gamma"]
    try:
        statuses = [
            client.post(f"/api/runs/{run.public_id}/retry", **staff_auth).status_code for _ in "abc"
        ]
        assert statuses == [200, 200, 429]
        # Another web process sharing CACHE_URL would read this same counter.
        (key,) = server.keys("*api-write*")
        assert int(server.get(key)) == 3
        assert 0 < server.ttl(key) <= 120
    finally:
        server.flushdb()


def test_a_cli_configuration_must_name_a_known_agent_cli(client, db, staff_auth):
    payload = {
        "name": "claude",
        "agent_variant": "cli",
        "model_name": "claude-sonnet-4-5",
        "cli_agent": "claude-code",
        "max_model_calls": 50,
        "base_url": "https://api.anthropic.com",
        "api_key_env": "ANTHROPIC_API_KEY",
    }
    created = post(client, "/api/model-configs", payload, staff_auth)
    assert created.status_code == 201, created.content
    assert (created.json()["cli_agent"], created.json()["max_model_calls"]) == ("claude-code", 50)
    unknown = post(
        client, "/api/model-configs", {**payload, "name": "x", "cli_agent": "crush"}, staff_auth
    )
    assert unknown.status_code == 400
    error = unknown.json()["errors"][0]
    # Crush is not shipped (docs/agent-clis.md says why); the message names every one that is.
    assert error["field"] == "cli_agent", error
    shipped = "aider, claude-code, codex, gemini-cli, mini-swe-agent, opencode, qwen-code"
    assert error["message"].endswith(shipped), error
    no_model = post(
        client, "/api/model-configs", {**payload, "name": "y", "model_name": ""}, staff_auth
    )
    assert no_model.status_code == 400 and no_model.json()["errors"][0]["field"] == "model_name"
