"""Commits fetched over the network, for instances whose repository has no archive here.

An offline build reads a repository from the ``SWEBENCH_REPOS`` folder (``repos.py``). When
the folder has no copy of it (or there is no folder), the commits the build needs (the
``environment_setup_commit``, then the ``base_commit``) are fetched one by one from the
repository's URL, ``https://github.com/<owner>/<name>.git``, whose base one setting rewrites
the way git's ``url.<base>.insteadOf`` does (``SWEBENCH_GIT_BASE=git://mirror:9418/``): a
shallow fetch of exactly that commit (``git fetch --depth 1 <url> <sha>``, which a server
answers when it allows a wanted sha1: GitHub does, ``git daemon`` with
``uploadpack.allowAnySHA1InWant``).

Each fetched commit is kept as an archive in the layout of ``SWEBENCH_REPOS`` and unpacked
beside it, one folder per commit, ``<cache>/fetched/<owner>__<name>/<sha>/``, keyed by the
commit's own sha (git's content address): a second build finds it and touches no network. A
commit never changes, so the levels built from a fetched commit are keyed by their commits
alone (``FETCHED_ID``), whatever the base URL or mirror it came from. The folders count in the
cache's disk budget and go first when it needs room (``eviction.py``: a fetch takes seconds, a
level minutes), never while a build holds them (a use lease, as for levels).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments import cache
from sandbox.environments.repos import (
    MAX_UNPACKED_BYTES,
    RepoError,
    RepoSource,
    cache_root,
    locked,
    repo_stem,
)

DEFAULT_GIT_BASE = "https://github.com/"
# The content id of a fetched repository in the env level's key: its commits (in the key
# already) say what it holds.
FETCHED_ID = "fetched-by-commit"
FETCH_TIMEOUT_SEC = 600
RECORD = "fetch.json"
SHA = re.compile(r"[0-9a-f]{40}")


def repo_url(repo: str, base: str = DEFAULT_GIT_BASE) -> str:
    """``https://github.com/<repo>.git`` with its base ``https://github.com/`` rewritten to
    ``base`` (git's ``insteadOf``)."""
    return f"{base.rstrip('/')}/{repo}.git"


def fetched_dir() -> Path:
    return cache_root() / "fetched"


def commit_dir(repo: str, commit: str) -> Path:
    return fetched_dir() / repo_stem(repo) / commit


def lease_name(repo: str, commit: str) -> str:
    """The use lease (``cache.lease``) a build holds on a fetched commit while it reads it."""
    return f"fetched-{repo_stem(repo)}-{commit}"


class FetchError(RepoError):
    """A commit could not be fetched: ``url`` and ``error`` (git's own words) say why."""

    def __init__(self, repo: str, commit: str, url: str, error: str):
        super().__init__(f"repository {repo}: fetching commit {commit} from {url} failed: {error}")
        self.url, self.error = url, error


@dataclass
class Fetched:
    """One fetched commit in the cache."""

    repo: str
    commit: str
    folder: Path
    url: str = ""
    archive_sha256: str = ""
    fetched_at: float = 0.0
    bytes: int = 0

    @property
    def bare(self) -> Path:
        return self.folder / f"{repo_stem(self.repo)}.git"

    @property
    def archive(self) -> Path:
        return self.folder / f"{repo_stem(self.repo)}.git.tar.gz"

    @property
    def name(self) -> str:
        return lease_name(self.repo, self.commit)

    def last_used(self) -> float:
        try:
            return cache.use_file(self.name).stat().st_mtime
        except OSError:
            return self.fetched_at


class NetworkRepoSource(RepoSource):
    """A ``RepoSource`` that fetches the commits of a repository its folder lacks (``folder``
    may be None: every repository is fetched).

    Every fetched commit it hands out stays under a use lease until ``close``, so eviction
    never takes it from a build reading it."""

    def __init__(
        self,
        folder: Path | str | None,
        *,
        base: str = DEFAULT_GIT_BASE,
        max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
    ):
        super().__init__(folder or "", max_unpacked_bytes=max_unpacked_bytes)
        self.has_folder = folder is not None and str(folder) != ""
        self.base = base
        self._leases = contextlib.ExitStack()
        self._held: set[str] = set()

    def in_folder(self, repo: str) -> bool:
        stem = repo_stem(repo)
        return self.has_folder and (
            (self.folder / f"{stem}.git").is_dir() or (self.folder / f"{stem}.git.tar.gz").is_file()
        )

    def bare_repo(self, repo: str, *, instance_id: str = "") -> tuple[Path, str]:
        if self.in_folder(repo):
            return super().bare_repo(repo, instance_id=instance_id)
        return fetched_dir() / repo_stem(repo), FETCHED_ID

    def check_commit(self, repo: str, commit: str, *, instance_id: str, what: str) -> Path:
        if self.in_folder(repo):
            return super().check_commit(repo, commit, instance_id=instance_id, what=what)
        where = (
            f"is not in {self.folder} (expected {repo_stem(repo)}.git.tar.gz or "
            f"{repo_stem(repo)}.git)"
            if self.has_folder
            else "has no archive (no repositories folder)"
        )
        try:
            fetched = fetch_commit(
                repo, commit, base=self.base, max_unpacked_bytes=self.max_unpacked_bytes
            )
        except FetchError as exc:
            raise RepoError(
                f"instance {instance_id}: repository {repo} {where}; fetching its {what} "
                f"{commit} from {exc.url} failed: {exc.error}"
            ) from exc
        except RepoError as exc:
            raise RepoError(f"instance {instance_id}: {exc}") from exc
        if fetched.name not in self._held:
            self._leases.enter_context(cache.lease(fetched.name))
            self._held.add(fetched.name)
            if read_fetched(fetched.folder) is None:  # evicted before the lease was taken
                self._held.discard(fetched.name)
                return self.check_commit(repo, commit, instance_id=instance_id, what=what)
        return fetched.bare

    def close(self) -> None:
        self._leases.close()
        self._held.clear()


def fetch_commit(repo: str, commit: str, *, base: str, max_unpacked_bytes: int) -> Fetched:
    """The fetched commit ``commit`` of ``repo`` (fetched now when the cache lacks it).

    Raises RepoError naming the repository, the commit, the URL and git's own error."""
    if not SHA.fullmatch(commit):
        raise RepoError(f"repository {repo}: {commit!r} is not a full commit sha to fetch")
    found = read_fetched(commit_dir(repo, commit))
    if found is not None:
        return found
    url = repo_url(repo, base)
    folder = commit_dir(repo, commit)
    with locked(f"fetch-{repo_stem(repo)}-{commit}"):
        found = read_fetched(folder)
        if found is not None:
            return found
        folder.parent.mkdir(parents=True, exist_ok=True)
        for stale in folder.parent.glob(f".{commit}.*"):  # a killed fetch's work folder
            shutil.rmtree(stale, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".{commit}.", dir=folder.parent))
        try:
            _fetch_into(work, repo, commit, url)
            stem = repo_stem(repo)
            archive = work / f"{stem}.git.tar.gz"
            # The archive in the SWEBENCH_REPOS layout: the folder of a fetched repository
            # is a repositories folder an offline machine can be given as it is.
            subprocess.run(
                ["tar", "-czf", str(archive), "-C", str(work), f"{stem}.git"],
                check=True,
                capture_output=True,
            )
            digest = _sha256(archive)
            record = {
                "repo": repo,
                "commit": commit,
                "url": url,
                "archive_sha256": digest,
                "fetched_at": time.time(),
            }
            (work / RECORD).write_text(json.dumps(record, indent=2))
            _check_size(work, max_unpacked_bytes, repo, commit)
            work.chmod(0o755)
            work.rename(folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    fetched = read_fetched(folder)
    assert fetched is not None
    return fetched


def _fetch_into(work: Path, repo: str, commit: str, url: str) -> None:
    stem = repo_stem(repo)
    bare = work / f"{stem}.git"
    env = {
        # No prompt for a login a test or an air-gapped mirror cannot answer: fail instead.
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
    }
    for proxy in (
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "no_proxy",
        "NO_PROXY",
        "GIT_SSL_CAINFO",
    ):
        if proxy in os.environ:
            env[proxy] = os.environ[proxy]
    steps = [
        ["git", "init", "-q", "--bare", str(bare)],
        ["git", "-C", str(bare), "remote", "add", "origin", url],
        ["git", "-C", str(bare), "fetch", "-q", "--depth", "1", "--no-tags", "origin", commit],
        ["git", "-C", str(bare), "cat-file", "-e", f"{commit}^{{commit}}"],
    ]
    for step in steps:
        try:
            done = subprocess.run(
                step, capture_output=True, text=True, env=env, timeout=FETCH_TIMEOUT_SEC
            )
        except subprocess.TimeoutExpired as exc:
            raise FetchError(repo, commit, url, f"timed out after {FETCH_TIMEOUT_SEC}s") from exc
        if done.returncode != 0:
            error = " ".join((done.stderr or done.stdout).split()) or f"exit {done.returncode}"
            raise FetchError(repo, commit, url, error)
    # The fetched ref goes; the commit stays reachable through a tag of its own, so git's
    # housekeeping never drops it.
    subprocess.run(
        ["git", "-C", str(bare), "tag", f"fetched-{commit[:12]}", commit],
        capture_output=True,
        check=True,
    )
    subprocess.run(["git", "-C", str(bare), "remote", "remove", "origin"], capture_output=True)


def _check_size(work: Path, limit: int, repo: str, commit: str) -> None:
    size = folder_bytes(work)
    if size > limit:
        raise RepoError(
            f"repository {repo}: commit {commit} fetched takes {size} bytes, more than the "
            f"unpack limit {limit}: refused"
        )


def read_fetched(folder: Path) -> Fetched | None:
    """The fetched commit in ``folder``, or None when it is not (completely) there."""
    try:
        data = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fetched = Fetched(
        repo=str(data.get("repo", "")),
        commit=str(data.get("commit", "")),
        folder=folder,
        url=str(data.get("url", "")),
        archive_sha256=str(data.get("archive_sha256", "")),
        fetched_at=float(data.get("fetched_at") or 0.0),
    )
    return fetched if fetched.bare.is_dir() else None


def all_fetched(*, measure: bool = True) -> list[Fetched]:
    """Every fetched commit in the cache, with its bytes (archive and unpacked copy)."""
    root = fetched_dir()
    found = []
    for folder in sorted(root.glob("*/*")) if root.is_dir() else []:
        if folder.name.startswith("."):
            continue
        fetched = read_fetched(folder)
        if fetched is not None:
            fetched.bytes = folder_bytes(folder) if measure else 0
            found.append(fetched)
    return found


def leftovers() -> list[Path]:
    """Work folders of fetches that died (a fetch under way holds its lock: see ``prune``)."""
    root = fetched_dir()
    return sorted(root.glob("*/.*")) if root.is_dir() else []


def remove(fetched: Fetched) -> None:
    """Delete a fetched commit (the caller holds its exclusive lease)."""
    shutil.rmtree(fetched.folder, ignore_errors=True)
    cache.use_file(fetched.name).unlink(missing_ok=True)


def folder_bytes(folder: Path) -> int:
    done = subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.returncode == 0 and done.stdout else 0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
