"""Issue 28, item 8: a model configuration cannot point the worker's key elsewhere.

The attack: staff with ``runs.add_modelconfig`` (not a superuser) creates a configuration whose
``base_url`` is their host and whose ``api_key_env`` names a secret of the worker
(``DJANGO_SECRET_KEY``), then launches it: the gateway (or the LLM agent) sends the secret as
the key. Now both fields come from the operator's lists (runs/upstreams.py), setting them is
for superusers on every door (API, admin, command line: audited), and an attempt re-checks
them when it starts, so a row stored before the lists (or by raw SQL) never sends a key.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.urls import reverse

from benchsite.accounts.access import ACCESS_DENIED
from benchsite.accounts.models import AuditEvent
from benchsite.accounts.services import api_token_create
from runs.models import Attempt, ModelConfig
from runs.upstreams import DEFAULT_KEY_ENVS, DEFAULT_UPSTREAMS, UpstreamPolicy, UpstreamRefused
from tests.conftest import TASKS_DIR
from tests.support.ab_cli import ab_main

pytestmark = pytest.mark.django_db

ATTACK = {
    "name": "exfil",
    "agent_variant": "cli",
    "cli_agent": "claude-code",
    "model_name": "claude-sonnet-4-5",
    "base_url": "http://attacker.example",
    "api_key_env": "DJANGO_SECRET_KEY",
}
LISTED = {"base_url": "https://api.anthropic.com", "api_key_env": "ANTHROPIC_API_KEY"}
TOY_TASK = TASKS_DIR / "custom-dev/toy_fail_pytest/task.yaml"
SECRET = "the-sites-own-secret-0123456789"


@pytest.fixture
def erin(django_user_model):
    """Staff who may add and change model configurations in the admin: not a superuser."""
    erin = django_user_model.objects.create_user("erin", password="erin-password", is_staff=True)
    erin.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_modelconfig", "change_modelconfig"])
    )
    return django_user_model.objects.get(pk=erin.pk)


def api_post(client, user, body: dict):
    _, raw = api_token_create(user=user, name=f"{user.username}-t")
    return client.post(
        "/api/model-configs",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )


def upstream_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="model_config.upstream").order_by("id"))


# --- The API ---------------------------------------------------------------------------------


def test_staff_who_is_not_a_superuser_cannot_choose_where_the_key_goes(client, erin):
    refused = api_post(client, erin, ATTACK)
    assert refused.status_code == 403, refused.content
    detail = refused.json()["detail"]
    assert "model_config.upstream" in detail and "not a superuser" in detail
    # Even listed values: which key goes where is the superuser's choice.
    listed = api_post(client, erin, ATTACK | LISTED | {"name": "listed"})
    assert listed.status_code == 403
    assert not ModelConfig.objects.exists()
    (denial,) = AuditEvent.objects.filter(action=ACCESS_DENIED)
    assert denial.actor == erin and denial.details["action"] == "model_config.upstream"
    # The defaults (LLM_BASE_URL, LLM_API_KEY_ENV) stay open to staff.
    plain = {k: v for k, v in ATTACK.items() if k not in LISTED} | {"name": "plain"}
    created = api_post(client, erin, plain)
    assert created.status_code == 201, created.content
    assert upstream_events() == []


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("api_key_env", "DJANGO_SECRET_KEY", "the site's own secrets"),
        ("api_key_env", "DATABASE_URL", "the site's own secrets"),
        ("api_key_env", "HOME", "not in GATEWAY_API_KEY_ENVS"),
        ("base_url", "http://attacker.example", "http:// only to loopback"),
        ("base_url", "https://attacker.example/v1", "not in GATEWAY_UPSTREAMS"),
        ("base_url", "file:///etc/passwd", "scheme 'file' refused"),
        ("base_url", "gopher://127.0.0.1:6379/_FLUSHALL", "scheme 'gopher' refused"),
        ("base_url", "http://169.254.169.254/latest/meta-data", "internal address"),
        ("base_url", "http://10.0.0.7:8000/v1", "http:// only to loopback"),
        ("base_url", "https://192.168.1.2/v1", "not in GATEWAY_UPSTREAMS"),
        ("base_url", "https://u:p@api.openai.com/v1", "credentials in the URL"),
    ],
)
def test_a_superuser_cannot_name_a_secret_or_an_unlisted_upstream(
    client, alice, field, value, words
):
    response = api_post(client, alice, ATTACK | LISTED | {field: value})
    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["field"] == field and words in error["message"], error
    assert not ModelConfig.objects.exists()


def test_a_superuser_points_a_configuration_at_a_listed_upstream_and_it_is_audited(client, alice):
    response = api_post(client, alice, ATTACK | LISTED)
    assert response.status_code == 201, response.content
    config = ModelConfig.objects.get(name="exfil")
    (event,) = upstream_events()
    assert event.actor == alice and event.via == "api"
    assert event.object_ids == [str(config.public_id)]
    assert event.details["base_url"] == ["", "https://api.anthropic.com"]
    assert event.details["api_key_env"] == ["", "ANTHROPIC_API_KEY"]


# --- The admin -------------------------------------------------------------------------------


def admin_form(**fields) -> dict:
    """What the admin's add/change form posts for a configuration (every required field)."""
    return {
        "name": "exfil",
        "slug": "exfil",
        "agent_variant": "cli",
        "cli_agent": "claude-code",
        "model_name": "claude-sonnet-4-5",
        "extra_params": "{}",
        "workspace_files": "{}",
        "max_steps": "30",
        "max_time_sec": "1800",
        "repeated_failure_threshold": "3",
        "log_llm_messages": "on",
    } | fields


