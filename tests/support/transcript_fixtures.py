"""Our own LLM agent run for real (the toy task in a sandbox, the real ``openai`` client against
the local chat-completions server), leaving the artifacts the transcript viewer reads."""

from __future__ import annotations

import uuid
from pathlib import Path

from runs.agents.registry import build_agent
from sandbox import open_sandbox
from sandbox.base import SandboxConfig
from tests.support.agent_fixtures import LABELS, TOY_SOLUTION, agent_context, toy_workspace
from tests.support.fake_provider import FakeProvider, tool_call


def run_llm_agent(tmp_path: Path, artifacts: Path | None = None) -> Path:
    """Read calc.py, then apply the fix: two model calls, the second one's patch solves it.

    Returns the artifact folder (``llm_messages.jsonl``, ``events.jsonl``, ``diffs/``...)."""
    artifacts = artifacts or tmp_path / "artifacts"
    work = tmp_path / "work"
    work.mkdir()
    config = SandboxConfig(
        name=f"ab-transcript-{uuid.uuid4().hex[:12]}", workspace=toy_workspace(work), labels=LABELS
    )
    replies = [
        tool_call("read_file", {"path": "src/toy/calc.py"}, usage=(120, 15)),
        tool_call("apply_patch", {"unified_diff": TOY_SOLUTION}, usage=(300, 60)),
    ]
    with open_sandbox(config, "auto") as sandbox, FakeProvider(replies) as server:
        ctx = agent_context(
            sandbox,
            artifacts,
            variant="llm",
            base_url=server.url("/v1"),
            model_name="fake-model",
            api_key="sk-test",
        )
        outcome = build_agent(ctx.model).run(ctx)
    assert outcome.reason is None, outcome.error_text
    return artifacts
