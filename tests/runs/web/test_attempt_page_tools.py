"""The attempt page's reader tools (issue 22): previous / next within the list it was opened
from (or its run), the final test log beside the per-test table with each test linked to its
line, and each step's duration where the trajectory recorded times."""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal
from html import unescape
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from runs import step_times, transcript
from runs.models import Attempt, AttemptStatus
from tasks_app.models import Task
from tests.conftest import SHARED_DIR
from tests.support.pages_fixtures import (
    add_stage,
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

pytestmark = pytest.mark.django_db

SCRIPT = "<script>window.__xss=1</script>"
MINI_TRAJ = (
    SHARED_DIR / "swebench/mini_swe_agent_run/trajs/psf__requests-1142/psf__requests-1142.traj.json"
)


@pytest.fixture
def reader(client, bob):
    client.force_login(bob)
    return client


def open_page(client, attempt, query: str = "") -> tuple[str, dict]:
    url = reverse("attempt-detail", args=[attempt.public_id]) + (f"?{query}" if query else "")
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), response.context


# --- previous / next -------------------------------------------------------------------------


@pytest.fixture
def run_list():
    """One run of 8 tasks with costs that repeat and are sometimes unknown, plus another
    model's run on the same tasks."""
    suite = make_suite("nav", tasks=8)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    run = make_run(suite, make_model("walker"))
    costs = ["0.20", None, "0.50", "0.20", None, "0.90", "0.20", "0.10"]
    for i, (task, cost) in enumerate(zip(tasks, costs, strict=True)):
        make_attempt(
            run,
            task,
            None if i % 3 else "TESTS_FAILED",
            cost_usd=None if cost is None else Decimal(cost),
        )
    other = make_run(suite, make_model("other"))
    for task in tasks:
        make_attempt(other, task, None)
    return run


def walk(client, start: Attempt, query: str, direction: str = "next") -> list[str]:
    """Follow the page's next (or previous) link from ``start`` until the end; the attempt ids
    met (read from the pages, as a visitor follows them)."""
    met, url = [], reverse("attempt-detail", args=[start.public_id]) + "?" + query
    link_id = "nav-next" if direction == "next" else "nav-prev"
    for _ in range(50):
        response = client.get(url)
        assert response.status_code == 200
        met.append(re.search(r"/attempts/([0-9a-f-]{36})/", url)[1])
        found = re.search(rf'id="{link_id}" rel="\w+" href="([^"]+)"', response.content.decode())
        if not found:
            return met
        url = unescape(found[1])
    raise AssertionError("no end")


def test_previous_and_next_step_through_the_list_in_its_order(client, run_list):
    suite = run_list.suite
    for query in (
        "models=walker&sort=cost&order=desc",
        "models=walker&sort=cost&order=asc",
        "models=walker,other&sort=outcome",
        "outcome=resolved&sort=task&order=desc",
    ):
        listed = client.get(reverse("suite-attempts", args=[suite.name]) + "?" + query)
        order = [str(a.public_id) for a in listed.context["page"]]
        first = Attempt.objects.get(public_id=order[0])
        # The list's links carry its filter and order; following next visits its rows in order.
        row_link = unescape(
            re.search(r'class="attempt-link" href="([^"]+)"', listed.content.decode())[1]
        )
        forwards = walk(client, first, row_link.split("?", 1)[1])
        assert forwards == order, query
        last = Attempt.objects.get(public_id=order[-1])
        assert walk(client, last, row_link.split("?", 1)[1], "previous") == order[::-1], query


def test_the_page_says_where_it_is_and_links_back_to_the_list_page(reader, run_list):
    client = reader
    suite = run_list.suite
    query = urlencode([("models", "walker,other"), ("sort", "task"), ("order", "asc")])
    ordered = list(
        Attempt.objects.filter(suite=suite).order_by("task__task_id", "model_config__name")
    )
    seventh = ordered[6]
    body, context = open_page(client, seventh, query + "&page_size=5")
    nav = context["nav"]
    assert (nav.scope, nav.position, nav.total) == ("list", 7, 16)
    assert nav.previous.startswith(reverse("attempt-detail", args=[ordered[5].public_id]))
    assert nav.next.startswith(reverse("attempt-detail", args=[ordered[7].public_id]))
    assert "page_size=5" in nav.next and "sort=task" in nav.next
    assert "7 of 16 in this list" in body
    assert nav.list_url.endswith(f"page_size=5&page=2#attempt-{seventh.public_id}")
    listed = client.get(nav.list_url.split("#")[0])
    assert str(seventh.public_id) in [str(a.public_id) for a in listed.context["page"]]
    # The patch view's toggle keeps the list.
    assert (
        "?models=walker%2Cother&amp;sort=task&amp;order=asc&amp;page_size=5&amp;view=split" in body
    )


