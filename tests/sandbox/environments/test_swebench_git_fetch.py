"""SWE-bench repositories over the network: an instance whose repository has no archive here
is built from the commits it needs, fetched shallow by sha from a git server.

The server is a real ``git daemon`` on loopback serving marshmallow's repository, made from
the archive in examples/swebench/repos (the same as ../shared/swebench/repos'), with fetching
by sha allowed as GitHub allows it. No test here configures a repositories folder for it.
The end-to-end test builds marshmallow-code__marshmallow-1359 (the instance
tests/sandbox/environments/test_swebench_offline.py builds from the archive) in a cache root of its
own, on the shared cache's base level (tests/support/swebench_cache_fixtures.py), and validates it
on both backends.
"""

from __future__ import annotations

import json
import socket
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from benchsite.cli.main import main
from sandbox.environments import cache, eviction, repo_fetch
from sandbox.environments.repo_fetch import NetworkRepoSource
from sandbox.environments.repos import RepoError
from tasks_app.models import GoldValidation
from tests.support.swebench_cache_fixtures import drop_root, new_root, seed_base
from tests.support.swebench_fixtures import EXAMPLES, LITE_DEV, rows, write_jsonl

INSTANCE = "marshmallow-code__marshmallow-1359"
MARSHMALLOW = "marshmallow-code/marshmallow"
UNKNOWN = "0123456789abcdef0123456789abcdef01234567"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def git_server(tmp_path_factory):
    """``git daemon`` on 127.0.0.1 serving ``marshmallow-code/marshmallow.git``; yields the
    base URL (``git://127.0.0.1:PORT/``) to give as SWEBENCH_GIT_BASE."""
    served = tmp_path_factory.mktemp("git-daemon")
    with tarfile.open(EXAMPLES / "repos" / "marshmallow-code__marshmallow.git.tar.gz") as tar:
        tar.extractall(served, filter="data")
    (served / "marshmallow-code").mkdir()
    bare = served / "marshmallow-code" / "marshmallow.git"
    (served / "marshmallow-code__marshmallow.git").rename(bare)
    for key in ("uploadpack.allowReachableSHA1InWant", "uploadpack.allowAnySHA1InWant"):
        subprocess.run(["git", "-C", str(bare), "config", key, "true"], check=True)
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--export-all",
            f"--base-path={served}",
            "--listen=127.0.0.1",
            f"--port={port}",
            "--reuseaddr",
            str(served),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"git://127.0.0.1:{port}/"
    try:
        for _ in range(100):  # until it listens (readiness, not a timing assertion)
            probe = subprocess.run(
                ["git", "ls-remote", f"{base}{MARSHMALLOW}.git"], capture_output=True
            )
            if probe.returncode == 0:
                break
            assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
            time.sleep(0.1)
        yield base
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def lite_row(instance_id: str, **changes: str) -> dict:
    row = next(r for r in rows(LITE_DEV) if r["instance_id"] == instance_id)
    return row | changes


# --- fetching ----------------------------------------------------------------------------


def test_it_fetches_a_commit_once_and_keeps_it_as_an_archive(git_server, own_cache):
    base_commit = lite_row(INSTANCE)["base_commit"]
    source = NetworkRepoSource(None, base=git_server)

    bare = source.check_commit(MARSHMALLOW, base_commit, instance_id=INSTANCE, what="base_commit")
    again = NetworkRepoSource(None, base="git://127.0.0.1:1/")  # nothing listens there
    cached = again.check_commit(MARSHMALLOW, base_commit, instance_id=INSTANCE, what="base_commit")

    folder = own_cache / "fetched" / "marshmallow-code__marshmallow" / base_commit
    assert bare == cached == folder / "marshmallow-code__marshmallow.git"
    shallow = (bare / "shallow").read_text().split()
    assert shallow == [base_commit]  # one commit, no history
    # The archive beside it, in the SWEBENCH_REPOS layout, holds the same commit.
    with tarfile.open(folder / "marshmallow-code__marshmallow.git.tar.gz") as tar:
        assert "marshmallow-code__marshmallow.git/shallow" in tar.getnames()
    record = json.loads((folder / "fetch.json").read_text())
    assert record["url"] == f"{git_server}{MARSHMALLOW}.git"
    assert source.bare_repo(MARSHMALLOW)[1] == repo_fetch.FETCHED_ID
    assert source.commit_date(MARSHMALLOW, base_commit, instance_id=INSTANCE).startswith("2019-")
    source.close()
    again.close()


def test_it_names_the_repository_the_commit_and_gits_error_when_a_fetch_fails(
    git_server, own_cache, tmp_path
):
    source = NetworkRepoSource(tmp_path, base=git_server)  # an empty repositories folder
    unreachable = NetworkRepoSource(None, base=f"git://127.0.0.1:{free_port()}/")

    with pytest.raises(RepoError) as unknown:
        source.check_commit(MARSHMALLOW, UNKNOWN, instance_id=INSTANCE, what="base_commit")
    with pytest.raises(RepoError) as down:
        unreachable.check_commit(MARSHMALLOW, UNKNOWN, instance_id=INSTANCE, what="base_commit")

    assert str(unknown.value) == (
        f"instance {INSTANCE}: repository {MARSHMALLOW} is not in {tmp_path} (expected "
        "marshmallow-code__marshmallow.git.tar.gz or marshmallow-code__marshmallow.git); "
        f"fetching its base_commit {UNKNOWN} from {git_server}{MARSHMALLOW}.git failed: "
        f"fatal: remote error: upload-pack: not our ref {UNKNOWN}"
    )
    assert str(down.value).startswith(
        f"instance {INSTANCE}: repository {MARSHMALLOW} has no archive (no repositories "
        f"folder); fetching its base_commit {UNKNOWN} from git://127.0.0.1:"
    )
    assert "failed: fatal: unable to connect to 127.0.0.1" in str(down.value)
    assert not list((own_cache / "fetched").glob("*/*"))  # nothing half-fetched is kept


