"""The transcript viewer: every trajectory format read into one shape, shown on the attempt page.

Real files where they exist here (a mini-swe-agent run from /work/shared, our own LLM agent
against the local OpenAI-compatible server); SWE-agent and Inspect samples are written in their
published shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from runs import transcript
from tasks_app.models import Task
from tests.conftest import REPO_ROOT
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
    write_artifact,
)

# Real trajectories (public data, see its README) copied from /work/shared/swebench.
MINI_RUN = REPO_ROOT / "examples/swebench/mini_swe_agent_run/trajs"
MINI_TRAJ = MINI_RUN / "astropy__astropy-13398/astropy__astropy-13398.traj.json"
SCRIPT = "<script>window.__xss=1</script>"

SWE_AGENT_TRAJ = {
    "environment": "swe_main",
    "trajectory": [
        {"action": "ls", "observation": "setup.py\nsrc", "thought": "Look around.", "response": "x"}
    ],
    "history": [
        {"role": "system", "content": "You are SWE-agent.", "agent": "main"},
        {"role": "user", "content": [{"type": "text", "text": "Fix the bug in mean()."}]},
        {
            "role": "assistant",
            "content": "Look around.\n\n```\nls\n```",
            "thought": "Look around.",
            "action": "ls\n",
        },
        {"role": "user", "content": "setup.py\nsrc"},
        {
            "role": "assistant",
            "content": "Done.\n\n```\nsubmit\n```",
            "thought": "Done.",
            "action": "submit",
        },
        {"role": "user", "content": "diff --git a/src/m.py b/src/m.py"},
    ],
    "info": {
        "submission": "diff --git a/src/m.py b/src/m.py\n",
        "exit_status": "submitted",
        "model_stats": {
            "instance_cost": 0.25,
            "tokens_sent": 5000,
            "tokens_received": 300,
            "api_calls": 2,
        },
    },
}

SWE_AGENT_FUNCTION_CALLING = {
    "history": [
        {"role": "system", "content": "sys"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "cat setup.py"}'},
                }
            ],
        },
        {
            "role": "tool",
            "content": [{"type": "text", "text": "from setuptools import setup"}],
            "tool_call_ids": ["call_1"],
        },
    ],
    "info": {"submission": "", "exit_status": "exit_cost", "model_stats": {"api_calls": 1}},
}

INSPECT_SAMPLE = {
    "id": "toy-1",
    "epoch": 1,
    "input": "Fix mean()",
    "messages": [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "user", "content": "Fix mean() in calc.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "reasoning": "The division is integer division."},
                {"type": "text", "text": "I will read the file."},
            ],
            "tool_calls": [
                {"id": "t1", "function": "bash", "arguments": {"cmd": "cat calc.py"}},
                {"id": "t2", "function": "python", "arguments": {"code": "1/0"}},
            ],
            "model": "openai/gpt-4o-mini",
        },
        {"role": "tool", "tool_call_id": "t1", "function": "bash", "content": "def mean(v): ..."},
        {
            "role": "tool",
            "tool_call_id": "t2",
            "function": "python",
            "content": "",
            "error": {"type": "unknown", "message": "ZeroDivisionError: division by zero"},
        },
        {"role": "assistant", "content": "Done: " + SCRIPT},
    ],
    "output": {"model": "openai/gpt-4o-mini", "usage": {"input_tokens": 900, "output_tokens": 80}},
    "scores": {"swe_bench_scorer": {"value": "C", "explanation": "tests pass"}},
    "events": [
        {"event": "model", "output": {"usage": {"input_tokens": 400, "output_tokens": 50}}},
        {"event": "model", "output": {"usage": {"input_tokens": 500, "output_tokens": 30}}},
    ],
    "model_usage": {"openai/gpt-4o-mini": {"input_tokens": 900, "output_tokens": 80}},
}


def from_files(files: dict[str, bytes]) -> transcript.Transcript | None:
    return transcript.load(files.get)


# --- reading, no Django ----------------------------------------------------------------------


def test_it_reads_a_real_mini_swe_agent_trajectory_with_commands_outputs_and_tokens():
    raw = json.loads(MINI_TRAJ.read_text())
    t = from_files({"trajectory.traj.json": MINI_TRAJ.read_bytes()})
    assert t.source == "mini-swe-agent" and t.error == ""
    assert t.submission == raw["info"]["submission"]
    assert t.exit_status == "Submitted"
    assert t.api_calls == 36 and t.cost_usd == pytest.approx(0.7239796)
    assert [turn.role for turn in t.turns[:3]] == ["system", "user", "assistant"]
    first = t.turns[2]
    assert first.tool_calls[0].name == "bash"
    assert first.tool_calls[0].arguments.text == "ls -R astropy/coordinates"
    assert "```bash" not in first.text.text and first.text.text.startswith("THOUGHT:")
    # The command's output is the call's result, not a turn of its own.
    assert first.tool_calls[0].result.text.startswith("<returncode>0</returncode>")
    assert first.tokens_in == 2704 and first.tokens_out == 314
    assert first.reasoning and "Contemplating Coordinate Conversions" in first.reasoning.text
    usage = [m["extra"]["response"]["usage"] for m in raw["messages"] if "extra" in m]
    assert t.tokens_in == sum(u["prompt_tokens"] for u in usage)
    # Replies with two bash blocks were refused by mini-swe-agent; the refusal stays a turn.
    refusals = [x for x in t.turns if x.role == "user" and "EXACTLY ONE action" in x.text.text]
    assert len(refusals) == 2
    assert t.tool_call_count + len(refusals) == t.api_calls


def test_every_trajectory_of_the_real_run_reads_without_error():
    files = sorted(MINI_RUN.glob("*/*.traj.json"))
    assert files
    for path in files:
        t = from_files({"trajectory.traj.json": path.read_bytes()})
        assert t.error == "", path.name
        assert t.tool_call_count >= 10, path.name
        assert t.submission.startswith("diff --git"), path.name


def test_it_reads_swe_agent_histories_with_and_without_function_calling():
    t = from_files({"trajectory.traj": json.dumps(SWE_AGENT_TRAJ).encode()})
    assert t.source == "swe-agent"
    assert [turn.role for turn in t.turns] == ["system", "user", "assistant", "assistant"]
    assert t.turns[1].text.text == "Fix the bug in mean()."
    call = t.turns[2].tool_calls[0]
    assert (call.arguments.text, call.result.text) == ("ls", "setup.py\nsrc")
    assert t.turns[2].text.text == "Look around."
    assert (t.tokens_in, t.tokens_out, t.cost_usd, t.api_calls) == (5000, 300, 0.25, 2)
    assert t.exit_status == "submitted" and t.submission.startswith("diff --git")

    t = from_files({"trajectory.traj": json.dumps(SWE_AGENT_FUNCTION_CALLING).encode()})
    call = t.turns[1].tool_calls[0]
    assert (call.name, call.arguments.text) == ("bash", "cat setup.py")
    assert call.result.text == "from setuptools import setup"
    assert len(t.turns) == 2

    steps_only = {"trajectory": SWE_AGENT_TRAJ["trajectory"], "info": {}}
    t = from_files({"trajectory.traj": json.dumps(steps_only).encode()})
    assert t.turns[0].tool_calls[0].result.text == "setup.py\nsrc"


def test_it_reads_swe_agent_1_observations_as_tool_messages_and_a_short_history_from_steps():
    # SWE-agent 1.x without function calling: the observation is a "tool" message.
    history = [dict(m) for m in SWE_AGENT_TRAJ["history"]]
    history[3] = {"role": "tool", "content": "setup.py\nsrc", "message_type": "observation"}
    t = from_files({"trajectory.traj": json.dumps({**SWE_AGENT_TRAJ, "history": history}).encode()})
    assert [turn.role for turn in t.turns] == ["system", "user", "assistant", "assistant"]
    assert t.turns[2].tool_calls[0].result.text == "setup.py\nsrc"

    # A history that stops before the steps do: the steps are shown, after its prompts.
    steps = [
        {"action": "ls", "observation": "src", "thought": "Look."},
        {"action": "cat src/m.py", "observation": "def mean(v): ...", "thought": "Read."},
    ]
    short = {"trajectory": steps, "history": SWE_AGENT_TRAJ["history"][:3], "info": {}}
    t = from_files({"trajectory.traj": json.dumps(short).encode()})
    assert [turn.role for turn in t.turns] == ["system", "user", "assistant", "assistant"]
    assert [turn.tool_calls[0].result.text for turn in t.turns[2:]] == ["src", "def mean(v): ..."]
    assert t.notes == ["The history holds 1 of the 2 actions; shown from the trajectory's steps."]


def test_it_reads_an_inspect_sample_with_tool_errors_reasoning_and_scores():
    t = from_files({"trajectory.inspect.json": json.dumps(INSPECT_SAMPLE).encode()})
    assert t.source == "inspect"
    assert [turn.role for turn in t.turns] == ["system", "user", "assistant", "assistant"]
    turn = t.turns[2]
    assert turn.text.text == "I will read the file."
    assert turn.reasoning.text == "The division is integer division."
    bash, python = turn.tool_calls
    assert bash.arguments.text == "cmd: cat calc.py" and bash.result.text == "def mean(v): ..."
    assert python.is_error and "ZeroDivisionError" in python.result.text
    assert (turn.tokens_in, turn.tokens_out) == (400, 50)
    assert (t.tokens_in, t.tokens_out) == (900, 80)
    assert t.scores == [("swe_bench_scorer", "C")]
    assert t.model == "openai/gpt-4o-mini"


def test_a_broken_trajectory_names_the_file_line_and_column():
    t = from_files({"trajectory.traj.json": b'{"messages": [\n  {"role": "user",}\n]}'})
    assert t.error.startswith("trajectory.traj.json: invalid JSON at line 2 column")
    t = from_files({"trajectory.inspect.json": b'{"id": 1}'})
    assert "messages" in t.error


def test_events_alone_become_tool_calls_with_results_and_patches():
    events = [
        {"event": "agent_start", "agent": "scripted"},
        {"event": "tests_start", "run": 1, "command": "pytest"},
        {"event": "tests_finish", "run": 1, "exit_code": 1, "output": "1 failed"},
        {"event": "tool_start", "step": 1, "tool": "read_file", "arguments": {"path": "a.py"}},
        {"event": "tool_finish", "step": 1, "tool": "read_file", "ok": True, "output": "x = 1"},
        {"event": "tool_start", "step": 2, "tool": "apply_patch", "arguments": {}},
        {
            "event": "tool_finish",
            "step": 2,
            "tool": "apply_patch",
            "ok": True,
            "output": "applied",
            "artifact": "diffs/step_0002.patch",
        },
        {"event": "agent_finish", "stop": "tests_passed"},
    ]
    files = {
        "events.jsonl": "\n".join(map(json.dumps, events)).encode() + b"\n{not json",
        "diffs/step_0002.patch": b"--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
    }
    t = from_files(files)
    assert t.source == "events" and t.exit_status == "tests_passed"
    calls = [c for turn in t.turns for c in turn.tool_calls]
    assert [(c.name, c.result.text) for c in calls] == [
        ("read_file", "x = 1"),
        ("apply_patch", "applied"),
    ]
    assert calls[1].patch.endswith("+x = 2\n") and calls[1].patch_file == "diffs/step_0002.patch"
    tests = [turn for turn in t.turns if turn.title == "tests_finish"]
    assert tests[0].is_error and "1 failed" in tests[0].text.text


def test_long_blocks_are_cut_and_folded():
    long = "line\n" * (transcript.MAX_BLOCK_CHARS // 5 + 100)
    b = transcript.block(long)
    assert len(b.text) == transcript.MAX_BLOCK_CHARS and b.cut == 500 and b.folded
    assert not transcript.block("short").folded


# --- our LLM agent, for real -----------------------------------------------------------------


@pytest.mark.slow
def test_our_llm_agents_conversation_reads_with_tokens_per_turn_and_the_applied_patch(tmp_path):
    from tests.support.transcript_fixtures import run_llm_agent

    artifacts = run_llm_agent(tmp_path)
    t = transcript.load(lambda rel: _read(artifacts, rel))
    assert t.source == "llm"
    roles = [turn.role for turn in t.turns]
    assert roles == ["system", "user", "assistant", "assistant", "event", "event"]
    read, patch = t.turns[2], t.turns[3]
    # The tests after the last patch and how the agent stopped, which no request carried.
    assert [t.turns[4].title, t.turns[5].title] == ["tests_finish", "agent_finish"]
    assert "exit_code=0" in t.turns[4].text.text and not t.turns[4].is_error
    assert "stop=tests_passed" in t.turns[5].text.text
    assert read.tool_calls[0].name == "read_file"
    assert "return total(values) // len(values)" in read.tool_calls[0].result.text
    assert (read.tokens_in, read.tokens_out, patch.tokens_in, patch.tokens_out) == (
        120,
        15,
        300,
        60,
    )
    call = patch.tool_calls[0]
    assert call.name == "apply_patch" and call.patch_file == "diffs/step_0002.patch"
    assert "+    return total(values) / len(values)" in call.patch
    assert t.exit_status == "tests_passed" and (t.tokens_in, t.tokens_out) == (420, 75)


def _read(root: Path, relative: str) -> bytes | None:
    path = root / relative
    return path.read_bytes() if path.is_file() else None


# --- the attempt page ------------------------------------------------------------------------


@pytest.fixture
def attempt(artifacts_root):
    suite = make_suite("tr", tasks=1)
    task = Task.objects.get(suite=suite)
    task.gold_patch = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    task.save()
    return make_attempt(make_run(suite, make_model("mini")), task, "TESTS_FAILED")


@pytest.fixture
def reader(client, bob):
    client.force_login(bob)
    return client


def page(client, attempt) -> str:
    response = client.get(reverse("attempt-detail", args=[attempt.public_id]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
def test_the_attempt_page_shows_a_mini_swe_agent_transcript(reader, attempt):
    write_artifact(attempt, "trajectory.traj.json", MINI_TRAJ.read_bytes())
    body = page(reader, attempt)
    assert 'id="transcript-search"' in body
    assert body.count('class="turn ') == 40
    assert "ls -R astropy/coordinates" in body
    assert "2704 in · 314 out" in body
    assert "mini-swe-agent trajectory" in body and "exit status <code>Submitted</code>" in body
    assert "show all (" in body  # long outputs are folded
    assert "js/transcript.js" in body


@pytest.mark.django_db
def test_the_transcript_escapes_model_and_tool_output(reader, attempt):
    sample = json.loads(json.dumps(INSPECT_SAMPLE))
    sample["messages"][3]["content"] = SCRIPT
    sample["messages"][2]["tool_calls"][0]["function"] = SCRIPT
    write_artifact(attempt, "trajectory.inspect.json", json.dumps(sample).encode())
    write_artifact(attempt, "events.jsonl", json.dumps({"event": "x", "output": SCRIPT}).encode())
    body = page(reader, attempt)
    assert SCRIPT not in body
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body
    assert "Inspect AI sample" in body and "swe_bench_scorer = <code>C</code>" in body


@pytest.mark.django_db
def test_a_broken_trajectory_still_opens_the_page_and_names_the_problem(reader, attempt):
    write_artifact(attempt, "trajectory.traj", b"{ not json")
    body = page(reader, attempt)
    assert "trajectory.traj: invalid JSON at line 1 column 3" in body


@pytest.mark.django_db
def test_anonymous_visitors_see_no_transcript(client, attempt, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    write_artifact(attempt, "trajectory.traj.json", MINI_TRAJ.read_bytes())
    body = page(client, attempt)
    assert "ls -R astropy/coordinates" not in body and 'id="login-prompt"' in body


@pytest.mark.django_db
def test_two_attempts_side_by_side_compare_transcripts_and_logs(reader, attempt):
    from tests.support.pages_fixtures import add_stage

    other = make_attempt(
        make_run(attempt.suite, make_model("inspect")), attempt.task, None, final_patch="x"
    )
    write_artifact(attempt, "trajectory.traj.json", MINI_TRAJ.read_bytes())
    write_artifact(other, "trajectory.inspect.json", json.dumps(INSPECT_SAMPLE).encode())
    write_artifact(attempt, "logs/final_test.txt", b"FAILED test_mean " + SCRIPT.encode())
    add_stage(attempt, "final_test", "logs/final_test.txt", exit_code=1)
    write_artifact(other, "logs/final_test.txt", b"1 passed")
    add_stage(other, "final_test", "logs/final_test.txt", exit_code=0)
    write_artifact(other, "logs/setup.txt", b"pip install ok")
    add_stage(other, "setup", "logs/setup.txt", exit_code=0)
    response = reader.get(reverse("attempt-vs", args=[attempt.public_id, other.public_id]))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="vs-transcripts"' in body
    assert "mini-swe-agent trajectory" in body and "Inspect AI sample" in body
    assert body.count('class="transcript compact"') == 2
    assert "ls -R astropy/coordinates" in body and "cat calc.py" in body
    # Stages in pipeline order, both logs of a stage side by side, one side "not run".
    assert body.index("Setup commands") < body.index("Tests after the agent")
    assert "FAILED test_mean" in body and "1 passed" in body and "exit 1 vs 0" in body
    assert "exit not run vs 0" in body
    assert SCRIPT not in body
    assert 'id="transcript-search"' not in body and "js/transcript.js" in body
