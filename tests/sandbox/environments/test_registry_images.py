"""Images from a registry, for real: Debian's docker-registry on loopback
(tests/support/registry_fixtures.py), seeded with images built here, pulled by the engine through
``sandbox.environments.registry`` / ``pulled`` and ``tasks_app.images``.

- pulls by tag, by digest and through the ``REGISTRY_MIRRORS`` setting; the repository digest
  recorded on the task (page, API) and on every attempt (page, API, run.json);
- each failure ends with its named reason: not found, unauthorized (a registry behind
  htpasswd), wrong architecture (an image whose configuration says arm64), over the disk
  budget; an attempt on an image that cannot be pulled is SANDBOX_ERROR [image] naming it;
- an attempt on a pulled image runs on both backends (bubblewrap: from its exported tree).
- without the engine (``IMAGE_TREES_FROM=registry``: skopeo, umoci) the tree comes straight
  from the registry: an attempt runs on it on bubblewrap with the registry's digest, while the
  task page's progress endpoint is read; mirrors, a second use a no-op, the same named
  reasons; ``ab pull-images`` the same way; the page shows a pull under way escaped.

One registry per module (an xdist group: module-scoped fixtures), seeded once."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from sandbox.environments import cache, eviction, registry
from sandbox.environments.image_trees import level_name
from sandbox.environments.pulled import ensure_pulled
from tests.support.backends import backend_params
from tests.support.pipeline_fixtures import (
    git_repo,
    import_tasks,
    run_json,
    write_task,
)
from tests.support.registry_fixtures import local_registry, tiny_image, with_architecture
from tests.support.swebench_cache_fixtures import new_root

RUNNER = "agentbench/py-runner:0.1.0"
pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A registry holding: ``tiny/ok:1`` (one file), ``agentbench-test/ok:1`` (the same, for
    the mirror of docker.io), ``tiny/arm:1`` (configured for arm64) and ``runner/marked:1``
    (the runner image plus a marker file and an ENV: runnable on both backends)."""
    folder = tmp_path_factory.mktemp("registry")
    run = uuid.uuid4().hex[:8]
    local = f"agentbench-test/registry-seed-{run}"
    with local_registry(folder / "plain") as reg:
        tiny_image(f"{local}:tiny", folder, f"tiny-{run}")
        with_architecture(f"{local}:tiny", f"{local}:arm", "arm64", folder)
        dockerfile = (
            f"FROM {RUNNER}\nUSER root\nRUN echo marked-{run} > /etc/registry-marker\n"
            "ENV REGISTRY_MARKER=from-the-registry\nUSER agent\n"
        )
        subprocess.run(
            ["docker", "build", "-q", "-t", f"{local}:runner", "-"],
            input=dockerfile,
            text=True,
            check=True,
            capture_output=True,
        )
        digests = {
            "tiny": reg.push(f"{local}:tiny", "tiny/ok:1"),
            "mirror": reg.push(f"{local}:tiny", "agentbench-test/ok:1"),
            "arm": reg.push(f"{local}:arm", "tiny/arm:1"),
            "runner": reg.push(f"{local}:runner", "runner/marked:1"),
        }
        for kind in ("tiny", "arm", "runner"):
            subprocess.run(["docker", "image", "rm", f"{local}:{kind}"], capture_output=True)
        try:
            yield reg, digests, run
        finally:
            _remove_pulled(reg.host)


def _remove_pulled(host: str) -> None:
    """Every image the tests pulled from ``host`` (by its names there)."""
    listed = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"],
        capture_output=True,
        text=True,
    )
    for line in listed.stdout.splitlines():
        name, image_id = line.split()
        if name.startswith(f"{host}/"):
            subprocess.run(["docker", "image", "rm", "--force", image_id], capture_output=True)


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch):
    path = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(path))
    monkeypatch.delenv(eviction.BUDGET_ENV, raising=False)
    monkeypatch.delenv(registry.MIRRORS_ENV, raising=False)
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def forget(reference: str) -> None:
    """Make the engine lack ``reference`` (so the next use pulls it)."""
    subprocess.run(["docker", "image", "rm", "--force", reference], capture_output=True)


