"""The attempt page: patch and gold patch, stage logs, trajectory, tests, downloads, access."""

from __future__ import annotations

import json
import time

import pytest
from django.urls import reverse

from tasks_app.models import Task
from tests.support.pages_fixtures import add_stage, make_attempt, make_model, make_run, make_suite

pytestmark = pytest.mark.django_db

PATCH = """diff --git a/src/calc.py b/src/calc.py
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,3 +1,3 @@
 def mean(values):
-    return sum(values) // len(values)
+    return sum(values) / len(values)
 # end
"""
XSS_PATCH = """--- a/page.html
+++ b/page.html
@@ -1 +1 @@
-<p>old</p>
+<script>window.__xss=1</script><img src=x onerror="window.__xss=1">
"""


@pytest.fixture
def attempt(artifacts_root):
    suite = make_suite("att", tasks=1)
    task = Task.objects.get(suite=suite)
    task.gold_patch = PATCH
    task.problem_statement = "<script>window.__xss=1</script> mean is wrong"
    task.save()
    run = make_run(suite, make_model("solver"))
    attempt = make_attempt(
        run,
        task,
        "TESTS_FAILED",
        final_patch=XSS_PATCH,
        error_text="<img src=x onerror=alert(1)>",
        test_results={
            "FAIL_TO_PASS": {"success": [], "failure": ["tests/test_calc.py::test_mean"]},
            "PASS_TO_PASS": {"success": ["tests/test_calc.py::test_sum"], "failure": []},
        },
    )
    return attempt


@pytest.fixture
def reader(client, bob):
    client.force_login(bob)
    return client


def page(client, attempt, query=""):
    response = client.get(reverse("attempt-detail", args=[attempt.public_id]) + query)
    assert response.status_code == 200
    return response.content.decode()


def test_it_shows_the_patch_the_gold_patch_and_what_the_reason_means(reader, attempt):
    body = page(reader, attempt)
    assert "Agent&#x27;s final patch" in body or "Agent's final patch" in body
    assert "Gold patch" in body
    assert 'class="k">def</span>' in body  # pygments highlighting of the gold patch
    assert "Tests fail after agent" in body
    assert "Agent didn" in body  # typical cause
    assert "counts as the agent" in body
    assert "tests/test_calc.py::test_mean" in body


def test_it_escapes_patches_error_text_and_problem_statements(reader, attempt):
    body = page(reader, attempt) + page(reader, attempt, "?view=split")
    assert "<script>window.__xss=1</script>" not in body
    assert '<img src=x onerror="window.__xss=1">' not in body
    assert "<img src=x onerror=alert(1)>" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body


def test_the_side_by_side_view_pairs_removed_and_added_lines(reader, attempt):
    body = page(reader, attempt, "?view=split")
    assert 'class="diff hl split"' in body
    assert 'class="diff hl unified"' not in body


def test_a_large_log_shows_its_tail_and_offers_the_download(reader, attempt):
    from tests.support.pages_fixtures import write_artifact

    line = b"x" * 99 + b"\n"
    write_artifact(attempt, "logs/final_test.txt", line * 500_000 + b"THE LAST LINE\n")
    add_stage(attempt, "final_test", "logs/final_test.txt", exit_code=1)
    attempt.failure_stage = "final_test"
    attempt.save(update_fields=["failure_stage"])
    started = time.monotonic()
    body = page(reader, attempt)
    assert time.monotonic() - started < 5
    assert "THE LAST LINE" in body
    assert "of 47.7 MB shown" in body
    assert len(body) < 400_000
    url = reverse("attempt-artifact", args=[attempt.public_id, "logs/final_test.txt"])
    assert url in body
    response = reader.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert sum(len(chunk) for chunk in response.streaming_content) == 50_000_014


def test_a_ten_thousand_line_diff_is_capped_per_file_and_in_total(reader, attempt):
    files = []
    for f in range(6):
        lines = "".join(f"+line {i}\n" for i in range(1900 if f < 5 else 3000))
        count = 1900 if f < 5 else 3000
        files.append(f"--- /dev/null\n+++ b/big{f}.py\n@@ -0,0 +1,{count} @@\n{lines}")
    attempt.final_patch = "".join(files)
    attempt.save(update_fields=["final_patch"])
    body = page(reader, attempt)
    assert "big5.py" in body
    assert "3001 lines: too large to show here" in body
    assert "the page&#x27;s line limit was reached" in body or "line limit was reached" in body
    assert body.count('<tr class="add">') <= 8000
    assert len(body) < 6_000_000