@pytest.mark.django_db
def test_a_build_whose_commit_cannot_be_fetched_fails_with_the_named_reason(
    git_server, own_cache, tmp_path, settings, capsys
):
    settings.SWEBENCH_REPOS = ""
    settings.SWEBENCH_GIT_BASE = git_server
    suite = write_jsonl(tmp_path / "s.jsonl", [lite_row(INSTANCE, base_commit=UNKNOWN)])
    assert main(["import-swebench", str(suite), "--suite", "fetch-unknown"]) == 0
    capsys.readouterr()

    code = main(["swebench", "build", "fetch-unknown", "--backend", "bwrap"])
    out = capsys.readouterr().out

    assert code == 1
    assert (
        f"{INSTANCE}: failed: instance {INSTANCE}: repository {MARSHMALLOW} has no archive "
        f"(no repositories folder); fetching its base_commit {UNKNOWN} from "
        f"{git_server}{MARSHMALLOW}.git failed: fatal: remote error: upload-pack: not our ref"
    ) in out, out
    assert "Traceback" not in out


@pytest.mark.django_db
def test_fetched_commits_count_in_the_budget_and_go_first_but_never_while_leased(
    git_server, own_cache, capsys
):
    base_commit = lite_row(INSTANCE)["base_commit"]
    source = NetworkRepoSource(None, base=git_server)
    source.check_commit(MARSHMALLOW, base_commit, instance_id=INSTANCE, what="base_commit")
    lines: list[str] = []

    snap = eviction.snapshot()
    held = eviction.make_room(max_bytes=1, report=lines.append)  # the build holds its lease
    assert main(["swebench", "du", "--json"]) == 0
    du = json.loads(capsys.readouterr().out)
    source.close()
    freed = eviction.make_room(max_bytes=1, report=lines.append)

    assert snap.fetched_bytes > 0 and snap.total == snap.fetched_bytes
    assert du["fetched"][0]["commit"] == base_commit and du["fetched_bytes"] == snap.total
    assert held == [] and "nothing left to evict (1 level(s) in use)" in lines[0]
    assert freed == [repo_fetch.lease_name(MARSHMALLOW, base_commit)]
    assert lines[1].startswith(f"evicted fetched commit {base_commit} of {MARSHMALLOW} (")
    assert repo_fetch.all_fetched() == []
    assert not cache.use_file(freed[0]).exists()


# --- end to end --------------------------------------------------------------------------


@pytest.fixture
def own_root(monkeypatch):
    """A cache root of the test's own holding the shared cache's base level."""
    root = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    try:
        seed_base(root, docker=True)
        yield root
    finally:
        drop_root(root)


@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_an_instance_with_no_archive_builds_from_the_network_and_is_gold_valid(
    git_server, own_root, tmp_path, settings, capsys
):
    settings.SWEBENCH_REPOS = ""  # no repositories folder at all
    settings.SWEBENCH_GIT_BASE = git_server
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    row = lite_row(INSTANCE)
    suite = write_jsonl(tmp_path / "s.jsonl", [row])
    assert main(["import-swebench", str(suite), "--suite", "lite-fetched"]) == 0
    capsys.readouterr()

    built = main(["swebench", "build", "lite-fetched", "--backend", "docker"])
    built_out = capsys.readouterr().out
    settings.SWEBENCH_GIT_BASE = f"git://127.0.0.1:{free_port()}/"  # the server is gone
    again = main(["swebench", "build", "lite-fetched", "--backend", "docker"])
    again_out = capsys.readouterr().out

    assert built == 0, built_out
    assert f"[1/1] {INSTANCE}: built" in built_out, built_out
    assert again == 0 and f"[1/1] {INSTANCE}: cached" in again_out, again_out
    fetched = {(f.repo, f.commit) for f in repo_fetch.all_fetched()}
    assert fetched == {
        (MARSHMALLOW, row["base_commit"]),
        (MARSHMALLOW, row["environment_setup_commit"]),
    }
    for backend in ("docker", "bwrap"):
        code = main(["validate-suite", "lite-fetched", "--variant", "oracle", "--backend", backend])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"[1/1] {INSTANCE}: valid" in out, out
        gold = GoldValidation.objects.get(task__task_id=INSTANCE, backend=backend)
        assert (gold.status, gold.gold_grade, gold.empty_grade) == ("valid", "FULL", "NO")


def test_prune_removes_the_work_folder_of_a_fetch_that_died_but_not_of_one_under_way(own_cache):
    from sandbox.environments.envspec import RECIPE_VERSION
    from sandbox.environments.repos import locked

    repo_dir = own_cache / "fetched" / "marshmallow-code__marshmallow"
    dead = repo_dir / f".{UNKNOWN}.abc123"
    running = repo_dir / f".{'1' * 40}.def456"
    for folder in (dead, running):
        (folder / "marshmallow-code__marshmallow.git").mkdir(parents=True)

    with locked(f"fetch-marshmallow-code__marshmallow-{'1' * 40}"):  # a fetch under way
        items = eviction.prune(dry_run=False, recipe=RECIPE_VERSION)

    assert [(i.what, i.why) for i in items] == [(str(dead), "left by a fetch that died")]
    assert not dead.exists() and running.is_dir()