def test_without_a_list_it_steps_through_its_run(client, run_list):
    attempts = list(run_list.attempts.order_by("task__task_id"))
    body, context = open_page(client, attempts[0])
    assert context["nav"].scope == "run" and context["nav"].total == 8
    assert walk(client, attempts[0], "") == [str(a.public_id) for a in attempts]
    assert "in this run" in body and f"?runs={str(run_list.public_id)[:8]}" in body


def test_an_attempt_outside_the_list_says_so(client, run_list):
    failed = run_list.attempts.filter(failure_reason__isnull=False).first()
    body, context = open_page(client, failed, "outcome=resolved")
    assert context["nav"].absent and "not in that list" in body
    _, bad = open_page(client, failed, "outcome=lost")
    assert bad["nav"].error.startswith("outcome: Input should be ")  # the API's words


# --- the test log beside the per-test table --------------------------------------------------

HARNESS_LOG = f"""+ source /opt/miniconda3/bin/activate
+ git apply -v - <<'EOF_114329324912'
Checking patch tests/test_calc.py...
+ : '>>>>> Start Test Output'
+ pytest -rA tests/test_calc.py
============================= test session starts ==============================
tests/test_calc.py::test_mean PASSED                                     [ 33%]
tests/test_calc.py::test_mean_empty FAILED                               [ 66%]
tests/test_calc.py::test_total PASSED                                    [100%]
=================================== FAILURES ===================================
E   AssertionError: {SCRIPT}
=========================== short test summary info ============================
PASSED tests/test_calc.py::test_mean
PASSED tests/test_calc.py::test_total
FAILED tests/test_calc.py::test_mean_empty - AssertionError: {SCRIPT}
+ : '>>>>> End Test Output'
+ git checkout abc123 tests/test_calc.py
"""


@pytest.fixture
def graded(artifacts_root):
    suite = make_suite("tlog", tasks=1)
    task = Task.objects.get(suite=suite)
    attempt = make_attempt(
        make_run(suite, make_model("tester")),
        task,
        "TESTS_FAILED",
        test_results={
            "FAIL_TO_PASS": {
                "success": ["tests/test_calc.py::test_mean"],
                "failure": ["tests/test_calc.py::test_mean_empty"],
            },
            "PASS_TO_PASS": {"success": ["tests/test_calc.py::test_total"], "failure": []},
            "FAIL_TO_FAIL": {"success": [], "failure": ["tests/test_calc.py::gone"]},
        },
    )
    write_artifact(attempt, "logs/final_test.txt", HARNESS_LOG.encode())
    add_stage(attempt, "final_test", "logs/final_test.txt", order=5, exit_code=1)
    return attempt


def test_each_test_links_to_its_line_in_the_marked_section_of_the_log(reader, graded):
    body, context = open_page(reader, graded)
    lines = HARNESS_LOG.splitlines()
    log = context["test_log"].log
    assert log.marked and log.lines[0] == (5, lines[4]) and log.lines[-1][0] == 15
    links = {name: line for _, name, _, line in context["test_rows"]}
    # The verdict's line: pytest's summary line (the last that states it).
    assert links["tests/test_calc.py::test_mean"] == 13
    assert links["tests/test_calc.py::test_mean_empty"] == 15
    assert links["tests/test_calc.py::test_total"] == 14
    assert links["tests/test_calc.py::gone"] is None
    assert lines[14].startswith("FAILED tests/test_calc.py::test_mean_empty")
    assert 'href="#tlog-15"' in body and 'id="tlog-15"' in body
    assert "not in the log" in body
    # Outside the markers: not shown. Untrusted output: escaped.
    assert "Checking patch" not in body.split('id="test-log"')[1].split("</pre>")[0]
    assert SCRIPT not in body and "AssertionError: &lt;script&gt;" in body


def test_a_log_without_markers_is_shown_whole(reader, graded):
    write_artifact(graded, "logs/plain.txt", b"collected 1 item\ntest_x.py::test_a PASSED\n")
    graded.stages.update(output_path="logs/plain.txt")
    graded.test_results = {"test_x.py::test_a": "PASSED"}
    graded.save()
    body, context = open_page(reader, graded)
    log = context["test_log"].log
    assert not log.marked and [n for n, _ in log.lines] == [1, 2]
    assert "(it has no test markers)" in body


