"""An engine image becomes a root-filesystem tree the bubblewrap backend runs on
(sandbox/environments/image_trees.py): exported once per image ID into the environments
cache, with the mount points the sandbox needs, under the disk budget, and a task naming the
image runs on it as on Docker.

The image is built here from the runner image (one per module, shared by its tests: an xdist
group) with no /workspace and no /home/agent, and an ENV of its own, so the tests see the
mount points added and the image's environment applied."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from sandbox.environments import cache, eviction
from sandbox.environments.image_trees import ImageTreeError, leased_tree, tree_for_image
from tests.support.pipeline_fixtures import (
    git_repo,
    import_tasks,
    write_task,
)
from tests.support.registry_fixtures import tiny_image
from tests.support.swebench_cache_fixtures import new_root

RUNNER = "agentbench/py-runner:0.1.0"
pytestmark = [pytest.mark.docker, pytest.mark.bwrap]


def build_image(tag: str, lines: list[str]) -> str:
    """``docker build`` ``tag`` from a Dockerfile of ``lines``; returns the image ID."""
    dockerfile = "\n".join(lines) + "\n"
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"],
        input=dockerfile,
        text=True,
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def own_image():
    """An image of the runner's files minus /workspace and /home/agent, with an ENV."""
    tag = f"agentbench-test/image-tree-{uuid.uuid4().hex[:10]}:1"
    image_id = build_image(
        tag,
        [
            f"FROM {RUNNER}",
            "USER root",
            "RUN rm -rf /workspace /home/agent && echo from-the-image > /etc/image-marker",
            "ENV IMAGE_TREE_MARKER=set-by-the-image",
        ],
    )
    yield tag, image_id
    subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True)


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch):
    """A cache root of the test's own (reachable by the sandbox uid)."""
    path = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(path))
    monkeypatch.delenv(eviction.BUDGET_ENV, raising=False)
    yield path
    # No images of this root's prefix were made: its files are all there is to remove.
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def test_it_exports_an_image_once_into_a_level_of_the_cache(own_image, root: Path) -> None:
    tag, image_id = own_image
    tree = tree_for_image(tag)
    assert tree.path == root / "trees" / f"image-{image_id.removeprefix('sha256:')}"
    assert (tree.path / "etc/image-marker").read_text() == "from-the-image\n"
    for mount_point in ("workspace", "home/agent", "tmp", "proc", "dev", "testbed"):
        assert (tree.path / mount_point).is_dir(), mount_point
    assert "IMAGE_TREE_MARKER=set-by-the-image" in tree.env
    level = cache.read_level(tree.path.name)
    assert level is not None and level.kind == "image" and level.image == image_id
    assert level.tree_bytes and level.tree_bytes > 10_000_000
    inode = tree.path.stat().st_ino
    # By digest of the same image (its ID): the same tree, not exported again.
    again = tree_for_image(image_id)
    assert again.path == tree.path and again.path.stat().st_ino == inode
    assert [lv.name for lv in cache.all_levels()] == [tree.path.name]


def test_a_sandbox_runs_on_the_tree_with_the_images_environment(
    own_image, root: Path, tmp_path: Path
) -> None:
    from sandbox.base import SandboxConfig
    from sandbox.bwrap_backend import BwrapSandbox

    tag, _ = own_image
    with leased_tree(tag) as tree:
        config = SandboxConfig(
            name=f"imgtree-{uuid.uuid4().hex[:10]}",
            workspace=tmp_path / "ws",
            memory_mb=256,
            allow_network=False,
            env=tree.env_dict(),
        )
        with BwrapSandbox(config, rootfs=tree.path) as sandbox:
            done = sandbox.exec(
                "cat /etc/image-marker; echo $IMAGE_TREE_MARKER; id -un; "
                "echo written > /workspace/out.txt; touch /etc/nope",
                timeout=60,
            )
    lines = done.stdout.splitlines()
    assert lines == ["from-the-image", "set-by-the-image", "agent"], done
    assert "Read-only file system" in done.stderr
    assert (tmp_path / "ws/out.txt").read_text() == "written\n"


