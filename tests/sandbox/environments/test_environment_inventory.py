"""One inventory over every environment the cache holds (sandbox/environments/inventory.py)
and one door to a task's environment (``handles.environment_of``):
``ab environments du`` lists a Dockerfile image, an image's tree and a fetched commit with kind,
key, bytes, last use and lease; ``prune --unused-days`` removes by last use across kinds but
never a leased one; the budget's eviction takes the least recently used across kinds (a
Dockerfile image before a level used since).

A cache root of the test's own, real engine images (a one-layer Dockerfile image on the runner
image, a one-file imported image), a real shallow fetch from a local repository."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from benchsite.cli.main import main
from sandbox.environments import cache, dockerfile, eviction, repo_fetch
from sandbox.environments.handles import IMAGE, Source, environment_of
from sandbox.environments.image_trees import tree_for_image
from tests.support.registry_fixtures import tiny_image
from tests.support.swebench_cache_fixtures import TINY_REPO, tiny_repos

pytestmark = [pytest.mark.docker, pytest.mark.django_db]  # db: the `ab swebench` alias
RUNNER = "agentbench/py-runner:0.1.0"
DAY = 86400


def used(name: str, days_ago: float) -> None:
    path = cache.use_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    when = time.time() - days_ago * DAY
    os.utime(path, (when, when))


def du_json(capsys) -> dict:
    assert main(["environments", "du", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_du_lists_every_kind_and_prune_and_eviction_go_by_last_use_across_kinds(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(eviction.BUDGET_ENV, raising=False)
    context = tmp_path / "context"
    context.mkdir()
    (context / "hello.txt").write_text(uuid.uuid4().hex)
    (context / "Dockerfile").write_text(f"FROM {RUNNER}\nCOPY hello.txt /opt/hello.txt\n")
    tiny = f"agentbench-test/inventory-{uuid.uuid4().hex[:8]}:1"
    image_id = tiny_image(tiny, tmp_path / "tiny", "inventory")
    built = None
    try:
        built = dockerfile.build(context, timeout_sec=300)
        tree = tree_for_image(tiny, max_bytes=None)
        commits = tiny_repos(tmp_path / "repos")
        served = tmp_path / "served" / "agentbench-test"
        served.mkdir(parents=True)
        (served / "tiny.git").symlink_to(tmp_path / "repos" / "agentbench-test__tiny.git")
        fetched = repo_fetch.fetch_commit(
            TINY_REPO,
            commits[-1],
            base=f"file://{tmp_path / 'served'}",
            max_unpacked_bytes=10**9,
        )
        used(fetched.name, 20)
        used(dockerfile.lease_name(built.key), 10)
        used(tree.path.name, 5)

        listed = du_json(capsys)["environments"]
        assert [(e["kind"], e["key"]) for e in listed] == [
            ("fetched", commits[-1]),
            ("dockerfile", built.key),
            ("image", image_id.removeprefix("sha256:")),
        ]
        assert all(not e["leased"] and e["bytes"] > 0 for e in listed)
        assert [round((time.time() - e["last_used"]) / DAY) for e in listed] == [20, 10, 5]
        assert main(["environments", "du"]) == 0
        table = capsys.readouterr().out
        assert f"dockerfile {built.tag}" in table and f"fetched {TINY_REPO}" in table
        assert "Dockerfile images" in table

        # Leased (an attempt runs from it) and unused for 10 days: prune leaves it.
        with dockerfile.in_use(built.key):
            used(dockerfile.lease_name(built.key), 10)
            kinds = {e["kind"]: e for e in du_json(capsys)["environments"]}
            assert kinds["dockerfile"]["leased"] and not kinds["image"]["leased"]
            assert main(["environments", "prune", "--unused-days", "7"]) == 0
            pruned = capsys.readouterr().out
        assert f"removed fetched {fetched.name}" in pruned, pruned
        assert f"kept     dockerfile {dockerfile.lease_name(built.key)}: in use" in pruned
        assert not fetched.folder.exists() and tree.path.is_dir()
        kept = subprocess.run(["docker", "image", "inspect", built.tag], capture_output=True)
        assert kept.returncode == 0

        # The budget: the Dockerfile image, used longest ago, goes before the image's tree.
        used(dockerfile.lease_name(built.key), 10)
        used(tree.path.name, 5)
        total = eviction.snapshot().total
        went = eviction.make_room(max_bytes=total - 1)
        assert went == [dockerfile.lease_name(built.key)]
        assert tree.path.is_dir()
        gone = subprocess.run(["docker", "image", "inspect", built.tag], capture_output=True)
        assert gone.returncode != 0
        # The one door to a task's environment: keyed by source kind and key, leased.
        with environment_of(Source(IMAGE, image_id), tree=True) as env:
            assert env is not None
            assert (env.kind, env.key, env.tree) == ("image", image_id, str(tree.path))
            assert eviction.make_room(max_bytes=0) == [] and tree.path.is_dir()
        # The alias keeps its old name.
        assert main(["swebench", "du", "--json"]) == 0
        kinds = [e["kind"] for e in json.loads(capsys.readouterr().out)["environments"]]
        assert kinds == ["image"]
    finally:
        if built is not None:
            subprocess.run(["docker", "image", "rm", "-f", built.tag], capture_output=True)
        subprocess.run(["docker", "image", "rm", "-f", tiny], capture_output=True)
        subprocess.run(
            ["rm", "-rf", "--one-file-system", str(tmp_path / "cache")], capture_output=True
        )