def test_the_admin_shows_other_staff_the_two_fields_but_never_takes_them(erin):
    page = Client()
    page.force_login(erin)
    add = page.get(reverse("admin:runs_modelconfig_add"))
    assert add.status_code == 200
    assert b'name="base_url"' not in add.content and b'name="api_key_env"' not in add.content
    bad = {"base_url": ATTACK["base_url"], "api_key_env": ATTACK["api_key_env"]}
    response = page.post(reverse("admin:runs_modelconfig_add"), admin_form(**bad))
    assert response.status_code == 302, response.content[-2000:]
    config = ModelConfig.objects.get(name="exfil")
    assert (config.base_url, config.api_key_env) == ("", "")
    # Nor on the change page of a configuration a superuser pointed somewhere.
    ModelConfig.objects.filter(pk=config.pk).update(**LISTED)
    change = reverse("admin:runs_modelconfig_change", args=[config.pk])
    assert page.post(change, admin_form(**bad)).status_code == 302
    config.refresh_from_db()
    assert (config.base_url, config.api_key_env) == tuple(LISTED.values())
    assert upstream_events() == []


def test_the_admin_names_the_refused_field_to_a_superuser_and_audits_a_change(alice):
    page = Client()
    page.force_login(alice)
    add = reverse("admin:runs_modelconfig_add")
    refused = page.post(
        add, admin_form(base_url="https://api.anthropic.com", api_key_env="DJANGO_SECRET_KEY")
    )
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert list(errors) == ["api_key_env"] and "the site's own secrets" in errors["api_key_env"][0]
    assert not ModelConfig.objects.exists()
    assert page.post(add, admin_form(**LISTED)).status_code == 302
    config = ModelConfig.objects.get(name="exfil")
    change = reverse("admin:runs_modelconfig_change", args=[config.pk])
    moved = admin_form(**LISTED | {"base_url": "https://api.anthropic.com/v2"})
    assert page.post(change, moved).status_code == 302
    created, changed = upstream_events()
    assert (created.via, created.actor) == ("admin", alice)
    assert changed.details["base_url"] == [
        "https://api.anthropic.com",
        "https://api.anthropic.com/v2",
    ]
    assert "api_key_env" not in changed.details


# --- The command line ------------------------------------------------------------------------


def test_the_command_line_refuses_a_secret_variable_naming_the_field():
    refused = ab_main(
        "run-agent",
        "--task",
        str(TOY_TASK),
        "--variant",
        "llm",
        "--model",
        "gpt-4o",
        "--base-url",
        "https://api.openai.com/v1",
        "--api-key-env",
        "DJANGO_SECRET_KEY",
    )
    assert refused.returncode == 1
    err = refused.stderr
    assert "api_key_env: 'DJANGO_SECRET_KEY' holds one of the site's own secrets" in err
    assert not ModelConfig.objects.filter(api_key_env="DJANGO_SECRET_KEY").exists()


# --- When an attempt starts ------------------------------------------------------------------


def raw_sql_update(config: ModelConfig, **fields: str) -> None:
    """What a row stored before the lists existed looks like: written past every check."""
    table = ModelConfig._meta.db_table
    sets = ", ".join(f"{name} = %s" for name in fields)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {sets} WHERE id = %s", [*fields.values(), config.pk])


def run_one(config: ModelConfig, backend: str = "bwrap") -> Attempt:
    from runs.lifecycle import attempt_claim
    from runs.pipeline.execute import attempt_execute
    from runs.services import run_launch
    from tests.support.pipeline_fixtures import get_task, import_tasks

    import_tasks()
    task = get_task("toy_fail_pytest")
    run = run_launch(suite=task.suite, model_config=config, samples=1, task_ids=[task.task_id])
    attempt = run.attempts.get()
    assert attempt_claim(attempt_id=attempt.id, worker="test@inline")
    attempt = Attempt.objects.select_related("run", "task", "model_config", "suite").get(
        id=attempt.id
    )
    return attempt_execute(attempt, backend=backend)


