"""Agent CLI definitions (YAML), the install cache, and what a CLI run's end means.

The installs are real: a tiny npm package fetched from the registry through ``npm pack`` and
checked against its pinned integrity, into a cache folder of the test's own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from runs.agents.cli.definition import (
    DefinitionError,
    load_definition,
    load_definitions,
)
from runs.agents.cli.install import InstallError, cached_install, ensure_install
from runs.agents.cli.outcome import CliRun, GatewayView, classify, read_summary
from runs.taxonomy import Reason
from tests.conftest import REPO_ROOT
from tests.support.ab_cli import ab_main

IS_NUMBER_INTEGRITY = (
    "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MR"
    "L43QKPDlK9cGvNp6NZWZUBlbGXYxxng=="
)


def write_definition(folder: Path, name: str, **changes: object) -> Path:
    raw: dict = {
        "name": name,
        "title": "Tiny",
        "wire_api": "openai-chat",
        "install": {
            "kind": "npm",
            "package": "is-number",
            "version": "7.0.0",
            "integrity": IS_NUMBER_INTEGRITY,
            "keep": ["package/index.js"],
        },
        "command": ["{install}/package/index.js", "--model={model}"],
        "env": {"OPENAI_BASE_URL": "{base_url}/v1", "OPENAI_API_KEY": "{token}"},
    }
    for dotted, value in changes.items():
        node = raw
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_shipped_definitions_load_and_are_pinned():
    definitions = load_definitions()
    assert set(definitions) >= {
        "claude-code",
        "codex",
        "mini-swe-agent",
        "qwen-code",
        "gemini-cli",
        "opencode",
    }
    assert definitions["qwen-code"].spec.runtime is not None  # Node, pinned beside it
    assert definitions["gemini-cli"].spec.home_files  # its settings file
    assert definitions["claude-code"].spec.install.package == "@anthropic-ai/claude-code-linux-x64"
    assert definitions["codex"].spec.install.version == "0.169.0-linux-x64"
    assert definitions["mini-swe-agent"].spec.runs_in == "worker"
    for definition in definitions.values():
        assert definition.spec.install.version[0].isdigit()
        assert definition.spec.install.version in definition.install_dir_name


@pytest.mark.django_db  # the added ones are listed too
def test_ab_agents_lists_every_definition_with_its_package():
    done = ab_main("agents")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for line in ("claude-code", "npm:@openai/codex==0.169.0-linux-x64", "pypi:mini-swe-agent"):
        assert line in out
    # Each with the context file it reads (mini-swe-agent reads none).
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}
    assert rows["claude-code"][3] == "CLAUDE.md" and rows["codex"][3] == "AGENTS.md"
    assert rows["mini-swe-agent"][3] == "-"


def test_a_bad_definition_names_the_file_and_each_field(tmp_path: Path):
    path = write_definition(
        tmp_path,
        "broken",
        wire_api="smoke-signals",
        install__version="^7.0.0",
        command=["{install}/bin/x", "--key={api_key}"],
        surprise=True,
    )
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    text = str(caught.value)
    assert f"{path}: wire_api:" in text
    assert f"{path}: install.version: Value error, must be an exact version" in text
    assert f"{path}: surprise: Extra inputs are not permitted" in text
    path = write_definition(tmp_path, "outside", context_file="../../etc/profile")
    with pytest.raises(DefinitionError, match=r"outside.yaml: context_file: .*in the repository"):
        load_definition(path)
    path = write_definition(tmp_path, "badtemplate", command=["{install}/x", "--key={api_key}"])
    with pytest.raises(DefinitionError, match=r"badtemplate.yaml: command.1: unknown placeholder"):
        load_definition(path)


def test_an_npm_install_needs_its_integrity_and_a_pypi_one_runs_on_the_worker(tmp_path: Path):
    path = write_definition(tmp_path, "nohash", install__integrity="")
    with pytest.raises(DefinitionError, match=r"install\.integrity: npm installs need the sha512"):
        load_definition(path)
    path = write_definition(
        tmp_path,
        "pyinside",
        install={"kind": "pypi", "package": "mini-swe-agent", "version": "2.4.6"},
    )
    with pytest.raises(DefinitionError, match="runs_in: a PyPI install runs on the worker"):
        load_definition(path)


def test_the_install_key_follows_the_install_section_only(tmp_path: Path):
    base = load_definition(write_definition(tmp_path, "tiny"))
    other_command = load_definition(write_definition(tmp_path, "tiny", command=["{install}/y"]))
    other_version = load_definition(write_definition(tmp_path, "tiny", install__version="7.0.1"))
    assert base.install_key == other_command.install_key
    assert base.install_key != other_version.install_key


def test_an_install_is_built_once_from_the_registry_and_found_in_the_cache(tmp_path: Path):
    definition = load_definition(write_definition(tmp_path, "tiny"))
    root = tmp_path / "agents"
    first = ensure_install(definition, root)
    assert first.built and first.path.name == definition.install_dir_name
    assert (first.path / "package" / "index.js").is_file()
    assert sorted(p.name for p in first.path.iterdir()) == ["manifest.json", "package"]
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["integrity"] == IS_NUMBER_INTEGRITY
    assert oct(first.path.stat().st_mode & 0o777) == "0o755"
    assert oct((first.path / "package" / "index.js").stat().st_mode & 0o777) == "0o644"
    again = ensure_install(definition, root)
    assert not again.built and again.path == first.path
    assert cached_install(definition, root) == first.path


def test_a_tarball_that_does_not_match_its_integrity_is_refused(tmp_path: Path):
    wrong = "sha512-" + "A" * 86 + "=="
    definition = load_definition(write_definition(tmp_path, "tiny", install__integrity=wrong))
    root = tmp_path / "agents"
    with pytest.raises(InstallError, match="does not match its pinned integrity"):
        ensure_install(definition, root)
    assert cached_install(definition, root) is None
    assert [p.name for p in root.iterdir()] == [f".lock-{definition.install_dir_name}"]


def run_(exit_code: int = 0, *, stderr: str = "", timed_out=False, oom=False) -> CliRun:
    return CliRun(exit_code, None, timed_out, oom, 2.0, "", stderr)


WORKED = GatewayView(calls=3, input_tokens=300, output_tokens=30)


@pytest.mark.parametrize(
    ("run", "gateway", "reason", "kind", "empty", "tag"),
    [
        (run_(137, timed_out=True), WORKED, Reason.TIMEOUT, None, False, "[timeout]"),
        (run_(137, oom=True), WORKED, Reason.SANDBOX_ERROR, None, False, "[oom]"),
        (
            run_(1),
            GatewayView(calls=1, permanent_error="401 invalid x-api-key"),
            Reason.LLM_ERROR,
            "permanent",
            False,
            "[llm-permanent]",
        ),
        (
            run_(1),
            GatewayView(calls=5, input_tokens=9, output_tokens=9, budget_exceeded="calls"),
            Reason.AGENT_GAVE_UP,
            None,
            False,
            "[budget:calls]",
        ),
        (
            run_(1),
            GatewayView(calls=2, transient_exhausted=True),
            Reason.LLM_ERROR,
            "transient",
            False,
            "[llm-transient]",
        ),
        (
            run_(2, stderr="error: unexpected argument '--bogus' found"),
            GatewayView(),
            Reason.LLM_ERROR,
            "permanent",
            True,
            "[cli-usage]",
        ),
        (
            run_(127, stderr="sh: 1: /mnt/x/claude: not found"),
            GatewayView(),
            Reason.LLM_ERROR,
            "permanent",
            True,
            "[cli-start]",
        ),
        (run_(0), GatewayView(), Reason.LLM_ERROR, "transient", True, "exited 0 before any"),
        (run_(1, stderr="max turns"), WORKED, Reason.AGENT_GAVE_UP, None, False, "[cli-exit]"),
        (run_(0), WORKED, None, None, False, ""),
    ],
)
def test_a_cli_runs_end_maps_to_one_reason(run, gateway, reason, kind, empty, tag):
    verdict = classify("Some CLI", run, gateway, time_limit=60)
    assert verdict.reason is reason
    assert verdict.error_kind == kind
    assert verdict.is_empty_run is empty
    assert tag in verdict.error_text
    assert verdict.is_timeout is (reason is Reason.TIMEOUT)


def test_a_kill_at_the_time_limit_wins_over_the_gateways_time_budget():
    """Two clocks: the gateway refuses calls past max_time_sec, the harness kills the CLI a
    grace later. Stopped by itself after the refusal: it gave up on the budget. Killed: ours."""
    told = GatewayView(calls=4, input_tokens=40, output_tokens=4, budget_exceeded="time")
    stopped = classify("Codex CLI", run_(1), told, time_limit=60, grace=15)
    assert (stopped.reason, stopped.is_timeout) == (Reason.AGENT_GAVE_UP, False)
    assert stopped.error_text.startswith("[budget:time] Codex CLI ran past the time budget")
    killed = classify("Codex CLI", run_(124, timed_out=True), told, time_limit=60, grace=15)
    assert (killed.reason, killed.is_timeout) == (Reason.TIMEOUT, True)
    assert killed.error_text == (
        "[timeout] Codex CLI killed by the harness at its time limit (60s and 15s of grace); "
        "the gateway had refused its model calls past its time budget"
    )
    busy = classify("Codex CLI", run_(124, timed_out=True), WORKED, time_limit=60, grace=15)
    assert busy.error_text.endswith("(60s and 15s of grace)")  # no call past the budget


def test_the_last_transient_errors_words_reach_the_attempts_error_text():
    from runs.agents.cli.agent import gateway_view
    from runs.gateway import GatewaySummary, UpstreamError

    said = "the upstream answered HTTP 529 to POST /v1/messages: overloaded_error: Overloaded"
    summary = GatewaySummary(
        calls=2, input_tokens=10, transient_exhausted=1, transient_error=UpstreamError(said, 529)
    )
    verdict = classify("Claude Code", run_(1), gateway_view(summary), time_limit=60)
    assert (verdict.reason, verdict.error_kind) == (Reason.LLM_ERROR, "transient")
    assert verdict.error_text == (
        "[llm-transient] Claude Code: upstream errors outlasted the gateway's retries: " + said
    )
    # No answer at all: no status, the gateway's words.
    gone = UpstreamError("POST /v1/messages: the upstream did not answer: TimeoutError", None)
    summary = GatewaySummary(calls=1, transient_exhausted=1, transient_error=gone)
    verdict = classify("Claude Code", run_(1), gateway_view(summary), time_limit=60)
    assert verdict.error_text.endswith("retries: " + gone.message)


def test_it_reads_each_clis_own_usage_report():
    claude = json.dumps(
        {
            "type": "result",
            "usage": {"input_tokens": 4800, "output_tokens": 320},
            "num_turns": 4,
            "total_cost_usd": 0.0192,
            "is_error": False,
            "result": "done",
        }
    )
    assert read_summary("claude-json", "noise\n" + claude).to_dict() == {
        "input_tokens": 4800,
        "output_tokens": 320,
        "turns": 4,
        "cost_usd": 0.0192,
        "is_error": False,
        "text": "done",
    }
    codex = "\n".join(
        json.dumps(e)
        for e in [
            {"type": "turn.started"},
            {"type": "item.completed", "item": {"type": "agent_message", "text": "fixed"}},
            {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}},
        ]
    )
    summary = read_summary("codex-jsonl", codex)
    assert (summary.input_tokens, summary.output_tokens, summary.turns) == (10, 2, 1)
    assert summary.text == "fixed"
    trajectory = {"info": {"exit_status": "Submitted", "model_stats": {"api_calls": 4}}}
    summary = read_summary("mini-swe-agent", json.dumps(trajectory))
    assert (summary.turns, summary.is_error) == (4, False)
    assert read_summary("claude-json", "not json").to_dict() == {}


def test_a_usage_or_start_error_names_the_line_that_says_why():
    """A JavaScript CLI prints its whole help after "Unknown arguments" (Qwen Code), and Node
    says "Cannot find module" (exit 1) when the CLI's script is missing: the error text
    carries the line that says why, not the help's last line."""
    usage = "Unknown arguments: bogus-flag\nUsage: qwen [options]\n  -h, --help  Show help"
    verdict = classify("Qwen Code", run_(1, stderr=usage), GatewayView(), time_limit=60)
    assert (verdict.error_kind, verdict.is_empty_run) == ("permanent", True)
    assert verdict.error_text == (
        "[cli-usage] Qwen Code exited 1 before any model call: Unknown arguments: bogus-flag"
    )
    missing = "node:internal/modules/cjs/loader:1568\n  throw err;\n\nError: Cannot find module "
    missing += "'/mnt/x/package/cli.js'\n    at Module._resolveFilename\n\nNode.js v24.21.0"
    verdict = classify("Qwen Code", run_(1, stderr=missing), GatewayView(), time_limit=60)
    assert verdict.error_kind == "permanent" and verdict.error_text.startswith("[cli-start]")
    assert verdict.error_text.endswith("Error: Cannot find module '/mnt/x/package/cli.js'")