def test_a_long_test_section_is_cut_by_lines_and_by_characters():
    from runs import final_tests

    many = "x\n" * (final_tests.MAX_LINES + 50)
    log = final_tests.read(f"setup\n>>>>> Start Test Output\n{many}>>>>> End Test Output\n")
    assert log.marked and len(log.lines) == final_tests.MAX_LINES and log.cut == 50
    assert log.lines[0] == (3, "x")
    wide = ("y" * 1000 + "\n") * 500  # 500,000 characters
    log = final_tests.read(wide)
    shown = sum(len(text) for _, text in log.lines)
    assert shown <= final_tests.MAX_SHOWN_CHARS and len(log.lines) + log.cut == 500
    assert len(log.lines) == final_tests.MAX_SHOWN_CHARS // 1000


def test_visitors_get_no_log(client, graded):
    body, context = open_page(client, graded)
    assert "test_log" not in context and 'id="test-log"' not in body


# --- step times ------------------------------------------------------------------------------


def times_of(files: dict[str, bytes]) -> tuple[transcript.Transcript, step_times.StepTimes | None]:
    def read(name: str) -> bytes | None:
        return files.get(name)

    loaded = transcript.load(read)
    return loaded, step_times.load(read, loaded)


def test_a_real_mini_swe_agent_trajectory_times_each_call_until_the_next():
    data = MINI_TRAJ.read_bytes()
    loaded, times = times_of({"trajectory.traj.json": data})
    created = [
        m["extra"]["response"]["created"]
        for m in json.loads(data)["messages"]
        if m["role"] == "assistant"
    ]
    assert times is not None and len(times.steps) == len(created) > 10
    assert [s.seconds for s in times.steps[:-1]] == [
        float(b - a) for a, b in itertools.pairwise(created)
    ]
    assert times.steps[-1].seconds is None  # the last call's end is not recorded
    assert times.total == float(created[-1] - created[0])
    assistants = [t for t in loaded.turns if t.role == "assistant"]
    assert times.by_turn[assistants[2].index].step == 3


def test_mini_swe_agent_2_times_a_step_from_the_last_one_to_its_output():
    messages = [
        {"role": "system", "content": "s", "extra": {"timestamp": 100.0}},
        {"role": "user", "content": "task", "extra": {"timestamp": 100.5}},
        {"role": "assistant", "content": "```bash\nls\n```", "extra": {"timestamp": 103.0}},
        {"role": "user", "content": "<returncode>0</returncode>", "extra": {"timestamp": 104.0}},
        {"role": "assistant", "content": "```bash\nexit\n```", "extra": {"timestamp": 110.0}},
        {"role": "user", "content": "<returncode>0</returncode>", "extra": {"timestamp": 110.25}},
    ]
    data = json.dumps({"info": {}, "messages": messages, "trajectory_format": "mini-swe-agent-1"})
    _, times = times_of({"trajectory.traj.json": data.encode()})
    assert [s.seconds for s in times.steps] == [3.5, 6.25]
    assert times.total == 9.75


def test_inspect_times_each_model_call_with_its_tools():
    sample = {
        "messages": [
            {"role": "user", "content": "fix it"},
            {
                "role": "assistant",
                "content": "look",
                "tool_calls": [{"id": "a", "function": "bash", "arguments": {"cmd": "ls"}}],
            },
            {"role": "tool", "tool_call_id": "a", "content": "x.py"},
            {"role": "assistant", "content": "done"},
        ],
        "events": [
            {"event": "sample_init", "timestamp": "2025-05-01T10:00:00+00:00"},
            {
                "event": "model",
                "timestamp": "2025-05-01T10:00:01+00:00",
                "completed": "2025-05-01T10:00:04+00:00",
            },
            {
                "event": "tool",
                "timestamp": "2025-05-01T10:00:04.5+00:00",
                "completed": "2025-05-01T10:00:06+00:00",
            },
            {"event": "model", "timestamp": "2025-05-01T10:00:07+00:00", "working_time": 2.5},
        ],
    }
    _, times = times_of({"trajectory.inspect.json": json.dumps(sample).encode()})
    assert [s.seconds for s in times.steps] == [5.0, 2.5]