def test_the_trajectory_shows_tool_calls_escaped_and_tolerates_unknown_events(reader, attempt):
    from tests.support.pages_fixtures import write_artifact

    events = [
        {
            "ts": "2026-10-01T12:00:00",
            "event": "tool_start",
            "tool": "read_file",
            "input": {"path": "a.py"},
        },
        {
            "event": "tool_finish",
            "tool": "read_file",
            "output": "<script>window.__xss=1</script>",
            "ok": True,
        },
        {"type": "brand_new_event", "detail": "kept"},
        {
            "event": "tool_finish",
            "tool": "apply_patch",
            "output": "patch does not apply",
            "ok": False,
            "artifact": "logs/tool_0003.txt",
        },
        {"event": "tool_finish", "tool": "x", "output": "y", "artifact": "../../etc/passwd"},
    ]
    text = "\n".join(json.dumps(e) for e in events) + "\nnot json\n"
    write_artifact(attempt, "events.jsonl", text.encode())
    body = page(reader, attempt)
    assert "read_file" in body and "brand_new_event" in body and "detail=kept" in body
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    assert "<script>window.__xss=1</script>" not in body
    assert "1 line could not be read as JSON" in body
    assert 'class="tool error"' in body
    assert f"/attempts/{attempt.public_id}/artifacts/logs/tool_0003.txt" in body
    assert "etc/passwd" not in body


def test_anonymous_visitors_get_a_login_prompt_instead_of_artifacts(client, attempt, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    body = page(client, attempt)
    assert 'id="login-prompt"' in body
    assert "page.html" not in body
    assert "test_mean" not in body
    url = reverse("attempt-artifact", args=[attempt.public_id, "events.jsonl"])
    assert client.get(url).status_code == 302
    patch = reverse("attempt-patch", args=[attempt.public_id, "final"])
    assert client.get(patch).status_code == 302


def test_downloads_refuse_paths_outside_the_attempt(reader, attempt, artifacts_root):
    from tests.support.pages_fixtures import write_artifact

    write_artifact(attempt, "result.json", b"{}")
    (artifacts_root / "secret.txt").write_text("secret")
    for bad in ("../secret.txt", "../../secret.txt", "logs/../../secret.txt"):
        url = f"/attempts/{attempt.public_id}/artifacts/{bad}"
        response = reader.get(url)
        assert response.status_code == 404, bad
    ok = reader.get(reverse("attempt-artifact", args=[attempt.public_id, "result.json"]))
    assert ok.status_code == 200


def test_the_final_patch_downloads_as_a_diff(reader, attempt):
    response = reader.get(reverse("attempt-patch", args=[attempt.public_id, "final"]))
    assert response.content.decode() == XSS_PATCH
    assert response["Content-Disposition"] == 'attachment; filename="task-000.final.diff"'


def test_it_marks_an_attempt_scored_against_an_older_task_revision(reader, attempt):
    Task.objects.filter(id=attempt.task_id).update(revision=3)
    body = page(reader, attempt)
    assert "stale: task revision 1 &lt; 3" in body


def test_two_attempts_side_by_side(reader, attempt):
    other = make_attempt(
        make_run(attempt.suite, make_model("other")), attempt.task, None, final_patch=PATCH
    )
    url = reverse("attempt-vs", args=[attempt.public_id, other.public_id])
    response = reader.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert "solver" in body and "other" in body
    assert "TESTS_FAILED" in body and "resolved" in body
    assert "<script>window.__xss=1</script>" not in body


def test_the_attempt_page_query_count_is_bounded(reader, attempt, django_assert_max_num_queries):
    for i in range(20):
        make_attempt(make_run(attempt.suite, make_model(f"extra-{i}")), attempt.task, None)
    # The page's 7, the page cache's 2 on a miss (the data version, the attempt's folder) and
    # previous / next's 5 (the run named by its id, the attempt's sort key, the one before, the
    # one after, the position): the same whether it steps through its run or a list of 21.
    with django_assert_max_num_queries(14):
        page(reader, attempt)
    with django_assert_max_num_queries(14):
        body = page(reader, attempt, "?sort=cost")
    assert "of 21 in this list" in body
