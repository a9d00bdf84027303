"""A whole attempt of a real CLI (each in ``CLIS``, in the sandbox, on both backends) whose
upstream echoes the key it got in a header and in every answer's body, and whose agent prints
every process's environment and the files of the CLI's HOME from inside the sandbox into its
next request: the key is in none of it (the token is), and afterwards the key and the token are
in no artifact file of the attempt, no API answer and no export.

The upstream is the scripted one of the CLI end-to-end tests (tests/support/fake_provider_plans.py),
made to echo; the CLI, the sandbox, the gateway and the pipeline are real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from runs.agents.cli import definition as definitions
from runs.models import AttemptStatus
from runs.pipeline.adhoc import attempt_create_adhoc
from runs.pipeline.execute import attempt_execute
from tests.support.fake_provider import Reply, Request
from tests.support.fake_provider_plans import (
    REAL_KEY,
    UPSTREAM_KEY_ENV,
    WIRE_PATH,
    Step,
    cli_model_config,
    plan_provider,
)
from tests.support.pipeline_fixtures import attempt_folder, get_task, import_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]

TOKEN = re.compile(rb"abgw-[A-Za-z0-9_-]{43}")
CLIS = [
    "claude-code",
    "qwen-code",
    "gemini-cli",
    "opencode",
]
# Inside the sandbox, as the agent: every process's environment (the CLI's, its runtime's, the
# shell's) and every file under the CLI's HOME (its settings, session and state files), searched
# for the key. The command spells the key in two quoted halves: the gateway would redact it
# whole on its way to the CLI. A probe file holding it shows the search would find it.
SNOOP = (
    f"k='{REAL_KEY[:8]}''{REAL_KEY[8:]}'; echo \"$k\" > /tmp/ab-probe; "
    "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; echo; done > /tmp/ab-env; "
    # Counts labelled by sed: Gemini CLI refuses a command with $(...) in it.
    "ls -d /proc/[0-9]* | wc -l | sed s/^/PROCESSES=/; "
    "find ~ -type f | wc -l | sed s/^/HOME_FILES=/; "
    'grep -cF "$k" /tmp/ab-probe | sed s/^/KEY_PROBE=/; '
    'grep -cF "$k" /tmp/ab-env | sed s/^/KEY_IN_ENV=/; '
    'grep -rlF "$k" ~ | wc -l | sed s/^/KEY_IN_HOME=/; '
    "grep -c abgw- /tmp/ab-env | sed s/^/TOKEN_IN_ENV=/; "
    "grep -h abgw- /tmp/ab-env | sort -u"
)


def echo_credential(request: Request, reply: Reply) -> Reply:
    """Answer as the plan does, plus the credential received in an ``x-echo`` header and in an
    ``echo`` field of every JSON answer and streamed event (a hostile provider)."""
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
    key = request.headers.get("x-api-key") or request.headers.get("x-goog-api-key") or bearer
    reply.headers = {**reply.headers, "x-echo": key}
    if reply.events is None:
        doc = json.loads(reply.body)
        if isinstance(doc, dict):
            reply.body = json.dumps({**doc, "echo": key}).encode()
        return reply
    echoed = []
    for event in reply.events:
        head, _, data = event.decode().rstrip("\n").rpartition("data: ")
        if data != "[DONE]":
            data = json.dumps({**json.loads(data), "echo": key})
        echoed.append(f"{head}data: {data}\n\n".encode())
    reply.events = echoed
    return reply


def assert_the_snoop_found_no_key_and_nothing_kept_it(upstream, attempt) -> Path:
    """What SNOOP printed reached the upstream: the key in no process's environment and no
    file of the CLI's HOME, the token there; and no stored file of the attempt holds either.
    Returns the attempt's folder."""
    sent = json.dumps([r.json for r in upstream.requests]).encode()
    assert TOKEN.search(sent), "the agent's environments did not reach the upstream"
    found = dict(re.findall(rb"([A-Z_]+)=(\d+)", sent))
    assert found[b"KEY_PROBE"] == b"1" and int(found[b"PROCESSES"]) >= 2, found
    assert int(found[b"HOME_FILES"]) >= 1, found
    assert (found[b"KEY_IN_ENV"], found[b"KEY_IN_HOME"]) == (b"0", b"0"), found
    assert int(found[b"TOKEN_IN_ENV"]) >= 1, found
    assert REAL_KEY.encode() not in sent
    folder = attempt_folder(attempt)
    files = [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == "model_calls.jsonl" for p in files)
    leaks = [
        (str(p.relative_to(folder)), what)
        for p in files
        for what, found in (
            ("key", REAL_KEY.encode() in p.read_bytes()),
            ("token", TOKEN.search(p.read_bytes()) is not None),
        )
        if found
    ]
    assert leaks == []
    return folder