def test_an_atif_agent_step_runs_from_the_step_before_to_its_own_time():
    from tests.runs.transcript.test_transcript_atif import harbor_trajectory

    document = harbor_trajectory("org__repo-1")
    loaded, times = times_of({"trajectory.atif.json": json.dumps(document).encode()})
    assert loaded.source == "atif" and times is not None
    # The task at 10:00:00, the first reply at 10:00:07, the second a minute later.
    assert [s.seconds for s in times.steps] == [7.0, 60.0] and times.total == 67.0
    assistants = [t.index for t in loaded.turns if t.role == "assistant"]
    assert [times.by_turn[i].step for i in assistants] == [1, 2]
    del document["steps"][0]["timestamp"]
    _, times = times_of({"trajectory.atif.json": json.dumps(document).encode()})
    assert times is not None and [s.seconds for s in times.steps] == [None, 60.0]


def test_no_times_or_steps_that_do_not_match_give_no_timing():
    messages = [{"role": "assistant", "content": "```bash\nls\n```"}]
    data = json.dumps({"info": {}, "messages": messages}).encode()
    assert times_of({"trajectory.traj.json": data})[1] is None
    sample = {
        "messages": [{"role": "assistant", "content": "a"}],
        "events": [
            {"event": "model", "timestamp": "2025-05-01T10:00:01Z", "working_time": 1},
            {"event": "model", "timestamp": "2025-05-01T10:00:03Z", "working_time": 1},
        ],
    }
    assert times_of({"trajectory.inspect.json": json.dumps(sample).encode()})[1] is None


def test_our_agents_events_time_each_tool_call():
    events = [
        {"event": "agent_start", "t": 0.0},
        {"event": "tool_start", "t": 0.5, "step": 1, "tool": "bash", "arguments": "ls"},
        {"event": "tool_finish", "t": 2.0, "step": 1, "tool": "bash", "output": "x"},
        {"event": "tool_start", "t": 2.1, "step": 2, "tool": "bash", "arguments": "pytest"},
        {"event": "agent_finish", "t": 9.0, "stop": "killed"},
    ]
    data = "\n".join(json.dumps(e) for e in events).encode()
    _, times = times_of({"events.jsonl": data})
    assert [s.seconds for s in times.steps] == [1.5, None]
    assert (times.total, times.timed) == (1.5, 1)


def test_the_page_shows_each_steps_duration_and_the_total(reader, artifacts_root):
    suite = make_suite("steps", tasks=1)
    attempt = make_attempt(
        make_run(suite, make_model("mini")), Task.objects.get(suite=suite), "TESTS_FAILED"
    )
    write_artifact(attempt, "trajectory.traj.json", MINI_TRAJ.read_bytes())
    body, context = open_page(reader, attempt)
    times = context["step_times"]
    assert body.count('class="step-time') == len(times.steps)
    assert f"{len(times.steps)} steps in {step_times.duration_text(times.total)}" in body
    first = times.steps[0]
    assert f'step 1 · <span class="secs">{step_times.duration_text(first.seconds)}</span>' in body
    assert f'step {len(times.steps)} · <span class="secs">—</span>' in body


@pytest.mark.slow
def test_our_llm_agent_run_for_real_is_timed_per_model_call(tmp_path, reader, artifacts_root):
    from tests.support.transcript_fixtures import run_llm_agent

    suite = make_suite("llm-steps", tasks=1)
    attempt = make_attempt(make_run(suite, make_model("llm")), Task.objects.get(suite=suite), None)
    attempt.artifacts_dir = f"t/{attempt.public_id}"
    attempt.save()
    run_llm_agent(tmp_path, artifacts_root / attempt.artifacts_dir)
    body, context = open_page(reader, attempt)
    times = context["step_times"]
    assert len(times.steps) == 2 and times.timed == 2  # two model calls, both with their tool
    events = [
        json.loads(line)
        for line in (artifacts_root / attempt.artifacts_dir / "events.jsonl")
        .read_text()
        .splitlines()
    ]
    requests = [e["t"] for e in events if e["event"] == "llm_request"]
    finishes = [e["t"] for e in events if e["event"] == "tool_finish"]
    assert times.steps[0].start == requests[0] and times.steps[0].end == finishes[0]
    assert times.steps[1].start == requests[1] and times.steps[1].end == finishes[1]
    assert body.count('class="step-time') == 2


def test_the_missing_attempt_of_a_run_still_steps(client, run_list):
    missing = make_attempt(
        run_list, Task.objects.for_suite(run_list.suite).first(), None, missing=True, sample=1
    )
    assert missing.status == AttemptStatus.MISSING
    _, context = open_page(client, missing)
    assert context["nav"].total == 9
