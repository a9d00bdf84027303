"""Sandboxed code cannot make the harness's git run anything on the host.

The harness compares the working tree with the checked-out commit on the host, as root:
after setup (is the tree still clean?) and after the agent (its patch). The repository's .git
is the sandbox's to write by then, and git obeys it: a ``filter.<x>.clean`` command in
``.git/config`` with ``* filter=<x>`` in ``.gitattributes`` runs during ``git add`` or
``git status``, ``core.worktree`` points git at any host folder. Those comparisons now use a
git folder of the harness (runs/pipeline/workspace.py): tried here with a real sandbox's setup
planting all of it (Docker and bubblewrap), and on a plain repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.pipeline import workspace
from tests.support.pipeline_fixtures import (
    get_task,
    git_repo,
    import_tasks,
    run_attempt,
    write_task,
)


def plant(marker: Path, host_dir: Path) -> str:
    """Shell commands (run in the repository, in the sandbox) that turn git against the host."""
    return (
        f"git config filter.pwn.clean 'sh -c \"id > {marker}; cat\"'"
        f" && git config diff.pwn.textconv 'sh -c \"id > {marker}; cat\"'"
        " && printf '* filter=pwn diff=pwn\\n' > .gitattributes"
        f" && git config include.path {host_dir}/secret.txt"
        " && echo '# changed' >> test_x.py"
        # Last: git itself then looks for that folder, which the sandbox does not have.
        f" && git config core.worktree {host_dir}"
    )


@pytest.fixture
def host_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text("host secret\n")
    return folder


def test_the_comparisons_ignore_what_the_repository_s_git_folder_says(
    tmp_path: Path, host_dir: Path
) -> None:
    repo = tmp_path / "repo"
    commit = git_repo(repo, {"test_x.py": "def test_x():\n    assert False\n"})
    marker = tmp_path / "pwned"
    command = f'sh -c "id > {marker}; cat"'
    with (repo / ".git" / "config").open("a") as config:
        config.write(
            f'[filter "pwn"]\n\tclean = {command}\n[diff "pwn"]\n\ttextconv = {command}\n'
            f"[core]\n\tworktree = {host_dir}\n[include]\n\tpath = {host_dir}/secret.txt\n"
        )
    (repo / ".gitattributes").write_text("* filter=pwn diff=pwn\n")
    with (repo / "test_x.py").open("a") as test:
        test.write("# changed\n")

    changed = workspace.changed_paths(repo, commit, excludes=[])
    diff = workspace.diff_against(repo, commit, excludes=[])

    assert changed.ok and diff.ok, changed.stderr + diff.stderr
    assert sorted(changed.stdout.split()) == [".gitattributes", "test_x.py"]
    assert "+# changed" in diff.stdout and "secret" not in diff.stdout
    assert not marker.exists()
    # And the repository's own index is left as it was.
    assert workspace.git(repo, "diff", "--cached", "--name-only").stdout == ""


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.django_db
@pytest.mark.parametrize("variant", ["baseline", "nop"], ids=["clean-check", "patch"])
def test_a_sandbox_cannot_run_commands_on_the_host_through_git(
    variant: str, backend: str, artifacts_root: Path, tmp_path: Path, host_dir: Path
) -> None:
    marker = tmp_path / "pwned"
    commit = git_repo(tmp_path / "repo", {"test_x.py": "def test_x():\n    assert False\n"})
    write_task(
        tmp_path / "tasks",
        "turns_git",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace/repo,
                       timeout_sec: 60}}
        setup: {{commands: [{json.dumps(plant(marker, host_dir))}], network: false}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        validation: {{enforce_clean_setup: {str(variant == "baseline").lower()},
                      check_flaky: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])

    attempt = run_attempt(get_task("turns_git", "pipeline-test"), variant=variant, backend=backend)

    assert not marker.exists(), marker.read_text()
    if variant == "baseline":  # setup changed the tree: named, from our own comparison
        assert attempt.failure_stage == "setup", attempt.error_text
        assert "setup changed the working tree (2 path(s): .gitattributes, test_x.py)" in (
            attempt.error_text
        )
    else:  # the agent's patch is the tree's change, nothing from the host folder
        assert "+# changed" in attempt.final_patch, attempt.error_text
        assert "secret" not in attempt.final_patch
