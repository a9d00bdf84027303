"""A Gemini CLI run's transcript, rebuilt from the ``model_calls.jsonl`` the real gateway wrote
for Gemini API calls (runs/transcript/wire_gemini.py): the system instruction, the task, each
model turn once with its thought summary, its function calls and the function responses the
CLI sent back, tokens per call; streamed (SSE or Google's JSON array) or whole alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runs import transcript
from runs.gateway import open_gateway
from tests.support.fake_provider import FakeProvider
from tests.support.fake_provider_gemini import gemini, gemini_error
from tests.support.gateway_fixtures import config, raw_post

MODEL = "gemini-2.5-pro"
SYSTEM = "You are Gemini CLI, an interactive CLI agent."
TASK = "Fix mean() in src/toy/calc.py"
TEST = {"command": "python -m pytest -q", "description": "Run the tests"}
EDIT = {"file_path": "/work/src/toy/calc.py", "old_string": "//", "new_string": "/"}
FAILED, PASSED = "1 failed", "3 passed"
# Each turn the model takes: (thought, text, function call, usage). The test command runs
# twice with the same arguments: both calls are shown, each with its own output.
TURNS: list[tuple[str, str, tuple[str, dict] | None, tuple[int, int]]] = [
    ("The tests say what fails.", "Running the tests.", ("run_shell_command", TEST), (300, 20)),
    ("", "", ("replace", EDIT), (420, 30)),
    ("", "Once more.", ("run_shell_command", TEST), (520, 10)),
    ("", "Done: mean() divides with / now.", None, (600, 12)),
]
OUTPUTS = [FAILED, "Successfully modified file: /work/src/toy/calc.py", PASSED]


def run_conversation(tmp_path: Path, *, stream: bool, alt_sse: bool = True) -> Path:
    """Gemini CLI's requests (the whole conversation each time) through a real gateway."""
    replies = [
        gemini(
            text, function_call=call, thought=thought, usage=usage, stream=stream, alt_sse=alt_sse
        )
        for thought, text, call, usage in TURNS
    ]
    method = (
        "streamGenerateContent" + ("?alt=sse" if alt_sse else "") if stream else "generateContent"
    )
    path = f"/v1beta/models/{MODEL}:{method}"
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": TASK}]}]
    upstream = FakeProvider(replies)
    cfg = config(upstream, tmp_path, upstream_base_url=upstream.url(""), model_name=MODEL)
    with upstream, open_gateway(cfg) as gw:
        for index, (_, text, call, _) in enumerate(TURNS):
            body = {"systemInstruction": {"parts": [{"text": SYSTEM}]}, "contents": contents}
            status, _, _ = raw_post(gw.host_base_url, path, body, {"x-goog-api-key": gw.token})
            assert status == 200
            # What the CLI keeps of the answer and sends back (thoughts are not re-sent).
            parts: list[dict[str, Any]] = [{"text": text}] if text else []
            if call is not None:
                parts.append({"functionCall": {"name": call[0], "args": call[1]}})
            contents = [*contents, {"role": "model", "parts": parts}]
            if call is not None:
                answer = {"name": call[0], "response": {"output": OUTPUTS[index]}}
                contents.append({"role": "user", "parts": [{"functionResponse": answer}]})
    return tmp_path / "model_calls.jsonl"


def read(path: Path) -> transcript.Transcript:
    files = {"model_calls.jsonl": path.read_bytes()}
    result = transcript.load(files.get)
    assert result is not None
    return result


def shape(t: transcript.Transcript) -> list[tuple]:
    return [
        (
            turn.role,
            turn.text.text,
            turn.reasoning.text if turn.reasoning else "",
            [(c.name, c.input, c.result.text if c.result else None) for c in turn.tool_calls],
        )
        for turn in t.turns
    ]


@pytest.mark.parametrize(
    ("stream", "alt_sse"),
    [(False, True), (True, True), (True, False)],
    ids=["whole", "sse", "json-array"],
)
def test_a_gemini_run_reads_as_its_conversation_with_every_turn_once(
    tmp_path: Path, stream: bool, alt_sse: bool
) -> None:
    t = read(run_conversation(tmp_path, stream=stream, alt_sse=alt_sse))
    assert t.source == "model-calls" and t.error == "" and t.notes == []
    assert shape(t) == [
        ("system", SYSTEM, "", []),
        ("user", TASK, "", []),
        (
            "assistant",
            "Running the tests.",
            "The tests say what fails.",
            [("run_shell_command", TEST, FAILED)],
        ),
        ("assistant", "", "", [("replace", EDIT, OUTPUTS[1])]),
        ("assistant", "Once more.", "", [("run_shell_command", TEST, PASSED)]),
        ("assistant", "Done: mean() divides with / now.", "", []),
    ]
    replies = t.turns[2:]
    assert [(x.tokens_in, x.tokens_out) for x in replies] == [u for *_, u in TURNS]
    assert all(x.cost_usd and x.cost_usd > 0 for x in replies)
    assert t.model == MODEL and t.api_calls == 4 and t.tool_call_count == 3


def test_a_gemini_error_reads_as_an_error_turn_with_googles_status(tmp_path: Path) -> None:
    reply = gemini_error(400, "API key not valid. Please pass a valid API key.")
    with FakeProvider([reply]) as upstream:
        cfg = config(upstream, tmp_path, upstream_base_url=upstream.url(""), model_name=MODEL)
        with open_gateway(cfg) as gw:
            body = {"contents": [{"role": "user", "parts": [{"text": TASK}]}]}
            path = f"/v1beta/models/{MODEL}:generateContent"
            assert raw_post(gw.host_base_url, path, body, {"x-goog-api-key": gw.token})[0] == 400
    t = read(tmp_path / "model_calls.jsonl")
    error = t.turns[-1]
    assert error.is_error and error.title == "upstream error 400 (permanent)"
    assert "INVALID_ARGUMENT: API key not valid" in error.text.text
