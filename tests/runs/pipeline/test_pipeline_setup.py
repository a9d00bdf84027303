"""Setup in the sandbox: pip installs persist in the workspace for the later stages (even when
the test command sets its own PYTHONPATH), without dirtying the repository."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.support.pipeline_fixtures import (
    attempt_folder,
    get_task,
    git_repo,
    import_tasks,
    run_attempt,
    write_task,
)

pytestmark = [pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap]

WHEEL = "helper_pkg-0.1-py3-none-any.whl"


def make_wheel(path: Path) -> None:
    """A minimal pure-Python wheel, so pip can install it with no network and no build."""
    info = "helper_pkg-0.1.dist-info"
    files = {
        "helper_pkg/__init__.py": "ANSWER = 42\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: helper-pkg\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
        wheel.writestr(f"{info}/RECORD", record)


@pytest.mark.parametrize("workdir", ["/workspace/repo", "/workspace"])
def test_a_pip_install_in_setup_is_importable_in_the_tests(
    workdir, tmp_path, backend, artifacts_root
):
    repo = tmp_path / "repo"
    repo.mkdir()
    make_wheel(repo / WHEEL)
    commit = git_repo(repo, {"README": "x\n"})
    write_task(
        tmp_path / "tasks",
        "pip_task",
        f"""
        repo: {{url: {repo}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: {workdir},
                       timeout_sec: 60}}
        setup: {{commands: ["pip install --no-index {WHEEL}"], network: false}}
        run: {{command: "PYTHONPATH=src python3 -c 'import helper_pkg, sys; sys.exit(7)'"}}
        validation: {{expected_exit_codes: [7], check_flaky: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])

    attempt = run_attempt(get_task("pip_task", "pipeline-test"), backend=backend)

    assert attempt.failure_reason_id is None, attempt.error_text
    assert attempt.exit_code == 7
    setup_log = (attempt_folder(attempt) / "logs/setup.txt").read_text()
    # The command as run: redirected into the workspace, then made visible to every stage.
    assert f"$ pip install --target /workspace/site-packages --no-index {WHEEL}" in setup_log
    assert "agentbench-workspace.pth" in setup_log
    assert "Successfully installed helper-pkg-0.1" in setup_log
