"""A SWE-bench cache root of a test's own, on real levels and real images.

Its base level comes from the shared cache (``/var/lib/agentbench/swebench``, content-keyed,
built there once by the first test that needs it): a hard-link copy of the tree (the build
steps never write into a file they did not create, so the shared tree is never changed) and a
second tag of the image under the test root's own image prefix. Removing either in the test
root (eviction, pruning) removes only the copy and the tag. The env and instance levels above
are built for real in the test root, so eviction and pruning are tested on what they remove
in production, and never touch the shared cache.

The instances are small on purpose: ``tiny_rows`` makes a repository of its own (a bare git
repository with three commits) and instances of it under a specification registered like the
official ones (``TINY_SPECS``: Python 3.9, nothing to install but the venv's own pip,
setuptools and wheel), so each env level is a real venv and each instance level a real
/testbed with its own copy of it, tens of MB each.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from sandbox.environments import cache
from sandbox.environments.build import Builder
from sandbox.environments.repos import CACHE_ROOT, RepoSource
from tests.support.swebench_fixtures import EXAMPLES

REPOS = EXAMPLES / "repos"
# Where the tests' cache roots go: bubblewrap runs attempts as the sandbox uid, which must
# reach the trees (pytest's tmp_path is below a folder only root may enter), and hard-link
# copies of the shared base need the same filesystem.
TEST_ROOTS = CACHE_ROOT.parent / "swebench-tests"
SUITE = "bullseye"
TINY_REPO = "agentbench-test/tiny"
# Two (repo, version) pairs: two env levels; instances of one version share its env level.
TINY_SPECS = {
    "1.0": {"python": "3.9", "test_cmd": "python -m unittest -v"},
    "2.0": {"python": "3.9", "test_cmd": "python -m unittest -v"},
    # Graded like a pytest repository (tests/runs/pipeline/test_swebench_network.py).
    "3.0": {"python": "3.9", "pip_packages": ["pytest"], "test_cmd": "pytest -rA"},
}


def register_tiny_specs() -> None:
    """Make the official specification table know the tiny repository (idempotent)."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    MAP_REPO_VERSION_TO_SPECS[TINY_REPO] = TINY_SPECS


def tiny_repos(folder: Path, committed_at: str | None = None) -> list[str]:
    """A repositories folder holding ``agentbench-test__tiny.git``; returns its three commits,
    made now or at ``committed_at`` (an env level's installs are dated by its commit)."""
    work = folder.parent / "tiny-work"
    work.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    env = dict(os.environ)
    if committed_at:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = committed_at
    subprocess.run([*git, "init", "-q"], check=True)
    commits = []
    for number in range(3):
        (work / "tiny.py").write_text(f"VALUE = {number}\n")
        (work / "test_tiny.py").write_text(
            "import unittest\nimport tiny\n\n\nclass T(unittest.TestCase):\n"
            "    def test_value(self):\n        self.assertEqual(tiny.VALUE, 3)\n"
        )
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", f"commit {number}"], check=True, env=env)
        commits.append(
            subprocess.run(
                [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
    folder.mkdir(parents=True, exist_ok=True)
    bare = folder / "agentbench-test__tiny.git"
    if not bare.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return commits


def tiny_rows(commits: list[str]) -> list[dict]:
    """Three instances: tiny-1 and tiny-2 share version 1.0 (one env level), tiny-3 is 2.0."""
    rows = []
    for number, (version, commit) in enumerate(
        [("1.0", commits[0]), ("1.0", commits[1]), ("2.0", commits[2])], start=1
    ):
        rows.append(
            {
                "instance_id": f"agentbench-test__tiny-{number}",
                "repo": TINY_REPO,
                "version": version,
                "base_commit": commit,
                "environment_setup_commit": commits[0],
                "created_at": f"2024-01-0{number}T00:00:00Z",
                "patch": "",
                "test_patch": "",
                "problem_statement": "make VALUE 3",
                "hints_text": "",
                "FAIL_TO_PASS": '["test_value (test_tiny.T)"]',
                "PASS_TO_PASS": "[]",
            }
        )
    return rows


@contextmanager
def _root(path: Path):
    before = os.environ.get("SWEBENCH_CACHE_DIR")
    os.environ["SWEBENCH_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SWEBENCH_CACHE_DIR", None)
        else:
            os.environ["SWEBENCH_CACHE_DIR"] = before


def new_root() -> Path:
    """A fresh cache root for one test (remove it with ``drop_root``)."""
    TEST_ROOTS.mkdir(parents=True, exist_ok=True)
    TEST_ROOTS.chmod(0o755)
    root = Path(tempfile.mkdtemp(prefix="root-", dir=TEST_ROOTS))
    root.chmod(0o755)
    return root


def drop_root(root: Path) -> None:
    """Remove a test's cache root: its images, then its files."""
    remove_images(root)
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)


def seed_base(root: Path, *, docker: bool = True) -> cache.Level:
    """Give cache root ``root`` the shared cache's bullseye base level (built there first
    when missing); returns the level as ``root`` records it."""
    with _root(CACHE_ROOT):
        shared_tree = Builder(RepoSource(REPOS), docker=docker, max_bytes=None).base(SUITE)
        shared = cache.read_level(shared_tree.name)
        assert shared is not None
        shared_image = shared.image or f"{cache.image_repository('base', SUITE)}:{shared.key}"
    with _root(root):
        tree = cache.trees_dir() / shared_tree.name
        tree.parent.mkdir(parents=True, exist_ok=True)
        if not tree.is_dir():
            subprocess.run(["cp", "-al", str(shared_tree), str(tree)], check=True)
        level = cache.Level(
            shared.name,
            "base",
            shared.key,
            suite=SUITE,
            recipe=shared.recipe,
            seconds=shared.seconds,
            built_at=shared.built_at,
        )
        if docker:
            level.image = f"{cache.image_repository('base', SUITE)}:{shared.key}"
            subprocess.run(["docker", "tag", shared_image, level.image], check=True)
        cache.measure(level)
        cache.write_level(level)
        # The test root's pip cache is the shared one: the same downloads, fetched once.
        (root / "pip-cache").parent.mkdir(parents=True, exist_ok=True)
        shared_pip = CACHE_ROOT / "pip-cache"
        shared_pip.mkdir(parents=True, exist_ok=True)
        if not (root / "pip-cache").exists():
            (root / "pip-cache").symlink_to(shared_pip)
    return level


def remove_images(root: Path) -> None:
    """Every image under ``root``'s prefix (what a test root leaves on the engine)."""
    with _root(root):
        prefix = cache.image_prefix()
    listed = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    mine = [tag for tag in listed if tag.startswith(prefix + "-")]
    # Children first: instance (eval) images before env images before the base's tag.
    order = {"eval": 0, "env": 1, "base": 2}
    mine.sort(key=lambda tag: order.get(tag[len(prefix) + 1 :].split(".", 1)[0], 3))
    for tag in mine:
        subprocess.run(["docker", "image", "rm", tag], capture_output=True)