def task_yaml(folder: Path, task_id: str, image: str, suite: str) -> None:
    commit = git_repo(
        folder / f"repo-{task_id}",
        {
            "test_x.py": "import os\n\ndef test_x():\n"
            "    assert os.environ['REGISTRY_MARKER'] == 'from-the-registry'\n"
            "    assert open('/etc/registry-marker').read().startswith('marked-')\n"
        },
    )
    write_task(
        folder / "tasks",
        task_id,
        f"""
        repo: {{url: {folder / f"repo-{task_id}"}, commit: {commit}}}
        environment: {{docker_image: "{image}", workdir: /workspace, timeout_sec: 60}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        """,
        suite=suite,
    )


@pytest.mark.django_db
def test_ab_pull_images_pulls_by_tag_and_the_task_page_and_api_say_what(
    seeded, root: Path, tmp_path: Path, client, auth, capsys
) -> None:
    from benchsite.cli.main import main
    from tasks_app.models import Task

    reg, digests, _ = seeded
    image = f"{reg.host}/runner/marked:1"
    forget(image)
    suite = f"registry-{uuid.uuid4().hex[:6]}"
    task_yaml(tmp_path, "pulled_by_tag", image, suite)
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    assert main(["pull-images", suite]) == 0
    out = capsys.readouterr().out
    assert f"pulled_by_tag: {image} -> {digests['runner']} (pulled from {image} in" in out
    assert "layers" in out  # the progress lines (not a terminal: one every few seconds)
    task = Task.objects.get(task_id="pulled_by_tag")
    assert task.image_digest == digests["runner"]
    assert task.image_source == image and task.image_pulled_at is not None
    assert task.image_status == ""
    page = client.get(task.get_absolute_url()).content.decode()
    assert digests["runner"] in page and f"from <code>{image}</code>" in page
    api = client.get(f"/api/tasks/{task.public_id}", **auth).json()
    assert api["image_digest"] == digests["runner"] and api["image_source"] == image
    assert api["image_pulled_at"]
    # The pull is a level of the cache, on record; a second pull is a no-op.
    level = cache.read_level(level_name(task_image_id(image)))
    assert level is not None and level.repo_digest == digests["runner"] and level.image_bytes
    assert main(["pull-images", suite]) == 0
    assert f"-> {digests['runner']} (already on the engine)" in capsys.readouterr().out
    task.refresh_from_db()
    assert task.image_source == image  # still says where it came from


def task_image_id(reference: str) -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", reference],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_pull_by_digest_gets_that_digest(seeded, root: Path) -> None:
    reg, digests, _ = seeded
    forget(f"{reg.host}/tiny/ok:1")
    forget(digests["tiny"])
    pulled = ensure_pulled(digests["tiny"])
    assert pulled.repo_digest == digests["tiny"] and pulled.pulled_at and pulled.owned
    again = ensure_pulled(digests["tiny"])
    assert again.image_id == pulled.image_id and again.seconds == 0.0  # found, not pulled


