"""Helpers for the pipeline tests: real backends, real git repositories, real tasks."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

from tests.conftest import TASKS_DIR

BACKENDS = ["docker", "bwrap"]
TOY_COMMIT = "ea49502485e69bba84235ee0547d109820a0688a"


def import_tasks(directory: Path = TASKS_DIR, *, also: list[Path] | tuple[Path, ...] = ()):
    """Import the tasks under ``directory``; their paths (repo.url, reference_solution) may
    also lead into the folders ``also`` lists (a test's repositories beside its tasks)."""
    from tasks_app.services import tasks_import
    from tasks_app.spec import PathRules

    return tasks_import(directory=directory, rules=PathRules.local(directory, also))


def get_task(task_id: str, suite: str = "custom-dev"):
    from tasks_app.models import Task

    return Task.objects.select_related("suite").get(suite__name=suite, task_id=task_id)


def run_attempt(task, *, variant: str = "baseline", backend: str, **kwargs):
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute

    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant(variant))
    return attempt_execute(attempt, backend=backend, **kwargs)


def attempt_folder(attempt) -> Path:
    from runs.pipeline.artifacts import folder_of

    return folder_of(attempt.artifacts_dir)


def run_json(attempt) -> dict:
    return json.loads((attempt_folder(attempt) / "run.json").read_text())


def leftover_containers(attempt) -> list:
    """Containers (running or not) still labelled with the attempt."""
    import docker

    client = docker.from_env()
    try:
        return client.containers.list(
            all=True,
            filters={"label": f"agentbench.attempt={attempt.public_id}"},
            ignore_removed=True,
        )
    finally:
        client.close()


def leftover_processes(attempt) -> list[int]:
    """Host processes whose environment carries the attempt's marker (set in every sandbox)."""
    marker = f"AGENTBENCH_ATTEMPT={attempt.public_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def write_task(folder: Path, task_id: str, body: str, *, suite: str = "pipeline-test") -> Path:
    """A task.yaml under ``folder/task_id``; ``body`` is YAML after id and suite."""
    path = folder / task_id / "task.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'task_spec_version: "1.0"\nid: {task_id}\nsuite: {suite}\n' + textwrap.dedent(body)
    )
    return path


def git_repo(folder: Path, files: dict[str, str]) -> str:
    """A git repository with one commit of ``files``; returns the commit id."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-C", str(folder), *args], check=True, env=env)
    out = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()
