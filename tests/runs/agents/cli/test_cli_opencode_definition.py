"""OpenCode's definition, how its end is read and its own usage report, without running it:
what it is told (the configuration it gets), its usage listing on an unknown flag, its
``--format json`` events (as 1.18.33 printed them against the scripted upstream, trimmed)."""

from __future__ import annotations

import json

from runs.agents.cli.definition import get_definition, render
from runs.agents.cli.outcome import CliRun, GatewayView, classify, read_summary

VALUES = {
    "install": "/mnt/agentbench/agents/opencode",
    "model": "gpt-4o",
    "max_turns": 7,
    "base_url": "http://127.0.0.1:4000/v1",
    "token": "ab-gw-TOKEN",
    "prompt_file": "/tmp/agentbench-prompt.txt",
}


def test_opencode_is_pinned_and_told_the_gateway_alone():
    definition = get_definition("opencode")
    spec = definition.spec
    assert (spec.install.package, spec.install.version) == ("opencode-linux-x64", "1.18.33")
    assert spec.install.integrity.startswith("sha512-") and spec.runtime is None  # Bun inside
    assert (spec.wire_api, spec.runs_in, spec.summary) == (
        "openai-chat",
        "sandbox",
        "opencode-json",
    )
    argv = [render(t, VALUES) for t in spec.command]
    assert argv[:3] == [
        "/mnt/agentbench/agents/opencode/package/bin/opencode",
        "run",
        "--format=json",
    ]
    assert "--model=agentbench/gpt-4o" in argv
    env = {k: render(v, VALUES) for k, v in spec.env.items()}
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["agentbench"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"  # chat completions, bundled
    assert provider["options"] == {"baseURL": VALUES["base_url"], "apiKey": "ab-gw-TOKEN"}
    assert list(provider["models"]) == ["gpt-4o"]
    assert config["enabled_providers"] == ["agentbench"]
    # Its side calls (the session's title) use the configuration's model: the gateway refuses
    # any other.
    assert config["model"] == config["small_model"] == "agentbench/gpt-4o"
    assert config["permission"] == "allow"  # `opencode run` cannot answer a prompt
    assert config["agent"]["build"]["steps"] == 7  # the configuration's max_steps
    assert (config["share"], config["autoupdate"], config["snapshot"]) == ("disabled", False, False)
    for switch in (
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
    ):
        assert env[switch] == "1"
    assert env["npm_config_offline"] == "true"
    assert {".config/opencode", ".local/share/opencode"} <= set(spec.writable)


# What `opencode run --format=json --agentbench-no-such-flag=1` printed (exit 1, stdout empty):
# its usage and nothing else, no word of the flag (trimmed).
USAGE = """opencode run [message..]

run opencode with a message

Positionals:
  message  message to send                                                     [array] [default: []]

Options:
  -h, --help         show help                                                             [boolean]
  -v, --version      show version number                                                   [boolean]
      --format       format: default (formatted) or json (raw JSON events)
      --auto         auto-approve permissions that are not explicitly denied (dangerous!)
                                                                          [boolean] [default: false]
"""


def run_(exit_code: int, *, stdout: str = "", stderr: str = "") -> CliRun:
    return CliRun(exit_code, None, False, False, 1.0, stdout, stderr)


def test_its_usage_printed_alone_is_a_usage_error_that_stops_the_configuration():
    verdict = classify("OpenCode", run_(1, stderr=USAGE), GatewayView(), time_limit=60)
    assert (verdict.stop, verdict.error_kind, verdict.is_empty_run) == (
        "cli_usage",
        "permanent",
        True,
    )
    assert verdict.error_text == (
        "[cli-usage] OpenCode exited 1 before any model call, printing its usage and nothing "
        "else (its answer to an argument it does not know)"
    )
    # Not when it said something else too (an error event on stdout), nor on exit 0.
    event = json.dumps({"type": "error", "error": {"name": "UnknownError"}})
    verdict = classify(
        "OpenCode", run_(1, stdout=event, stderr=USAGE), GatewayView(), time_limit=60
    )
    assert (verdict.stop, verdict.error_kind) == ("empty_run", "transient")
    assert (
        classify("OpenCode", run_(0, stderr=USAGE), GatewayView(), time_limit=60).stop
        != "cli_usage"
    )


def _event(kind: str, **part: object) -> str:
    return json.dumps({"type": kind, "timestamp": 1, "sessionID": "ses_1", "part": part})


def test_it_reads_opencodes_json_events():
    def finish(reason: str) -> str:
        tokens = {"total": 1280, "input": 1200, "output": 80, "reasoning": 0}
        tokens["cache"] = {"write": 0, "read": 0}
        return _event("step_finish", type="step-finish", reason=reason, tokens=tokens, cost=0.01)

    lines = [
        _event("step_start", type="step-start"),
        _event("tool_use", type="tool", tool="read", state={"status": "completed"}),
        finish("tool-calls"),
        _event("step_start", type="step-start"),
        _event("text", type="text", text="The fix is applied and the tests pass."),
        finish("stop"),
    ]
    summary = read_summary("opencode-json", "\n".join(lines))
    assert summary.to_dict() == {
        "input_tokens": 2400,
        "output_tokens": 160,
        "turns": 2,
        "cost_usd": 0.02,
        "is_error": False,
        "text": "The fix is applied and the tests pass.",
    }
    # A 401: its one error event, the upstream's words.
    error = {"name": "APIError", "data": {"message": "Incorrect API key provided (401)"}}
    failed = json.dumps({"type": "error", "timestamp": 1, "sessionID": "ses_1", "error": error})
    assert read_summary("opencode-json", failed).to_dict() == {
        "input_tokens": 0,
        "output_tokens": 0,
        "turns": 0,
        "cost_usd": 0.0,
        "is_error": True,
        "text": "Incorrect API key provided (401)",
    }
    assert read_summary("opencode-json", "").to_dict() == {}
    assert read_summary("opencode-json", USAGE).to_dict() == {}