def test_a_pull_goes_through_the_mirror_setting(
    seeded, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg, digests, _ = seeded
    forget(f"{reg.host}/agentbench-test/ok:1")
    monkeypatch.setenv(registry.MIRRORS_ENV, f"docker.io={reg.host},ghcr.io=127.0.0.1:9")
    seen: list[str] = []
    pulled = ensure_pulled("agentbench-test/ok:1", progress=lambda s: seen.append(s.line()))
    assert pulled.source == f"{reg.host}/agentbench-test/ok:1"
    assert pulled.repo_digest == digests["mirror"]
    start = f"pulling {reg.host}/agentbench-test/ok:1"
    assert seen and all(line.startswith(start) for line in seen)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A registry behind htpasswd basic auth (no login on this engine)."""
    with local_registry(tmp_path_factory.mktemp("guarded"), users={"carol": "s3cret"}) as reg:
        yield reg


@pytest.mark.parametrize(
    "case", ["not found", "unauthorized", "wrong architecture", "over the disk budget"]
)
def test_each_failed_pull_ends_with_its_named_reason(
    seeded, guarded, root: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    reg, _, _ = seeded
    reference = {
        "not found": f"{reg.host}/tiny/none:1",
        "unauthorized": f"{guarded.host}/tiny/ok:1",
        "wrong architecture": f"{reg.host}/tiny/arm:1",
        "over the disk budget": f"{reg.host}/runner/marked:1",
    }[case]
    forget(reference)
    if case == "over the disk budget":
        monkeypatch.setenv(eviction.BUDGET_ENV, "0.001")  # 1 MB
    with pytest.raises(registry.PullError) as caught:
        ensure_pulled(reference, retries=1)
    assert caught.value.reason == case, str(caught.value)
    assert str(caught.value).startswith(f"[{case}] ")
    assert (
        subprocess.run(["docker", "image", "inspect", reference], capture_output=True).returncode
        != 0
    )


@pytest.mark.django_db
def test_an_attempt_on_an_image_that_cannot_be_pulled_is_an_infrastructure_outcome(
    seeded, root: Path, artifacts_root: Path, tmp_path: Path
) -> None:
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task

    reg, _, _ = seeded
    image = f"{reg.host}/runner/gone:1"
    task_yaml(tmp_path, "image_missing", image, "registry-missing")
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    task = Task.objects.get(task_id="image_missing")
    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant("baseline"))
    attempt = attempt_execute(attempt, backend="docker")
    assert attempt.failure_reason_id == "SANDBOX_ERROR" and attempt.is_infra
    assert attempt.error_text.startswith("[image] SANDBOX_ERROR"), attempt.error_text
    assert f"image {image}: [not found]" in attempt.error_text
    task.refresh_from_db()
    assert task.image_status.startswith("pull failed: [not found]")


@pytest.mark.django_db
@pytest.mark.parametrize("backend", backend_params())
def test_an_attempt_on_a_pulled_image_runs_on_both_backends_and_records_its_digest(
    seeded, root: Path, artifacts_root: Path, tmp_path: Path, backend: str, client, auth
) -> None:
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task

    reg, digests, _ = seeded
    image = f"{reg.host}/runner/marked:1"
    forget(image)
    task_yaml(tmp_path, f"pulled_{backend}", image, "registry-run")
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    task = Task.objects.get(task_id=f"pulled_{backend}")
    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant("baseline"))
    attempt = attempt_execute(attempt, backend=backend)
    # The task's tests pass in the pulled image (its file and ENV): a baseline that passes.
    assert attempt.failure_reason_id == "BASELINE_NOT_FAILING", attempt.error_text
    assert attempt.image_digest == digests["runner"]
    assert run_json(attempt)["sandbox"]["image_digest"] == digests["runner"]
    attempt.refresh_from_db()
    assert attempt.image_digest == digests["runner"]
    page = client.get(attempt.get_absolute_url()).content.decode()
    assert digests["runner"] in page
    api = client.get(f"/api/attempts/{attempt.public_id}", **auth).json()
    assert api["image_digest"] == digests["runner"]
    if backend == "bwrap":
        kinds = {lv.name: lv for lv in cache.all_levels()}
        level = kinds[level_name(task_image_id(image))]
        assert level.tree.is_dir() and level.repo_digest == digests["runner"]


# --- Without the engine: skopeo and umoci make the tree (sandbox/environments/oci_trees.py) ---


def on_engine(reference: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", reference], capture_output=True)
    return done.returncode == 0


@pytest.mark.bwrap
@pytest.mark.django_db
def test_with_the_engine_path_off_an_attempt_runs_on_bubblewrap_from_the_registrys_tree(
    seeded,
    root: Path,
    artifacts_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client,
) -> None:
    from django.urls import reverse

    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from sandbox.environments import oci_trees
    from tasks_app.images import task_image_pull
    from tasks_app.models import Task

    reg, digests, _ = seeded
    image = f"{reg.host}/runner/marked:1"
    forget(image)
    monkeypatch.setenv(oci_trees.SOURCE_ENV, "registry")
    task_yaml(tmp_path, "tree_from_registry", image, "registry-tree")
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    task = Task.objects.get(task_id="tree_from_registry")
    # The pull the attempt would make, ahead (as ab pull-images does), its progress read from
    # the task page's endpoint while it runs; the attempt then finds the tree made.
    endpoint = reverse("task-image-progress", args=[task.suite.name, task.task_id])
    seen: list[dict] = []
    task_image_pull(
        task=task,
        fetch=oci_trees.pull_tree,
        progress=lambda _: seen.append(client.get(endpoint).json()),
    )
    running = [p for p in seen if p["state"] == "pulling"]
    assert running and not any(p["final"] for p in running), seen
    assert all(p["layers"] >= 1 and p["bytes_total"] > 0 for p in running), running
    assert max(p["bytes_done"] for p in running) > 0
    assert all(f"of {eviction.human(p['bytes_total'])}" in p["line"] for p in running)
    ended = client.get(endpoint).json()
    assert ended["state"] == "done" and ended["final"] and ended["digest"] == digests["runner"]
    assert ended["bytes_done"] == ended["bytes_total"] == running[-1]["bytes_total"]
    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant("baseline"))
    attempt = attempt_execute(attempt, backend="bwrap")
    # The task's tests pass in the tree (the image's file and its ENV): a passing baseline.
    assert attempt.failure_reason_id == "BASELINE_NOT_FAILING", attempt.error_text
    assert attempt.image_digest == digests["runner"]
    task.refresh_from_db()
    assert task.image_digest == digests["runner"] and task.image_source == image
    # The engine was never asked: it still lacks the image, and the level says "registry".
    assert not on_engine(image)
    [level] = [lv for lv in cache.all_levels() if lv.kind == "image"]
    assert level.via == oci_trees.VIA and level.repo_digest == digests["runner"]
    assert "REGISTRY_MARKER=from-the-registry" in level.image_config["Env"]
    assert (level.tree / "etc/registry-marker").read_text().startswith("marked-")
    assert (level.tree / "workspace").is_dir() and (level.tree / "etc/passwd").exists()


def test_a_tree_from_the_registry_goes_through_the_mirror_and_is_made_once(
    seeded, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox.environments import oci_trees

    reg, digests, run = seeded
    monkeypatch.setenv(registry.MIRRORS_ENV, f"docker.io={reg.host}")
    seen: list[registry.Progress] = []
    pulled = oci_trees.pull_tree("agentbench-test/ok:1", progress=seen.append)
    assert pulled.source == f"{reg.host}/agentbench-test/ok:1"
    assert pulled.repo_digest == digests["mirror"] and pulled.owned and pulled.layers == 1
    assert seen and seen[-1].layers_done == 1 and seen[-1].bytes_done == seen[-1].bytes_total
    tree = oci_trees.tree_of(pulled.image_id)
    assert (tree.path / "etc/marker").read_text() == f"tiny-{run}\n"
    assert tree.path.name == level_name(pulled.image_id)
    inode = tree.path.stat().st_ino
    again = oci_trees.pull_tree("agentbench-test/ok:1")
    assert again.seconds == 0.0 and not again.owned and again.image_id == pulled.image_id
    assert oci_trees.tree_of(again.image_id).path.stat().st_ino == inode
    # Never the engine's to remove: prune leaves it (the engine does not hold it).
    assert not [i for i in eviction.prune(dry_run=True, recipe=0) if i.kind == "image"]


@pytest.mark.parametrize("case", ["not found", "unauthorized", "wrong architecture"])
def test_a_tree_from_the_registry_fails_with_the_engine_paths_reasons(
    seeded, guarded, root: Path, case: str
) -> None:
    from sandbox.environments import oci_trees

    reg, _, _ = seeded
    reference = {
        "not found": f"{reg.host}/tiny/none:1",
        "unauthorized": f"{guarded.host}/tiny/ok:1",
        "wrong architecture": f"{reg.host}/tiny/arm:1",
    }[case]
    with pytest.raises(registry.PullError) as caught:
        oci_trees.pull_tree(reference, retries=1)
    assert caught.value.reason == case, str(caught.value)
    assert str(caught.value).startswith(f"[{case}] ")
    assert not [lv for lv in cache.all_levels() if lv.kind == "image"]


@pytest.mark.django_db
def test_the_task_page_shows_a_pull_under_way_and_polls_it_escaped(client, auth) -> None:
    from django.urls import reverse

    from tasks_app.images import progress_of
    from tasks_app.models import Suite, Task

    suite = Suite.objects.create(name=f"pull-page-{uuid.uuid4().hex[:6]}")
    reference = "127.0.0.1:5000/o/<b>bold</b>:1"
    state = registry.Progress(reference, layers=3, layers_done=1, bytes_done=10_000_000)
    state.bytes_total, state.eta_sec, state.status = 30_000_000, 4.0, "Downloading"
    task = Task.objects.create(
        suite=suite,
        task_id="pulling_now",
        docker_image=reference,
        image_status=state.line(),
        image_progress=progress_of(state),
    )
    page = client.get(task.get_absolute_url()).content.decode()
    endpoint = reverse("task-image-progress", args=[suite.name, task.task_id])
    assert f'data-image-progress="{endpoint}"' in page and "js/image_progress.js" in page
    assert "1/3 layers, 10 MB of 30 MB, ~4 s left (Downloading)" in page
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert '<progress max="30000000" value="10000000">' in page
    got = client.get(endpoint).json()
    assert (got["state"], got["final"], got["layers_done"], got["eta_sec"]) == (
        "pulling",
        False,
        1,
        4.0,
    )
    api = client.get(f"/api/tasks/{task.public_id}", **auth).json()
    assert api["image_progress"]["bytes_total"] == 30_000_000
    # The pull's process went away: after a while the page stops waiting for it.

    Task.objects.filter(pk=task.pk).update(image_progress=progress_of(state) | {"updated_at": 1.0})
    assert client.get(endpoint).json()["state"] == "stalled"


@pytest.mark.django_db
def test_ab_pull_images_makes_the_trees_from_the_registry_when_asked(
    seeded, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from benchsite.cli.main import main
    from sandbox.environments import oci_trees
    from tasks_app.models import Task

    reg, digests, _ = seeded
    image = f"{reg.host}/tiny/ok:1"
    forget(image)
    monkeypatch.setenv(oci_trees.SOURCE_ENV, "registry")
    suite = f"registry-trees-{uuid.uuid4().hex[:6]}"
    task_yaml(tmp_path, "tree_by_cli", image, suite)
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    assert main(["pull-images", suite]) == 0
    assert f"tree_by_cli: {image} -> {digests['tiny']} (pulled from {image} in" in (
        capsys.readouterr().out
    )
    task = Task.objects.get(task_id="tree_by_cli")
    assert task.image_digest == digests["tiny"] and task.image_progress["state"] == "done"
    assert not on_engine(image)
    assert main(["pull-images", suite]) == 0
    assert f"-> {digests['tiny']} (its tree already made)" in capsys.readouterr().out
    monkeypatch.setenv(oci_trees.SOURCE_ENV, "skopeo")
    assert main(["pull-images", suite]) == 1
    assert "IMAGE_TREES_FROM='skopeo': expected one of" in capsys.readouterr().err
