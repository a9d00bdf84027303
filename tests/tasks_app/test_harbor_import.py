"""Harbor task folders through every door that imports tasks (``ab check-tasks``,
``ab import-tasks``, the upload endpoint): the examples import whole, and a folder asking for
what cannot run here is refused naming its file and field, with nothing imported."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tasks_app import harbor
from tasks_app.spec import TaskSpecError
from tests.conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "harbor"
REPO = REPO_ROOT


def _copy(tmp_path: Path, name: str = "py-wordfreq", dataset: str = "mine") -> Path:
    target = tmp_path / dataset / name
    shutil.copytree(EXAMPLES / name, target)
    return target


def _problems(folder: Path) -> list[str]:
    with pytest.raises(TaskSpecError) as caught:
        harbor.load_harbor_task(folder)
    return [str(p) for p in caught.value.problems]


def test_it_reads_every_honoured_field_of_the_examples():
    task = harbor.load_harbor_task(EXAMPLES / "node-slugify")

    assert task.task_id == "node-slugify"
    assert task.instruction.startswith("# Make slugs clean")
    assert task.agent_timeout_sec == 300.0
    assert task.verifier_timeout_sec == 120.0
    assert task.build_timeout_sec == 900.0
    assert task.memory_mb == 1024  # the deprecated memory = "1G"
    assert task.storage_mb == 1024
    assert task.allow_internet is True
    assert task.verifier_env == {"SLUG_CASES": "4"}
    assert task.has_solution
    assert task.labels == ["harbor", "node", "example", "programming", "easy"]
    assert len(task.content_hash) == 64


@pytest.mark.parametrize(
    ("toml_extra", "field", "words"),
    [
        ("[environment]\ngpus = 1\n", "environment.gpus", "GPU"),
        ('[environment]\ngpu_types = ["H100"]\n', "environment.gpu_types", "GPU"),
        (
            '[[environment.mcp_servers]]\nname = "m"\ntransport = "sse"\nurl = "http://m/"\n',
            "environment.mcp_servers",
            "MCP servers",
        ),
        ('[environment]\nos = "windows"\n', "environment.os", "Linux"),
        ('[verifier]\nuser = "root"\n', "verifier.user", "unprivileged"),
        ('[[steps]]\nname = "one"\n', "steps", "multi-step"),
        ("[environment]\nshiny = true\n", "environment.shiny", "unknown key"),
        (("cpus = 1", 'cpus = "two"'), "environment.cpus", "positive number"),
        (("timeout_sec = 300.0", "timeout_sec = -1"), "agent.timeout_sec", "seconds"),
        (('version = "1.0"', 'version = "9.9"'), "version", "unsupported version"),
        (
            ("memory_mb = 1024", "memory_mb = 1048576"),
            "environment.memory_mb",
            "over this installation's SANDBOX_MAX_MEMORY_MB (16384 MB)",
        ),
        (
            ("storage_mb = 1024", 'storage = "1T"'),
            "environment.storage_mb",
            "over this installation's SANDBOX_MAX_DISK_MB (102400 MB)",
        ),
    ],
)
def test_it_refuses_a_field_by_name(tmp_path, toml_extra, field, words):
    folder = _copy(tmp_path)
    config = folder / "task.toml"
    text = config.read_text()
    if isinstance(toml_extra, tuple):  # a value replaced
        text = text.replace(*toml_extra)
    else:
        # A table given twice is invalid TOML: merge into the existing table when there is one.
        table = toml_extra.splitlines()[0]
        if table in text and not table.startswith("[["):
            text = text.replace(table + "\n", toml_extra)
        else:
            text += "\n" + toml_extra
    config.write_text(text)

    (problem,) = _problems(folder)

    assert problem.startswith(f"{config}: {field}: ")
    assert words in problem


def test_gpus_zero_and_linux_ask_for_nothing_and_import(tmp_path):
    folder = _copy(tmp_path)
    config = folder / "task.toml"
    config.write_text(
        config.read_text().replace("[environment]\n", '[environment]\ngpus = 0\nos = "linux"\n')
    )

    assert harbor.load_harbor_task(folder).task_id == "py-wordfreq"


def test_it_refuses_a_compose_environment_and_missing_files_naming_each(tmp_path):
    folder = _copy(tmp_path)
    (folder / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    (folder / "tests" / "test.sh").unlink()
    (folder / "instruction.md").write_text("  \n")
    (folder / "environment" / "Dockerfile").unlink()

    problems = _problems(folder)

    assert any("docker-compose.yaml" in p and "bubblewrap" in p for p in problems)
    assert any(p.startswith(f"{folder / 'tests/test.sh'}: (file): missing") for p in problems)
    assert any(p.startswith(f"{folder / 'instruction.md'}: (file): empty") for p in problems)
    assert any("environment/Dockerfile" in p and "docker_image" in p for p in problems)


def test_a_link_out_of_the_task_is_refused_before_anything_is_read(tmp_path):
    folder = _copy(tmp_path)
    (folder / "tests" / "secret").symlink_to("/etc/shadow")
    (folder / "instruction.md").unlink()
    (folder / "instruction.md").symlink_to("/etc/hostname")

    problems = _problems(folder)

    assert len(problems) == 2 and all("a link leading outside the task" in p for p in problems)
    assert any("tests/secret" in p for p in problems)
    assert any("instruction.md" in p for p in problems)


def test_check_tasks_names_the_problems_and_import_stores_nothing(tmp_path, db):
    from tasks_app.models import Task
    from tasks_app.services import tasks_import

    good = _copy(tmp_path, "py-wordfreq")
    bad = _copy(tmp_path, "go-median")
    config = bad / "task.toml"
    config.write_text(config.read_text() + "\n[extra]\nx = 1\n")

    check = subprocess.run(
        [sys.executable, "-m", "benchsite.cli.main", "check-tasks", str(good.parent)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert check.returncode == 1
    assert f"{config}: extra: unknown key" in check.stdout

    with pytest.raises(TaskSpecError):
        tasks_import(directory=good.parent)
    assert not Task.objects.exists()


def test_it_imports_the_examples_once_and_again_unchanged(db):
    from tasks_app.models import Task, TaskSource
    from tasks_app.services import tasks_import

    first = tasks_import(directory=EXAMPLES)
    again = tasks_import(directory=EXAMPLES)

    assert first.created == ["harbor/go-median", "harbor/node-slugify", "harbor/py-wordfreq"]
    assert again.unchanged == first.created
    task = Task.objects.get(task_id="py-wordfreq")
    assert task.source == TaskSource.HARBOR
    assert task.suite.source == TaskSource.HARBOR
    assert task.problem_statement.startswith("# Count words case-insensitively")
    assert task.test_command == "bash /tests/test.sh"
    assert task.timeout_sec == 120
    assert task.setup_network is False
    assert task.spec["folder"] == str(EXAMPLES / "py-wordfreq")
    assert task.spec["config"]["environment"]["memory_mb"] == 1024


def _zip_of(folder: Path, prefix: str) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{prefix}/{path.relative_to(folder)}")
    buffer.seek(0)
    return buffer


def test_the_upload_endpoint_imports_a_harbor_folder(client, db, staff_auth, settings, tmp_path):
    settings.API_UPLOADS_ROOT = tmp_path
    upload = _zip_of(EXAMPLES / "py-wordfreq", "py-wordfreq")
    upload.name = "task.zip"

    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)

    assert response.status_code == 200, response.content
    assert response.json()["created"] == ["harbor/py-wordfreq"]


def test_the_upload_endpoint_names_a_refused_field(client, db, staff_auth, settings, tmp_path):
    settings.API_UPLOADS_ROOT = tmp_path
    folder = _copy(tmp_path / "src")
    config = folder / "task.toml"
    config.write_text(config.read_text().replace("[environment]\n", "[environment]\ngpus = 2\n"))
    upload = _zip_of(folder, "gpu-task")
    upload.name = "task.zip"

    response = client.post("/api/imports/tasks", {"file": upload}, **staff_auth)

    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "environment.gpus"
    assert error["location"].startswith("gpu-task/task.toml")


def test_the_admin_page_imports_a_harbor_folder_and_names_a_refused_field(
    admin_client, settings, tmp_path
):
    from tasks_app.models import Task

    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    good = _zip_of(EXAMPLES / "py-wordfreq", "py-wordfreq")
    good.name = "task.zip"

    page = admin_client.post("/admin/tasks/upload/", {"file": good}).content.decode()

    assert "created harbor/py-wordfreq" in page
    assert Task.objects.filter(suite__name="harbor", task_id="py-wordfreq").exists()

    folder = _copy(tmp_path / "src", "go-median")
    config = folder / "task.toml"
    config.write_text(config.read_text() + '\n[[environment.mcp_servers]]\nname = "m"\n')
    bad = _zip_of(folder, "go-median")
    bad.name = "bad.zip"

    page = admin_client.post("/admin/tasks/upload/", {"file": bad}).content.decode()

    assert "Nothing was imported" in page
    assert "go-median/task.toml: environment.mcp_servers: refused: MCP servers" in page
    assert not Task.objects.filter(task_id="go-median").exists()
    listing = admin_client.get("/admin/tasks_app/suite/").content.decode()
    assert "/admin/tasks/upload/" in listing  # the object tool that leads there
