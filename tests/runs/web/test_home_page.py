from __future__ import annotations

from django.urls import reverse

from runs.models import FailureReason


def test_it_lists_suites_with_task_counts(client, custom_dev):
    response = client.get(reverse("home"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "custom-dev" in body
    assert ">7<" in body.replace(" ", "")


def test_it_escapes_suite_descriptions(client, custom_dev):
    custom_dev.description = "<script>alert(1)</script>"
    custom_dev.save()
    body = client.get(reverse("home")).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_admin_lists_fifteen_reasons_in_precedence_order(client, alice):
    client.force_login(alice)
    response = client.get(reverse("admin:runs_failurereason_changelist"))
    assert response.status_code == 200
    body = response.content.decode()
    codes = list(FailureReason.objects.order_by("precedence").values_list("code", flat=True))
    assert len(codes) == 15
    positions = [body.index(f">{code}<") for code in codes]
    assert positions == sorted(positions)


def test_every_admin_changelist_opens(client, alice, custom_dev):
    client.force_login(alice)
    for name in (
        "tasks_app_suite",
        "tasks_app_task",
        "tasks_app_taskrevision",
        "runs_failurereason",
        "runs_modelconfig",
        "runs_run",
        "runs_attempt",
        "runs_attemptstage",
    ):
        response = client.get(reverse(f"admin:{name}_changelist") + "?q=toy")
        assert response.status_code == 200, name
