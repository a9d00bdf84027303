"""A whole attempt of a real CLI (Claude Code, in the sandbox, on both backends) whose upstream
echoes the key it got in a header and in every answer's body, and whose agent prints its
environment (the token) into its next request: afterwards the key and the token are in no
artifact file of the attempt, no API answer and no export.

The upstream is the scripted one of the CLI end-to-end tests (tests/cli_upstream.py), made to
echo; the CLI, the sandbox, the gateway and the pipeline are real.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from runs.models import AttemptStatus
from runs.pipeline.adhoc import attempt_create_adhoc
from runs.pipeline.execute import attempt_execute
from tests.cli_upstream import (
    REAL_KEY,
    UPSTREAM_KEY_ENV,
    ScriptedUpstream,
    Step,
    _Handler,
    cli_model_config,
)
from tests.pipeline_fixtures import attempt_folder, get_task, import_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]

TOKEN = re.compile(rb"abgw-[A-Za-z0-9_-]{43}")


class EchoingUpstream(ScriptedUpstream):
    """Answers as the scripted upstream does, plus the credential it received in an
    ``x-echo`` header and in an ``echo`` field of every JSON answer and streamed event."""

    def __enter__(self) -> EchoingUpstream:
        from http.server import ThreadingHTTPServer
        from threading import Thread

        upstream = self

        class Handler(_Handler):
            owner = upstream

            def _credential(self) -> str:
                bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
                return self.headers.get("x-api-key") or bearer

            def end_headers(self) -> None:
                self.send_header("x-echo", self._credential())
                super().end_headers()

            def _json(self, status: int, obj: Any) -> None:
                if isinstance(obj, dict):
                    obj = {**obj, "echo": self._credential()}
                super()._json(status, obj)

            def _sse(self, events: list, *, done: bool = False) -> None:
                key = self._credential()
                super()._sse([(name, {**data, "echo": key}) for name, data in events], done=done)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        Thread(target=self._server.serve_forever, daemon=True).start()
        return self


def test_no_artifact_api_answer_or_export_holds_the_key_or_the_token(
    backend, artifacts_root, monkeypatch, client, bob
):
    monkeypatch.setenv(UPSTREAM_KEY_ENV, REAL_KEY)
    import_tasks()
    task = get_task("toy_fail_pytest")
    plan = [
        Step.bash("env; cat /proc/self/environ | tr '\\0' '\\n'"),  # the token, into the next call
        Step.read("/workspace/repo/src/toy/calc.py"),
        Step.finish(f"done; my key is {REAL_KEY}"),  # an answer text holding the key
    ]
    with EchoingUpstream(plan) as upstream:
        config = cli_model_config("claude-code", upstream)
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend=backend
        )
    assert attempt.status == AttemptStatus.FINISHED, attempt.error_text
    # The upstream did echo the key, and the CLI's requests did carry the token it printed.
    assert len(upstream.model_requests("/messages")) >= 3
    sent = json.dumps([r.body for r in upstream.requests]).encode()
    assert TOKEN.search(sent), "the agent's env output reached the upstream"
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
