"""One write, the same audit record whatever the door (issue 30, "one write path").

Each run action is asked through every door that offers it: the REST API (alice's token), the
run page's button (her session), the admin's action and the ``ab`` command (in-process, on
the test database). The write services (``runs.actions``) record the event, so the records
differ only in the door they name, and in who: alice's account, or for ``ab`` (which has no
account) the OS user running it.
"""

from __future__ import annotations

import getpass

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client
from django.urls import reverse

from benchsite.accounts.models import Action, AuditEvent, Door
from benchsite.accounts.services import api_token_create
from benchsite.cli.main import main
from runs.models import Attempt, AttemptStatus, ModelConfig, Run

# action -> (API path suffix or None, page URL name, admin action, ab command)
DOORS: dict[Action, tuple[str | None, str, str, str]] = {
    Action.RUN_CANCEL: ("cancel", "run-cancel", "cancel_runs", "cancel-run"),
    Action.RUN_RETRY: ("retry", "run-retry", "retry_runs", "retry-run"),
    Action.RUN_RESUME: (None, "run-resume", "resume_runs", "resume-run"),
    Action.RUN_EVALUATE: ("evaluate", "run-evaluate", "evaluate_runs", "evaluate-run"),
}


def a_queued_run(suite) -> Run:
    config, _ = ModelConfig.objects.get_or_create(name="doors", agent_variant="scripted")
    run = Run.objects.create(suite=suite, model_config=config, samples=1)
    Attempt.objects.create(
        run=run,
        task=suite.tasks.order_by("task_id").first(),
        suite=suite,
        model_config=config,
        status=AttemptStatus.QUEUED,
    )
    return run


def through(door: Door, action: Action, run: Run, alice) -> None:
    """Ask ``action`` on ``run`` through ``door`` as alice (staff), and check it was done."""
    api, page, admin_action, command = DOORS[action]
    client = Client()
    if door == Door.API:
        _, raw = api_token_create(user=alice, name=f"doors-{run.pk}")
        response = client.post(
            f"/api/runs/{run.public_id}/{api}", HTTP_AUTHORIZATION=f"Bearer {raw}"
        )
        assert response.status_code == 200, response.content
    elif door == Door.PAGE:
        client.force_login(alice)
        assert client.post(reverse(page, args=[run.public_id])).status_code == 302
    elif door == Door.ADMIN:
        client.force_login(alice)
        response = client.post(
            reverse("admin:runs_run_changelist"),
            {"action": admin_action, ACTION_CHECKBOX_NAME: [run.pk]},
        )
        assert response.status_code == 302
    else:
        assert main([command, str(run.public_id)]) == 0


def the_record(run: Run) -> dict:
    (event,) = AuditEvent.objects.filter(object_ids=[str(run.public_id)])
    details = dict(event.details)
    os_user = details.pop("os_user", "")
    return {
        "actor": event.actor_name or f"os:{os_user}",
        "door": event.via,
        "action": event.action,
        "target": (event.object_type, event.object_ids),
        "details": details,
    }


def doors_of(action: Action) -> list[Door]:
    return [door for door in Door if door != Door.API or DOORS[action][0] is not None]


@pytest.mark.parametrize("action", list(DOORS), ids=str)
def test_every_door_of_a_run_action_leaves_the_same_audit_record(action, alice, custom_dev):
    records = {}
    for door in doors_of(action):
        run = a_queued_run(custom_dev)
        through(door, action, run, alice)
        record = the_record(run)
        expected_actor = f"os:{getpass.getuser()}" if door == Door.CLI else "alice"
        assert (record["actor"], record["door"], record["action"]) == (
            expected_actor,
            str(door),
            str(action),
        )
        assert record["target"] == ("runs.run", [str(run.public_id)])
        records[door] = record
    # Same action, same kind of target, same details (counts of a like run): only the door
    # and, for ab, the actor differ.
    shapes = {door: (r["action"], r["target"][0], r["details"]) for door, r in records.items()}
    assert len(set(map(repr, shapes.values()))) == 1, shapes


def test_a_refused_door_records_the_refusal_and_not_the_write(dave, custom_dev):
    run = a_queued_run(custom_dev)
    client = Client()
    client.force_login(dave)
    assert client.post(reverse("run-cancel", args=[run.public_id])).status_code == 403
    events = list(AuditEvent.objects.values_list("action", "via", "actor_name"))
    assert events == [(Action.ACCESS_DENIED.value, "page", "dave")]
    run.refresh_from_db()
    assert run.status == "queued"


ENTRY_POINTS = (
    "runs/api/runs.py",
    "runs/web/control.py",
    "runs/admin_actions.py",
    "runs/admin.py",
    "runs/cli/runs.py",
    "runs/imports/api.py",
    "runs/imports/admin.py",
    "runs/imports/cli.py",
    "tasks_app/api.py",
    "tasks_app/swebench/dataset_admin.py",
    "tasks_app/cli/tasks.py",
    "tasks_app/cli/swebench_dataset.py",
)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_entry_points_only_call_services_that_audit(path: str):
    """No door records an audit event by hand: that is the write services' job."""
    from tests.conftest import REPO_ROOT

    source = (REPO_ROOT / path).read_text()
    hand_made = [name for name in ("audit_event_record", "upstream_audit(") if name in source]
    if path in ("runs/cli/runs.py",):
        # ab run-suite makes a configuration from its options with get_or_create: the one
        # write there with no service of its own; its upstream is audited by the helper.
        hand_made = [name for name in hand_made if name != "upstream_audit("]
    assert hand_made == [], f"{path} records audit events itself: call a service in runs.actions"
