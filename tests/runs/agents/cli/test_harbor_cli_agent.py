"""A real agent CLI (mini-swe-agent, from the install cache) on a Harbor task: given
``instruction.md``, working in the image's ``/app`` through the model gateway (its calls go to
the scripted fake provider of tests/support/fake_provider_plans.py), then graded by the task's
verifier."""

from __future__ import annotations

import pytest

from runs.agents.cli.definition import load_definitions
from runs.agents.cli.install import ensure_install
from runs.pipeline.adhoc import attempt_create_adhoc
from runs.pipeline.execute import attempt_execute
from tests.conftest import REPO_ROOT
from tests.support.backends import backend_params
from tests.support.fake_provider_plans import (
    REAL_KEY,
    UPSTREAM_KEY_ENV,
    WIRE_PATH,
    cli_model_config,
    fix_plan,
    plan_provider,
)

EXAMPLES = REPO_ROOT / "examples" / "harbor"
OLD = '    counts = Counter(re.findall(r"[A-Za-z]+", text))'
NEW = '    counts = Counter(re.findall(r"[a-z]+", text.lower()))'

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.xdist_group("harbor-builds"),
]


@pytest.mark.parametrize("backend", backend_params())
def test_mini_swe_agent_fixes_a_harbor_task_through_the_gateway(
    backend, artifacts_root, monkeypatch
):
    from tasks_app.models import Task
    from tasks_app.services import tasks_import
    from tasks_app.spec import PathRules

    ensure_install(load_definitions()["mini-swe-agent"])
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    tasks_import(directory=EXAMPLES, rules=PathRules.local(EXAMPLES))
    task = Task.objects.get(suite__name="harbor", task_id="py-wordfreq")
    plan = fix_plan(
        workdir="/app",
        path="wordfreq.py",
        old=OLD,
        new=NEW,
        test_command="python3 -c 'import wordfreq'",
    )

    with plan_provider(plan) as upstream:
        config = cli_model_config("mini-swe-agent", upstream)
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend=backend
        )

    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.grade == "FULL"
    assert f"+{NEW}" in attempt.final_patch
    calls = upstream.requests_to(WIRE_PATH["mini-swe-agent"])
    assert len(calls) >= 4
    # The CLI was given the task's instruction.
    assert any("Count words case-insensitively" in c.body.decode(errors="replace") for c in calls)
