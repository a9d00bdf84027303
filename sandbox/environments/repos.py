"""Offline git copies of SWE-bench repositories (the ``SWEBENCH_REPOS`` folder).

The folder holds ``<owner>__<name>.git.tar.gz`` archives or ``<owner>__<name>.git`` bare
repositories (layout: /work/shared/swebench/repos/README.md). An archive is unpacked once into
a cache folder named by the archive's sha256, with a limit on the bytes it may expand to, so a
hostile or corrupt archive cannot fill the disk. Nothing here touches the network: the commits
of a repository the folder lacks are fetched by ``repo_fetch.NetworkRepoSource``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE_ROOT = Path("/var/lib/agentbench/swebench")
# An archive may expand to at most this many bytes (the largest Lite dev archive holds ~40 MB).
MAX_UNPACKED_BYTES = 4 * 1024**3


class RepoError(RuntimeError):
    """A repository or commit an instance needs is missing or unusable: says which."""


def cache_root() -> Path:
    return Path(os.environ.get("SWEBENCH_CACHE_DIR") or CACHE_ROOT)


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold an exclusive lock named ``name`` (one builder per key, also across processes)."""
    folder = cache_root() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def repo_stem(repo: str) -> str:
    """The archive name stem of "owner/name": "owner__name"."""
    return repo.replace("/", "__")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class RepoSource:
    """Where the bare repositories of a ``SWEBENCH_REPOS`` folder are found (and unpacked)."""

    def __init__(self, folder: Path | str, *, max_unpacked_bytes: int = MAX_UNPACKED_BYTES):
        self.folder = Path(folder)
        self.max_unpacked_bytes = max_unpacked_bytes
        self._resolved: dict[str, tuple[Path, str]] = {}

    def bare_repo(self, repo: str, *, instance_id: str = "") -> tuple[Path, str]:
        """(path of the bare repository, its content id) for "owner/name".

        The content id is the archive's sha256, or for a bare folder the list of its refs: it
        goes into the build keys so that a new copy of the repository rebuilds what used it.
        """
        if repo in self._resolved:
            return self._resolved[repo]
        stem = repo_stem(repo)
        archive = self.folder / f"{stem}.git.tar.gz"
        bare = self.folder / f"{stem}.git"
        who = f"instance {instance_id}: " if instance_id else ""
        if bare.is_dir():
            found = (bare, "refs:" + _refs_digest(bare))
        elif archive.is_file():
            digest = sha256_file(archive)
            found = (self._unpack(archive, stem, digest), "sha256:" + digest)
        else:
            raise RepoError(
                f"{who}repository {repo} is not in {self.folder} "
                f"(expected {archive.name} or {bare.name})"
            )
        self._resolved[repo] = found
        return found

    def check_commit(self, repo: str, commit: str, *, instance_id: str, what: str) -> Path:
        """The bare repository of ``repo`` after checking it holds ``commit``."""
        bare, _ = self.bare_repo(repo, instance_id=instance_id)
        probe = subprocess.run(
            ["git", "-C", str(bare), "cat-file", "-e", f"{commit}^{{commit}}"],
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            raise RepoError(
                f"instance {instance_id}: repository {repo} ({bare}) has no {what} {commit}"
            )
        return bare

    def read_file(self, repo: str, commit: str, path: str, *, instance_id: str) -> str | None:
        """The text of ``path`` at ``commit``, or None when the commit has no such file."""
        bare = self.check_commit(repo, commit, instance_id=instance_id, what="commit")
        shown = subprocess.run(
            ["git", "-C", str(bare), "show", f"{commit}:{path}"], capture_output=True
        )
        if shown.returncode != 0:
            return None
        return shown.stdout.decode("utf-8", errors="replace")

    def close(self) -> None:
        """Let go of what the source holds (nothing here; a network source's leases)."""

    def commit_date(self, repo: str, commit: str, *, instance_id: str) -> str:
        """The committer date of ``commit`` (ISO 8601 with its offset)."""
        bare = self.check_commit(repo, commit, instance_id=instance_id, what="commit")
        shown = subprocess.run(
            ["git", "-C", str(bare), "log", "-1", "--format=%cI", commit],
            capture_output=True,
            text=True,
        )
        if shown.returncode != 0 or not shown.stdout.strip():
            raise RepoError(f"instance {instance_id}: no date for {repo} commit {commit}")
        return shown.stdout.strip()

    def _unpack(self, archive: Path, stem: str, digest: str) -> Path:
        target = cache_root() / "repos" / digest[:32]
        bare = target / f"{stem}.git"
        if bare.is_dir():
            return bare
        with locked(f"repo-{digest[:32]}"):
            if bare.is_dir():
                return bare
            target.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f"{digest[:12]}.", dir=target.parent))
            try:
                _extract_limited(archive, work, self.max_unpacked_bytes)
                if not (work / f"{stem}.git").is_dir():
                    raise RepoError(f"{archive} does not hold a folder {stem}.git")
                work.rename(target)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return bare


def _extract_limited(archive: Path, dest: Path, limit: int) -> None:
    total = 0
    try:
        with tarfile.open(archive, mode="r|gz") as tar:
            for member in tar:
                total += max(member.size, 0)
                if total > limit:
                    raise RepoError(
                        f"{archive} expands to more than {limit} bytes (the unpack limit): refused"
                    )
                tar.extract(member, dest, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RepoError(f"{archive} is not a readable .tar.gz: {exc}") from exc


def _refs_digest(bare: Path) -> str:
    refs = subprocess.run(
        ["git", "-C", str(bare), "for-each-ref", "--format=%(objectname) %(refname)"],
        capture_output=True,
        text=True,
    )
    return hashlib.sha256(refs.stdout.encode()).hexdigest()[:32]
