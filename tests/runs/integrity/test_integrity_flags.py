"""Integrity flags computed from an attempt's stored files (runs/integrity/evidence.py reads
them as untrusted input), stored, shown on the attempt page and in the API, and recomputed by
``ab flags recompute`` when the rule versions differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from benchsite.cli.main import main as ab
from runs.integrity import rules as rules_module
from runs.integrity.rules import Rule
from runs.integrity.services import attempt_flags_compute, rules_signature
from runs.models import AttemptFlag
from tasks_app.models import Task, TaskSource
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db

DELETE_TEST = """diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -14,2 +13,0 @@ def test_mean_of_even_total():
-def test_mean_of_odd_total():
-    assert mean([1, 2]) == 1.5
"""


def tool_start(step: int, tool: str, arguments: dict) -> str:
    return json.dumps({"event": "tool_start", "step": step, "tool": tool, "arguments": arguments})


def attempt_with_files(
    root: Path, files: dict[str, str | bytes], *, source=TaskSource.HARBOR, **fields
):
    suite = make_suite("flags", tasks=1)
    Task.objects.filter(suite=suite).update(source=source)
    task = Task.objects.get(suite=suite)
    run = make_run(suite, make_model("agent-x"))
    attempt = make_attempt(run, task, None, artifacts_dir="run-x/task-000__0", **fields)
    folder = root / "run-x" / "task-000__0"
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return attempt


def test_it_flags_what_the_stored_files_show(artifacts_root):
    events = "\n".join(
        [
            tool_start(1, "run", {"command": "cat /tests/test.sh"}),
            tool_start(2, "run", {"command": "git log --all --oneline"}),
            tool_start(3, "run", {"command": "curl -s https://example.com/x"}),
        ]
    )
    attempt = attempt_with_files(
        artifacts_root,
        {
            "events.jsonl": events,
            "logs/baseline.txt": "# stage baseline_run\n..F.\n1 failed, 3 passed in 0.05s\n",
            "logs/final_test.txt": "# stage final_test\n...\n3 passed in 0.04s\n",
        },
        final_patch=DELETE_TEST,
    )
    found = {f.rule for f in attempt_flags_compute(attempt=attempt)}
    assert found == {"touches_tests", "fewer_tests", "read_hidden", "git_history", "network_escape"}
    stored = {f.rule: f for f in AttemptFlag.objects.filter(attempt=attempt)}
    assert set(stored) == found
    assert stored["fewer_tests"].detail == "baseline collected 4 tests, the final run 3"
    assert "/tests/test.sh" in stored["read_hidden"].detail
    attempt.refresh_from_db()
    assert attempt.integrity_rules == rules_signature()
    # Its outcome is untouched: a flag is beside the score, not in it.
    assert attempt.resolved


def test_broken_and_huge_files_give_no_flag_and_no_error(artifacts_root):
    attempt = attempt_with_files(
        artifacts_root,
        {
            "events.jsonl": b'\xff\xfe not json\n{"event": "tool_start", "arguments": 5}\n[1]\n',
            "logs/baseline.txt": "x" * 2_000_000 + "\n3 passed in 1s\n",
            "logs/final_test.txt": b"\x00\x01" * 1000,
        },
        source=TaskSource.TASK_YAML,
    )
    assert attempt_flags_compute(attempt=attempt) == []
    attempt.refresh_from_db()
    assert attempt.integrity_rules == rules_signature()


def test_an_attempt_without_a_folder_is_judged_on_its_patch(artifacts_root):
    attempt = attempt_with_files(artifacts_root, {}, final_patch=DELETE_TEST)
    attempt.artifacts_dir = ""
    assert [f.rule for f in attempt_flags_compute(attempt=attempt)] == ["touches_tests"]


def test_recompute_redoes_only_attempts_checked_under_other_rules(
    artifacts_root, capsys, monkeypatch
):
    old = attempt_with_files(artifacts_root, {}, final_patch=DELETE_TEST)
    current = make_attempt(
        old.run,
        old.task,
        None,
        sample=1,
        final_patch=DELETE_TEST,
        integrity_rules=rules_signature(),
    )
    # ``current`` carries a flag the rules would not give it today: an --all pass removes it.
    AttemptFlag.objects.create(attempt=current, rule="fewer_tests", rule_version=1)
    assert ab(["flags", "recompute"]) == 0
    assert "checked 1 attempts: 1 flagged, 1 flags" in capsys.readouterr().out
    assert list(old.flags.values_list("rule", flat=True)) == ["touches_tests"]
    assert list(current.flags.values_list("rule", flat=True)) == ["fewer_tests"]
    assert ab(["flags", "recompute"]) == 0
    assert "checked 0 attempts" in capsys.readouterr().out

    # A rule's version goes up: every attempt checked under the old one is checked again.
    bumped = tuple(
        Rule(r.name, r.version + 1, r.why, r.check) if r.name == "touches_tests" else r
        for r in rules_module.RULES
    )
    monkeypatch.setattr(rules_module, "RULES", bumped)
    monkeypatch.setattr("runs.integrity.services.RULES", bumped)
    monkeypatch.setattr(
        "runs.integrity.services.evaluate", lambda e: rules_module.evaluate(e, bumped)
    )
    assert ab(["flags", "recompute"]) == 0
    assert "checked 2 attempts: 2 flagged, 2 flags" in capsys.readouterr().out
    assert set(AttemptFlag.objects.values_list("rule", "rule_version")) == {("touches_tests", 2)}
    assert ab(["flags", "recompute", "--all"]) == 0
    assert "checked 2 attempts" in capsys.readouterr().out
    assert ab(["flags", "recompute", "--suite", "nope"]) == 1
    capsys.readouterr()
    assert ab(["flags", "rules"]) == 0
    listed = capsys.readouterr().out
    assert all(f"{r.name} " in listed and r.why in listed for r in bumped)


def test_the_page_and_the_api_show_the_flags_escaped(artifacts_root, client, alice, bob, dave):
    attempt = attempt_with_files(
        artifacts_root,
        {"events.jsonl": tool_start(1, "run", {"command": "cat /tests/<script>alert(1)</script>"})},
    )
    attempt_flags_compute(attempt=attempt)
    url = reverse("attempt-detail", args=[attempt.public_id])
    client.force_login(bob)
    page = client.get(url).content.decode()
    assert 'id="integrity-flags"' in page and 'data-rule="read_hidden"' in page
    assert rules_module.RULES_BY_NAME["read_hidden"].why in page
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    detail = client.get(f"/api/attempts/{attempt.public_id}").json()
    (flag,) = detail["flags"]
    assert (flag["rule"], flag["version"], flag["current"]) == ("read_hidden", 1, True)
    assert "<script>alert(1)</script>" in flag["detail"]  # JSON carries the text as it is
    assert detail["integrity_rules"] == rules_signature()
    # Someone who is no reader sees the rule and its why, not what it found.
    client.force_login(dave)
    page = client.get(url).content.decode()
    assert 'data-rule="read_hidden"' in page and "alert(1)" not in page
    # The admin lists them read-only under the attempt.
    client.force_login(alice)
    admin = client.get(reverse("admin:runs_attempt_change", args=[attempt.pk]))
    assert admin.status_code == 200 and "read_hidden" in admin.content.decode()