def artifact_text(attempt: Attempt) -> str:
    from runs.pipeline.artifacts import folder_of

    folder = folder_of(attempt.artifacts_dir)
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_a_stored_row_naming_a_secret_never_sends_it(settings, tmp_path, monkeypatch):
    from tests.support.fake_provider import FakeProvider, text

    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    monkeypatch.setenv("AB_TEST_SITE_SECRET", SECRET)
    with FakeProvider([text("done")]) as server:
        config = ModelConfig.objects.create(
            name="llm stored",
            agent_variant="llm",
            model_name="gpt-4o-mini",
            base_url=server.url("/v1"),
            api_key_env="H3_FAKE_KEY",
        )
        raw_sql_update(config, api_key_env="AB_TEST_SITE_SECRET")
        attempt = run_one(config)
        assert server.requests == []  # the model was never called: no key went anywhere
    assert attempt.failure_reason_id == "LLM_ERROR" and attempt.is_infra
    assert "[upstream-refused] api_key_env: 'AB_TEST_SITE_SECRET' is not" in attempt.error_text
    assert attempt.error_kind == "permanent"
    assert SECRET not in artifact_text(attempt)


@pytest.mark.slow
def test_a_cli_attempt_to_an_unlisted_upstream_never_opens_its_gateway(
    settings, tmp_path, monkeypatch
):
    from tests.support.fake_provider_plans import REAL_KEY, UPSTREAM_KEY_ENV, Step, plan_provider

    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    with plan_provider([Step.finish()]) as upstream:
        config = ModelConfig.objects.create(
            name="claude stored",
            agent_variant="cli",
            cli_agent="claude-code",
            model_name="claude-sonnet-4-5",
            base_url=upstream.url(),
            api_key_env=UPSTREAM_KEY_ENV,
        )
        # The operator takes loopback off the list after the row was stored.
        settings.GATEWAY_UPSTREAMS = ["api.anthropic.com"]
        settings.LLM_BASE_URL = "https://api.openai.com/v1"
        attempt = run_one(config)
        assert upstream.requests == []
    assert attempt.failure_reason_id == "LLM_ERROR" and attempt.error_kind == "permanent"
    assert "[upstream-refused] base_url: 127.0.0.1 is not in" in attempt.error_text
    assert REAL_KEY not in artifact_text(attempt)


def test_the_gateway_refuses_to_open_for_a_variable_or_upstream_not_listed(tmp_path):
    from runs.gateway import GatewayConfig, open_gateway

    policy = UpstreamPolicy.of(["ANTHROPIC_API_KEY"], ["api.anthropic.com", "127.0.0.1"])
    for base_url, key_env, field in [
        ("http://127.0.0.1:9/v1", "DJANGO_SECRET_KEY", "api_key_env"),
        ("https://attacker.example", "ANTHROPIC_API_KEY", "base_url"),
    ]:
        config = GatewayConfig(
            upstream_base_url=base_url,
            upstream_api_key=SECRET,
            api_key_env=key_env,
            upstream_policy=policy,
            record_path=tmp_path / "calls.jsonl",
        )
        with pytest.raises(UpstreamRefused) as refused, open_gateway(config):
            pass
        assert refused.value.field == field
    assert not (tmp_path / "calls.jsonl").exists()


# --- The policy itself -----------------------------------------------------------------------

POLICY = UpstreamPolicy.of(
    ["OPENAI_API_KEY"], ["api.openai.com", "localhost", "127.0.0.1", "::1", "llm.internal:8443"]
)


@pytest.mark.parametrize(
    "url",
    [
        "",  # the default upstream (LLM_BASE_URL), checked itself at launch
        "https://api.openai.com/v1",
        "https://API.OpenAI.com./v1",
        "http://127.0.0.1:8000/v1",
        "http://localhost:11434/v1",
        "http://[::1]:8000/v1",
        "https://llm.internal:8443/v1",
    ],
)
def test_the_policy_lets_listed_upstreams_through(url):
    assert POLICY.base_url_problem(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://llm.internal/v1",  # listed for port 8443 only
        "https://api.openai.com.attacker.example/v1",
        "http://api.openai.com/v1",  # the key in clear over the network
        "http://127.0.0.2:8000/v1",
        "http://2130706433/v1",
        "https://[::ffff:169.254.169.254]/",
        "https://0.0.0.0/",
        "ftp://api.openai.com/",
        "//api.openai.com/v1",
        "https://api.openai.com/v1?redirect=attacker.example",
        "https://api.openai.com/v1#x",
        "https://api.openai.com:99999/",
    ],
)
def test_the_policy_refuses_anything_else(url):
    assert POLICY.base_url_problem(url), url


def test_the_default_lists_let_a_gemini_configuration_through():
    """Google's Gemini API (the gateway's ``gemini`` wire API): its host, the base URL a Gemini
    CLI configuration names (its client adds ``/v1beta``), and its key variable."""
    policy = UpstreamPolicy.of(DEFAULT_KEY_ENVS, DEFAULT_UPSTREAMS)
    base_url = "https://generativelanguage.googleapis.com"
    assert policy.problems(base_url=base_url, api_key_env="GEMINI_API_KEY") == {}
    assert policy.base_url_problem("http://generativelanguage.googleapis.com") is not None
