"""Task paths stay inside what was uploaded (issue 20, point 2).

The issue's steps, through the real API under gunicorn: a task.yaml whose
``reference_solution`` is ``../../../../etc/shadow``, or whose ``repo.url`` names a repository
of this host (relative, absolute, file://, through a link, another upload's files, a git
remote helper), is refused with a 400 naming the file and field, and nothing is stored or
kept. A bundle inside the upload still imports. Then ``ab import-tasks`` with a path outside
the tasks folder: refused, unless TASK_PATH_ROOTS names the folder; the shipped examples
(``../../../examples/toy_repo.bundle``) import as before.
"""

from __future__ import annotations

import io
import sqlite3
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, TASKS_DIR
from tests.support.ab_cli import ab
from tests.support.gunicorn_fixtures import Server, serve
from tests.support.pipeline_fixtures import git_repo


def task_yaml(task_id: str, url: str, extra: str = "") -> str:
    return (
        f'task_spec_version: "1.0"\nid: {task_id}\nsuite: uploaded\n'
        f'repo: {{url: "{url}", commit: main}}\n'
        "environment: {docker_image: agentbench/py-runner:0.1.0}\n"
        "run: {command: python3 -m pytest -q}\n" + extra
    )


def zip_of(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("task-paths-server")) as running:
        yield running


@pytest.fixture(scope="module")
def host_repo(server: Server) -> Path:
    """A repository of the host, beside the uploads folder (not in it)."""
    repo = server.uploads.parent / "host-repo"
    git_repo(repo, {"SECRET.txt": "host secret\n"})
    return repo


def tasks_of(server: Server) -> list[tuple[str, str, str]]:
    with sqlite3.connect(server.uploads.parent / "db.sqlite3") as db:
        return db.execute("select task_id, repo_url, gold_patch from tasks_app_task").fetchall()


def kept_uploads(server: Server) -> list[str]:
    folder = server.uploads / "tasks"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def refused(server: Server, archive: bytes, name: str = "tasks.zip") -> dict:
    before_tasks, before_kept = tasks_of(server), kept_uploads(server)
    response = server.post("/api/imports/tasks", files={"file": (name, archive)})
    assert response.status_code == 400, response.text
    body = response.json()
    assert str(server.uploads) not in response.text  # the server's folders stay its own
    assert tasks_of(server) == before_tasks
    assert kept_uploads(server) == before_kept
    return body


@pytest.mark.slow
def test_a_reference_solution_naming_a_host_file_is_refused(server: Server) -> None:
    body = refused(
        server,
        zip_of(
            {
                "t/task.yaml": task_yaml(
                    "t", "https://example.org/r.git", "reference_solution: ../../../../etc/shadow\n"
                )
            }
        ),
    )
    (error,) = body["errors"]
    assert error["field"] == "reference_solution"
    assert error["location"].startswith("t/task.yaml:")
    assert "'../../../../etc/shadow' is outside the upload" in error["message"]


@pytest.mark.parametrize(
    "kind", ["relative", "absolute", "file-url", "remote-helper", "folder-in-upload"]
)
@pytest.mark.slow
def test_a_repo_url_naming_a_host_repository_is_refused(
    server: Server, host_repo: Path, kind: str
) -> None:
    files: dict[str, str | bytes] = {}
    url = {
        # uploads/tasks/<upload>/t/task.yaml -> four levels up is the server's var folder
        "relative": "../../../../host-repo",
        "absolute": str(host_repo),
        "file-url": f"file://{host_repo}",
        "remote-helper": "ext::sh -c 'touch /tmp/ab-pwned'",
        # A repository folder in the upload: its .git file could point anywhere on the host.
        "folder-in-upload": "repo",
    }[kind]
    if kind == "folder-in-upload":
        files["t/repo/.git"] = f"gitdir: {host_repo / '.git'}\n"
    files["t/task.yaml"] = task_yaml("t", url)
    body = refused(server, zip_of(files))
    (error,) = body["errors"]
    assert error["field"] == "repo.url"
    assert error["location"].startswith("t/task.yaml:")
    assert not Path("/tmp/ab-pwned").exists()


@pytest.mark.slow
def test_a_link_in_an_uploaded_archive_is_refused(server: Server, host_repo: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = task_yaml("t", "repo.bundle").encode()
        info = tarfile.TarInfo("t/task.yaml")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("t/repo.bundle")
        link.type = tarfile.SYMTYPE
        link.linkname = str(host_repo)
        archive.addfile(link)
    body = refused(server, buffer.getvalue(), "tasks.tar.gz")
    assert body["errors"][0]["field"] == "file"
    assert "is not a plain file" in body["errors"][0]["message"]


@pytest.mark.slow
def test_a_bundle_inside_the_upload_imports_and_nothing_else_may_point_into_it(
    server: Server, host_repo: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "repo.bundle"
    subprocess.run(
        ["git", "-C", str(host_repo), "bundle", "create", "-q", str(bundle), "main"], check=True
    )
    files = {
        "t/task.yaml": task_yaml("good", "../repo.bundle", "reference_solution: gold.patch\n"),
        "t/gold.patch": "diff --git a/x b/x\n",
        "repo.bundle": bundle.read_bytes(),
    }
    response = server.post("/api/imports/tasks", files={"file": ("good.zip", zip_of(files))})
    assert response.status_code == 200, response.text
    assert response.json()["created"] == ["uploaded/good"]
    ((_, repo_url, gold),) = [t for t in tasks_of(server) if t[0] == "good"]
    (upload,) = kept_uploads(server)
    assert repo_url == str((server.uploads / "tasks" / upload / "repo.bundle").resolve())
    assert gold == "diff --git a/x b/x\n"

    # Another upload may not name the files of the first.
    other = f"../../{upload}/repo.bundle"
    body = refused(server, zip_of({"t/task.yaml": task_yaml("thief", other)}))
    assert body["errors"][0]["field"] == "repo.url"


# --- ab import-tasks: the tasks folder given, examples/ and TASK_PATH_ROOTS -----------------


def test_ab_import_tasks_refuses_a_path_outside_the_tasks_folder(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "gold.patch").write_text("diff --git a/x b/x\n")
    tasks = tmp_path / "tasks"
    (tasks / "t").mkdir(parents=True)
    (tasks / "t" / "task.yaml").write_text(
        task_yaml(
            "t", "https://example.org/r.git", "reference_solution: ../../elsewhere/gold.patch\n"
        )
    )

    out = ab("import-tasks", str(tasks), var_dir=tmp_path / "var")
    assert out.returncode == 1
    assert (
        f"{tasks}/t/task.yaml:7: reference_solution: '../../elsewhere/gold.patch' is outside"
        in out.stdout
    )
    assert "nothing imported" in out.stderr
    checked = ab("check-tasks", str(tasks), var_dir=tmp_path / "var")
    assert checked.returncode == 1 and "reference_solution" in checked.stdout

    # The operator may name more folders.
    allowed = ab(
        "import-tasks", str(tasks), var_dir=tmp_path / "var", env={"TASK_PATH_ROOTS": str(outside)}
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "created   uploaded/t" in allowed.stdout


def test_ab_import_tasks_still_imports_the_shipped_examples(tmp_path: Path) -> None:
    out = ab("import-tasks", str(TASKS_DIR), var_dir=tmp_path / "var")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "created 7" in out.stdout
    with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as db:
        urls = {u for (u,) in db.execute("select repo_url from tasks_app_task")}
    assert urls == {str((REPO_ROOT / "examples" / "toy_repo.bundle").resolve())}