@pytest.mark.parametrize("cli", CLIS)
def test_no_artifact_api_answer_or_export_holds_the_key_or_the_token(
    cli, backend, artifacts_root, monkeypatch, client, bob
):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    import_tasks()
    task = get_task("toy_fail_pytest")
    plan = [
        Step.bash(SNOOP),  # what the sandbox holds, into the next call
        Step.read("/workspace/repo/src/toy/calc.py"),
        Step.finish(f"done; my key is {REAL_KEY}"),  # an answer text holding the key
    ]
    with plan_provider(plan, decorate=echo_credential) as upstream:
        config = cli_model_config(cli, upstream)
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend=backend
        )
    assert attempt.status == AttemptStatus.FINISHED, attempt.error_text
    # The upstream did echo the key, and the CLI's requests did carry the token it printed.
    assert len(upstream.requests_to(WIRE_PATH[cli])) >= 3
    folder = assert_the_snoop_found_no_key_and_nothing_kept_it(upstream, attempt)
    assert b"[redacted]" in (folder / "model_calls.jsonl").read_bytes()
    client.force_login(bob)
    answers = [
        client.get(f"/api/attempts/{attempt.public_id}"),
        client.get(f"/api/attempts/{attempt.public_id}/transcript"),
        client.get(f"/api/attempts/{attempt.public_id}/artifacts/model_calls.jsonl"),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer
        body = b"".join(answer.streaming_content) if answer.streaming else answer.content
        assert REAL_KEY.encode() not in body and not TOKEN.search(body)


def test_aider_holds_no_key_in_the_sandbox_and_leaves_no_token(
    backend, artifacts_root, monkeypatch, tmp_path, client, bob
):
    """aider runs no shell command its model asks for (it asks first, even with --yes-always),
    so the snoop is its test command instead: after its edit it runs it inside the sandbox as
    its child, and sends what it printed (failing) back to the model in its next request."""
    from tests.runs.agents.cli.test_cli_agent_failures import definitions_with

    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    import_tasks()
    task = get_task("toy_fail_pytest")
    shipped = yaml.safe_load((definitions.DEFINITIONS_DIR / "aider.yaml").read_text())
    command = [t for t in shipped["command"] if t != "--no-auto-test"]
    snoop = SNOOP.replace("{", "{{").replace("}", "}}")  # a template: its braces doubled
    command += ["--auto-test", f"--test-cmd={snoop}; exit 1"]
    name = definitions_with(tmp_path, monkeypatch, "aider-snoop", "aider", command=command)
    plan = [
        Step.edit(
            "/workspace/repo/src/toy/calc.py",
            "    return total(values) // len(values)",
            "    return total(values) / len(values)",
        ),
        Step.finish(f"done; my key is {REAL_KEY}"),  # an answer text holding the key
    ]
    with plan_provider(plan, decorate=echo_credential) as upstream:
        config = cli_model_config("aider", upstream, name=name, cli_agent=name)
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend=backend
        )
    assert attempt.status == AttemptStatus.FINISHED, attempt.error_text
    # The edit; then the test command's output (every environment, HOME's files).
    assert len(upstream.requests_to(WIRE_PATH["aider"])) == 2, attempt.error_text
    # (aider's HOME files: its model list, its histories)
    assert_the_snoop_found_no_key_and_nothing_kept_it(upstream, attempt)
    client.force_login(bob)
    for url in (
        f"/api/attempts/{attempt.public_id}",
        f"/api/attempts/{attempt.public_id}/transcript",
    ):
        answer = client.get(url)
        assert answer.status_code == 200, answer
        assert REAL_KEY.encode() not in answer.content and not TOKEN.search(answer.content)
