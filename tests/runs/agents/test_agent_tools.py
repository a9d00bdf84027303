"""The five agent tools in a real sandbox, on both backends."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from runs.agents.tools import Toolbox
from tests.support.agent_fixtures import TOY_SOLUTION

pytestmark = pytest.mark.slow


@pytest.fixture
def tools(toy_sandbox, tmp_path) -> Toolbox:
    return Toolbox(toy_sandbox, workdir="/workspace/repo", artifacts_dir=tmp_path / "artifacts")


def sandbox_text(tools: Toolbox, path: str) -> str:
    return tools.sandbox.read_file(f"/workspace/repo/{path}").decode()


def test_it_lists_files_without_hidden_directories(tools):
    listed = tools.list_files()
    assert listed.ok
    assert "src/toy/calc.py" in listed.files
    assert "tests/test_calc.py" in listed.files
    assert not any(f.startswith(".git/") for f in listed.files)
    only_tests = tools.list_files(root="tests", glob="test_c*.py")
    assert only_tests.files == ("tests/test_calc.py",)


def test_it_reads_a_line_range_and_truncates_large_files(tools):
    part = tools.read_file("src/toy/calc.py", start_line=11, end_line=14)
    assert part.ok
    assert part.text.splitlines()[0] == "def mean(values):"
    assert (part.start_line, part.end_line, part.total_lines) == (11, 14, 14)
    assert not part.truncated
    tools.run("seq 1 5000 > big.txt")
    big = tools.read_file("big.txt")
    assert big.truncated
    assert big.end_line == 1000
    assert big.text.splitlines()[-1] == "1000"
    assert "truncated" in big.observation()
    rest = tools.read_file("big.txt", start_line=4999)
    assert rest.text == "4999\n5000"


def test_it_suggests_files_when_the_path_is_wrong_and_lists_directories(tools):
    missing = tools.read_file("src/calc.py")
    assert not missing.ok
    assert "src/toy/calc.py" in missing.suggestions
    assert "did you mean: src/toy/calc.py" in missing.observation()
    folder = tools.read_file("src/toy")
    assert folder.ok
    assert "calc.py" in folder.entries


def test_it_searches_with_context_and_tolerates_no_matches(tools):
    found = tools.search("def mean", glob="*.py", context_lines=2)
    assert found.ok
    hit = next(h for h in found.hits if h.path == "src/toy/calc.py")
    assert hit.line_number == 11
    assert hit.after == ("    if not values:", '        raise ValueError("mean of an empty list")')
    assert len(hit.before) == 2
    assert "src/toy/calc.py\n9- " in found.observation()
    nothing = tools.search("no_such_identifier_anywhere")
    assert nothing.ok
    assert nothing.hits == ()
    assert "no matches" in nothing.observation()
    bad_regex = tools.search("def (", is_regex=True)
    assert not bad_regex.ok
    assert "regex" in bad_regex.error.lower()


def test_it_applies_a_patch_and_keeps_it_as_an_artifact(tools, tmp_path):
    applied = tools.apply_patch(TOY_SOLUTION)
    assert applied.ok, applied.error
    assert applied.paths == ("src/toy/calc.py",)
    assert "total(values) / len(values)" in sandbox_text(tools, "src/toy/calc.py")
    assert (tmp_path / "artifacts" / applied.artifact).read_text() == TOY_SOLUTION
    assert applied.artifact == f"diffs/step_{applied.step:04d}.patch"
    again = tools.apply_patch(TOY_SOLUTION)
    assert not again.ok
    assert "patch does not apply" in again.error


def test_it_normalizes_a_begin_patch_block(tools):
    block = (
        "*** Begin Patch\n*** Update File: src/toy/calc.py\n@@ def mean(values):\n"
        "-    return total(values) // len(values)\n+    return total(values) / len(values)\n"
        "*** End Patch\n"
    )
    applied = tools.apply_patch(block)
    assert applied.ok, applied.error
    assert "total(values) / len(values)" in sandbox_text(tools, "src/toy/calc.py")
    assert any("Begin Patch" in note for note in applied.notes)


def test_strict_mode_refuses_a_begin_patch_block_and_changes_nothing(toy_sandbox, tmp_path):
    strict = Toolbox(
        toy_sandbox, workdir="/workspace/repo", artifacts_dir=tmp_path, strict_patch=True
    )
    block = (
        "*** Begin Patch\n*** Update File: src/toy/calc.py\n@@\n"
        "-    return total(values) // len(values)\n+    return total(values) / len(values)\n"
        "*** End Patch\n"
    )
    refused = strict.apply_patch(block)
    assert not refused.ok
    assert "strict patch mode" in refused.error
    assert "//" in sandbox_text(strict, "src/toy/calc.py")
    assert strict.apply_patch(TOY_SOLUTION).ok


def test_a_patch_writing_outside_the_workspace_is_refused_and_touches_nothing(
    tools,
    toy_sandbox,
    tmp_path,
):
    name = f"outside-{uuid.uuid4().hex}"
    for target in (f"../../{name}", f"../{name}", f"/tmp/{name}"):
        patch = f"--- /dev/null\n+++ b/{target}\n@@ -0,0 +1 @@\n+owned\n"
        refused = tools.apply_patch(patch)
        assert not refused.ok
        assert "refused" in refused.error or "escapes" in refused.error
    workspace = toy_sandbox.config.workspace
    assert not list(tmp_path.rglob(f"{name}*"))
    assert not Path("/", name).exists()
    assert not Path("/tmp", name).exists()
    assert not (workspace.parent / name).exists()
    inside = tools.run(f"ls /{name} /tmp/{name} /workspace/{name} 2>&1; true")
    assert "No such file" in inside.stdout


def test_a_symlink_out_of_the_workspace_cannot_be_patched_or_read_through(tools, tmp_path):
    name = f"escape-{uuid.uuid4().hex}"
    assert tools.run("ln -s /tmp linkout && ln -s /etc/hostname hostlink").ok
    refused = tools.apply_patch(f"--- /dev/null\n+++ b/linkout/{name}\n@@ -0,0 +1 @@\n+owned\n")
    assert not refused.ok
    assert "symbolic link" in refused.error
    assert not Path("/tmp", name).exists()
    assert "No such file" in tools.run(f"ls /tmp/{name} 2>&1; true").stdout
    assert not tools.read_file("hostlink").ok
    assert "escapes" in tools.read_file("linkout/x").error


def test_run_captures_output_to_a_log_refuses_network_and_times_out(tools, tmp_path):
    failing = tools.run("PYTHONPATH=src python -m pytest -q tests/test_calc.py")
    assert failing.exit_code == 1
    assert "1 failed" in failing.stdout
    log = (tmp_path / "artifacts" / failing.artifact).read_text()
    assert failing.artifact == f"logs/tool_step_{failing.step:04d}.txt"
    assert "1 failed" in log and "[exit 1" in log
    denied = tools.run("true", network=True)
    assert not denied.ok
    assert "network access is disabled" in denied.error
    offline = tools.run(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\""
    )
    assert offline.exit_code != 0
    slow = tools.run("sleep 30", timeout_sec=1)
    assert slow.timed_out
    assert slow.exit_code == 124
    with_env = tools.run('echo "$GREETING"', env={"GREETING": "hello"})
    assert with_env.stdout.strip() == "hello"


def test_bad_calls_become_error_results_never_exceptions(tools):
    cases = [
        ("no_such_tool", {}, "unknown tool"),
        ("read_file", {}, "missing required argument 'path'"),
        ("read_file", {"path": 3}, "path must be string"),
        ("read_file", {"path": "a", "mode": "x"}, "unknown argument"),
        ("read_file", '{"path": ', "not valid JSON"),
        ("read_file", {"path": "src/toy/calc.py", "start_line": 5, "end_line": 2}, "end_line"),
        ("search", {"query": ""}, "must not be empty"),
        ("search", {"query": "x", "max_results": True}, "must be integer"),
        ("run", {"command": "true", "env": {"BAD-NAME": "1"}}, "invalid variable"),
        ("run", {"command": "  "}, "must not be empty"),
        ("list_files", {"root": "../.."}, "escapes"),
        ("list_files", {"glob": "../*"}, "may not leave"),
        ("apply_patch", {"unified_diff": "just words"}, "no unified diff"),
    ]
    for name, arguments, message in cases:
        result = tools.call(name, arguments)
        assert not result.ok, name
        assert message in result.error, (name, result.error)
    assert tools.step == len(cases)


def test_absolute_paths_inside_the_repository_are_accepted(tools):
    result = tools.read_file("/workspace/repo/src/toy/calc.py", start_line=1, end_line=1)
    assert result.ok
    assert result.text == '"""Small arithmetic helpers."""'


def test_a_large_patch_is_applied_whole(tools):
    lines = [f"LINE_{n:06d} = {'x' * 40!r}" for n in range(6000)]  # about 350 kB
    patch = "--- /dev/null\n+++ b/src/toy/big.py\n@@ -0,0 +1,6000 @@\n"
    patch += "".join(f"+{line}\n" for line in lines)
    applied = tools.apply_patch(patch)
    assert applied.ok, applied.error
    assert sandbox_text(tools, "src/toy/big.py") == "".join(f"{line}\n" for line in lines)