def test_it_reads_qwen_codes_json_report():
    """``--output-format json``: one array of its events, the last its result (as 0.24.4
    printed it against the scripted upstream, trimmed)."""
    events = [
        {"type": "system", "subtype": "init", "model": "qwen3-coder-plus"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Fixed."}]}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 4,
            "result": "The fix is applied and the tests pass.",
            "usage": {"input_tokens": 6000, "output_tokens": 400, "total_tokens": 6400},
        },
    ]
    summary = read_summary("qwen-json", json.dumps(events))
    assert summary.to_dict() == {
        "input_tokens": 6000,
        "output_tokens": 400,
        "turns": 4,
        "is_error": False,
        "text": "The fix is applied and the tests pass.",
    }
    assert read_summary("qwen-json", "Unknown arguments").to_dict() == {}
    failed = {"error": {"type": "AlreadyReportedError", "message": "[API Error: 401 ...]"}}
    assert read_summary("qwen-json", json.dumps(failed)).to_dict() == {
        "is_error": True,
        "text": "[API Error: 401 ...]",
    }


def test_it_reads_gemini_clis_json_report():
    """``--output-format json``: one object, its response and its stats per model (as 0.61.0
    printed it against the scripted upstream, trimmed); an error is its own object."""
    report = {
        "session_id": "2aca624e",
        "response": "The fix is applied and the tests pass.",
        "stats": {
            "models": {
                "gemini-2.5-pro": {
                    "api": {"totalRequests": 4, "totalErrors": 0},
                    "tokens": {"prompt": 4800, "candidates": 320, "thoughts": 40, "cached": 0},
                }
            },
            "tools": {"totalCalls": 3},
        },
    }
    assert read_summary("gemini-json", json.dumps(report, indent=2)).to_dict() == {
        "input_tokens": 4800,
        "output_tokens": 360,
        "turns": 4,
        "is_error": False,
        "text": "The fix is applied and the tests pass.",
    }
    failed = {"session_id": "7", "error": {"type": "Error", "message": "API key not valid."}}
    assert read_summary("gemini-json", json.dumps(failed)).to_dict() == {
        "is_error": True,
        "text": "API key not valid.",
    }