def test_an_unknown_image_is_named(root: Path) -> None:
    with pytest.raises(ImageTreeError) as caught:
        tree_for_image("agentbench-test/no-such-image:404")
    assert caught.value.reason == "no image"
    assert "agentbench-test/no-such-image:404" in str(caught.value)


def test_trees_stay_within_the_budget_and_a_leased_one_is_never_evicted(
    root: Path, tmp_path: Path
) -> None:
    # Two small images of their own (one file each): the budget is about trees, not sizes.
    run = uuid.uuid4().hex[:10]
    tag = f"agentbench-test/image-tree-{run}:budget-1"
    second = f"agentbench-test/image-tree-{run}:budget-2"
    tiny_image(tag, tmp_path / "one", "first")
    tiny_image(second, tmp_path / "two", "second")
    try:
        first = tree_for_image(tag)
        level = cache.read_level(first.path.name)
        assert level is not None and level.tree_bytes
        # Room for one tree and a half: the second evicts the first, least recently used.
        budget = int(level.tree_bytes * 1.5)
        other = tree_for_image(second, max_bytes=budget)
        assert not first.path.exists() and other.path.is_dir()
        log = (root / eviction.EVICTION_LOG).read_text()
        assert f"evicted image level {first.path.name}" in log
        # Held by an attempt, it stays; an export the budget cannot hold beside it says so.
        with leased_tree(second, max_bytes=budget), pytest.raises(ImageTreeError) as caught:
            tree_for_image(tag, max_bytes=level.tree_bytes // 2)
        assert caught.value.reason == "over the disk budget"
        assert other.path.is_dir() and not first.path.exists()
        # An export whose real size then passes the budget keeps its fresh tree (its caller
        # is about to run on it) and logs the overrun, as the offline builds do.
        with leased_tree(second, max_bytes=budget):
            kept = tree_for_image(tag, max_bytes=budget)
            assert kept.path.is_dir() and other.path.is_dir()
        assert "nothing left to evict" in (root / eviction.EVICTION_LOG).read_text()
    finally:
        for name in (tag, second):
            subprocess.run(["docker", "image", "rm", "--force", name], capture_output=True)


def test_prune_removes_the_tree_of_an_image_gone_from_the_engine(
    root: Path, tmp_path: Path
) -> None:
    tag = f"agentbench-test/image-tree-{uuid.uuid4().hex[:10]}:gone"
    tiny_image(tag, tmp_path, "gone")
    tree = tree_for_image(tag)
    subprocess.run(["docker", "image", "rm", "--force", tag], check=True, capture_output=True)
    items = eviction.prune(dry_run=False, recipe=0)
    assert [(i.what, i.kind, i.skipped) for i in items if i.kind == "image"] == [
        (tree.path.name, "image", "")
    ]
    assert "gone from the engine" in items[0].why
    assert not tree.path.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_task_naming_its_image_runs_on_it_on_both_backends(
    own_image, root: Path, artifacts_root: Path, tmp_path: Path, backend: str
) -> None:
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task

    tag, _ = own_image
    commit = git_repo(
        tmp_path / "repo",
        {
            "test_x.py": "import os\n\ndef test_x():\n"
            "    assert open('/etc/image-marker').read() == 'from-the-image\\n'\n"
            "    assert os.environ['IMAGE_TREE_MARKER'] == 'set-by-the-image'\n"
        },
    )
    task_id = f"own_image_{backend}"
    write_task(
        tmp_path / "tasks",
        task_id,
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: "{tag}", workdir: /workspace, timeout_sec: 60}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    task = Task.objects.get(task_id=task_id)
    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant("baseline"))
    attempt = attempt_execute(attempt, backend=backend)
    # The baseline ran the task's tests in the image: they pass (the marker and the ENV are
    # there), which a baseline reports as "tests pass before the fix".
    assert attempt.failure_reason_id == "BASELINE_NOT_FAILING", attempt.error_text
    if backend == "bwrap":
        assert any(lv.kind == "image" for lv in cache.all_levels())