def test_home_files_stay_under_home_and_small(tmp_path: Path):
    for bad in ("/etc/passwd", "../.bashrc", ".gemini/../../x", ".gemini//settings.json"):
        path = write_definition(tmp_path, "homefiles", home_files={bad: "{}"})
        with pytest.raises(DefinitionError, match=r"home_files: Value error, must be a file path"):
            load_definition(path)
    path = write_definition(tmp_path, "bigfiles", home_files={".x/settings.json": "x" * 40_000})
    with pytest.raises(DefinitionError, match=r"home_files: Value error, at most 32 KiB in all"):
        load_definition(path)
    ok = write_definition(tmp_path, "okfiles", home_files={".gemini/settings.json": "{}"})
    assert load_definition(ok).spec.home_files == {".gemini/settings.json": "{}"}


RECORDINGS = REPO_ROOT / "tests" / "data" / "model_calls"


@pytest.mark.parametrize(
    ("cli", "api"),
    [
        ("claude-code", "anthropic-messages"),
        ("codex", "openai-responses"),
        ("mini-swe-agent", "openai-chat"),
        ("qwen-code", "openai-chat"),
        ("gemini-cli", "gemini"),
        ("opencode", "openai-chat"),
    ],
)
def test_the_committed_recordings_are_what_each_cli_sent_scrubbed(cli, api):
    """tests/data/model_calls/<cli>.jsonl: a real run of the CLI on the toy task through the
    gateway (refreshed with AB_RECORD_MODEL_CALLS, see
    tests/runs/agents/cli/test_cli_agents_e2e.py)."""
    text = (RECORDINGS / f"{cli}.jsonl").read_text()
    records = [json.loads(line) for line in text.splitlines()]
    # The plan's four calls (OpenCode's session title first: five).
    assert [r["api"] for r in records] == [api] * (5 if cli == "opencode" else 4)
    assert all(r["request"]["auth"] == "attempt-token" and r["status"] == 200 for r in records)
    assert "sk-ab-test" not in text and "/tmp/pytest" not in text
    assert set(re.findall(r"127\.0\.0\.1:(\w+)", text)) <= {"PORT"}
