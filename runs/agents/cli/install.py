"""Build an agent CLI's pinned install once into the content-keyed cache (no Django).

``<root>/<name>-<version>-<key>/`` (root: ``AGENT_INSTALL_ROOT``, default
``/var/lib/agentbench/agents``; key: ``AgentDefinition.install_key``) holds:

- npm: the files the definition keeps from the package's tarball, fetched with ``npm pack``
  (the npm registry, at build time only) and checked against the pinned sha512 integrity;
- pypi: a venv (``venv/``) with the pinned package and requirements, for CLIs that run on
  the worker; or, for a CLI on a Debian Python runtime, its packages in ``site/`` built for
  that Python (``debian_root``);
- debian: a runtime's Debian root, the files it keeps (``debian_root``).

A definition's ``runtime`` (Node from npm, ``AgentDefinition.runtime_part``) is built the same
way into a folder of its own, keyed by its own section, so CLIs that pin the same Node share it.

plus ``manifest.json`` (what was installed, the integrity, pip's freeze, and the sha256 of
every file). A folder is built in a staging folder and renamed into place when complete, under
a lock, so concurrent workers build it once and a crash leaves no half install. Everything is
readable by the sandbox user (it is mounted read-only into sandboxes) and nothing in it is
writable by that user.

Before a cached install is used (mounted into a sandbox, or run on the worker) its files are
checked against the manifest's sha256 (``install_problem``): a changed, missing or added file
(outside a venv's ``__pycache__`` folders, which Python writes at run time), or a manifest
without hashes (built before this check), gets the folder discarded and rebuilt
from the pinned package, whose integrity is checked again; a rebuild that fails is an
``InstallError`` naming what was wrong. Rebuilding rather than refusing: the registry's pinned
package is the truth the cache was made from, so the worker can restore it without an operator,
and the warning in the log says what was found. Hashing Claude Code's 400 MB binary takes about
a second, so a process hashes an install once and afterwards compares each file's inode, size,
mtime and ctime with what it hashed (a write or a rename changes the ctime, which no one but
root can set back): it hashes again only when one of them changed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runs.agents.cli import debian_root
from runs.agents.cli.definition import AgentDefinition

DEFAULT_ROOT = Path("/var/lib/agentbench/agents")
MANIFEST = "manifest.json"
PYCACHE = "__pycache__"
NPM_TIMEOUT_SEC = 900
PIP_TIMEOUT_SEC = 1800


log = logging.getLogger("agentbench.agents")
# Per process: an install folder -> the stat fingerprint of its files when they last hashed
# right (install_problem).
_VERIFIED: dict[str, tuple] = {}


class InstallError(RuntimeError):
    """The install could not be built (the registry, a hash mismatch, pip): names the CLI."""


@dataclass(frozen=True)
class Install:
    definition: AgentDefinition
    path: Path
    built: bool  # False: found in the cache
    seconds: float = 0.0
    # Why the cached folder was discarded and rebuilt (a tampered file), "" otherwise.
    repaired: str = ""

    @property
    def manifest(self) -> dict:
        return json.loads((self.path / MANIFEST).read_text())


def install_root() -> Path:
    return Path(os.environ.get("AGENT_INSTALL_ROOT") or DEFAULT_ROOT)


def cached_install(definition: AgentDefinition, root: Path | None = None) -> Path | None:
    path = (root or install_root()) / definition.install_dir_name
    return path if (path / MANIFEST).is_file() else None


def ensure_install(definition: AgentDefinition, root: Path | None = None) -> Install:
    """The CLI's install, checked against its manifest's hashes; built now if the cache does
    not have it, rebuilt if what it has fails the check (``install_problem``)."""
    root = root or install_root()
    found = cached_install(definition, root)
    if found is not None and install_problem(definition, found) is None:
        return Install(definition, found, built=False)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    started = time.monotonic()
    with _lock(root / f".lock-{definition.install_dir_name}"):
        found = cached_install(definition, root)  # built (or repaired) by another worker
        problem = install_problem(definition, found) if found is not None else None
        if found is not None and problem is None:
            return Install(definition, found, built=False)
        final = root / definition.install_dir_name
        if problem:
            log.warning("agent CLI install %s failed its check (%s): rebuilding", final, problem)
        for leftover in root.glob(f".build-{final.name}-*"):  # a builder that died
            shutil.rmtree(leftover, ignore_errors=True)
        if final.exists():  # failed its check, or a half folder from before manifests
            _discard(final)
        staging = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=root))
        try:
            manifest = _build(definition, staging, root)
            manifest |= {
                "definition": definition.name,  # the first CLI to need it (a runtime is shared)
                "part": definition.part,
                "key": definition.install_key,
            }
            manifest["sha256"] = {n: _sha256(staging / n) for n in _files(staging)}
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
            _readable_by_all(staging)
            staging.rename(final)
        except InstallError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if problem:
                raise InstallError(
                    f"{definition.label}: the cached install failed its check ({problem}) "
                    f"and rebuilding it failed: {exc}"
                ) from exc
            raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _VERIFIED[str(final)] = _fingerprint(final, _watched(final, manifest)) or ()
    seconds = round(time.monotonic() - started, 1)
    return Install(definition, final, built=True, seconds=seconds, repaired=problem or "")


def install_problem(definition: AgentDefinition, path: Path) -> str | None:
    """Why the cached install at ``path`` is not what was built (a file changed, missing or
    added; a manifest of another package or without hashes), or None. Hashes its files the
    first time this process sees them, and again only when their stat changed."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return f"{MANIFEST} unreadable: {exc}"
    hashes = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not isinstance(hashes, dict) or not hashes:
        return f"{MANIFEST} records no sha256 (built before installs were verified)"
    if manifest.get("key") != definition.install_key:
        return f"{MANIFEST} is of another install (key {manifest.get('key')!r})"
    names = sorted(hashes)
    watched = _watched(path, manifest)
    fingerprint = _fingerprint(path, watched)
    if fingerprint is not None and _VERIFIED.get(str(path)) == fingerprint:
        return None
    _VERIFIED.pop(str(path), None)
    # A venv gains __pycache__ files when Python runs it (those pip compiled are hashed).
    extra = sorted(set(_files(path, pycache=False)) - set(names))
    if extra:
        return f"{extra[0]} is not in the manifest"
    for name in names:
        try:
            info = os.lstat(path / name)
        except FileNotFoundError:
            return f"{name} is missing"
        if not stat.S_ISREG(info.st_mode):
            return f"{name} is no longer a regular file"
        if _sha256(path / name) != hashes[name]:
            return f"{name} does not match its sha256 in the manifest"
    _VERIFIED[str(path)] = _fingerprint(path, watched) or ()
    return None


def _watched(top: Path, manifest: dict) -> list[str]:
    """What the stat fingerprint covers: the listed files, the manifest and every folder
    (adding a file changes its folder's mtime) but a venv's ``__pycache__`` ones."""
    names = [*sorted(manifest["sha256"]), MANIFEST]
    for dirpath, dirnames, _ in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != PYCACHE]
        names.append(os.path.relpath(dirpath, top))
    return names


def _files(top: Path, *, pycache: bool = True) -> list[str]:
    """Every regular file under ``top`` but the manifest, relative (links are not followed
    nor listed: a venv's python is one); without ``pycache``, none in a ``__pycache__``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        if not pycache:
            dirnames[:] = [d for d in dirnames if d != PYCACHE]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                found.append(os.path.relpath(path, top))
    return sorted(name for name in found if name != MANIFEST)


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _fingerprint(top: Path, names: list[str]) -> tuple | None:
    """What changes when a file is written, replaced or renamed; None when one is missing."""
    rows = []
    for name in names:
        try:
            info = os.lstat(top / name)
        except FileNotFoundError:
            return None
        rows.append((name, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(rows)


def _discard(folder: Path) -> None:
    """Out of the way at once (a rename), then deleted."""
    aside = folder.with_name(f".discarded-{folder.name}-{os.getpid()}-{time.monotonic_ns()}")
    folder.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(definition: AgentDefinition, staging: Path, root: Path) -> dict:
    kind = definition.spec.install.kind
    if kind == "npm":
        return _build_npm(definition, staging)
    if kind == "debian":
        try:
            return debian_root.build_root(definition.label, definition.spec.install, staging, _run)
        except debian_root.RootError as exc:
            raise InstallError(str(exc)) from exc
    if definition.on_runtime:  # for the runtime's Python, which the build needs first
        runtime = definition.runtime_part()
        assert runtime is not None
        return debian_root.build_site(definition, ensure_install(runtime, root).path, staging, _run)
    return _build_pypi(definition, staging)


def _build_npm(definition: AgentDefinition, staging: Path) -> dict:
    spec = definition.spec.install
    download = staging / ".download"
    download.mkdir()
    ref = f"{spec.package}@{spec.version}"
    result = _run(
        ["npm", "pack", ref, "--json", "--pack-destination", str(download)],
        cwd=download,
        timeout=NPM_TIMEOUT_SEC,
        what=f"{definition.label}: npm pack {ref}",
    )
    try:
        filename = json.loads(result)[0]["filename"]
    except (ValueError, LookupError, TypeError) as exc:
        raise InstallError(f"{definition.label}: npm pack {ref} printed no file name") from exc
    tarball = download / Path(filename).name
    digest = hashlib.sha512()
    with open(tarball, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    integrity = "sha512-" + base64.b64encode(digest.digest()).decode()
    if integrity != spec.integrity:
        raise InstallError(
            f"{definition.label}: {ref} does not match its pinned integrity "
            f"(expected {spec.integrity}, got {integrity})"
        )
    # A kept name ending in "/" is a folder: every file under it (a bundle's chunks).
    folders = tuple(name for name in spec.keep if name.endswith("/"))
    wanted = set(spec.keep) - set(folders)
    with tarfile.open(tarball, "r:gz") as archive:
        members = [
            m
            for m in archive.getmembers()
            if m.name in wanted or (m.name.startswith(folders) and not m.isdir())
        ]
        names = {m.name for m in members}
        missing = wanted - names
        missing |= {f for f in folders if not any(n.startswith(f) for n in names)}
        if missing:
            raise InstallError(f"{definition.label}: {ref} has no {', '.join(sorted(missing))}")
        for member in members:
            if not member.isfile():
                raise InstallError(f"{definition.label}: {member.name} is not a regular file")
            archive.extract(member, staging, filter="data")
    shutil.rmtree(download)
    files = {name: (staging / name).stat().st_size for name in sorted(names)}
    return {
        "kind": "npm",
        "package": spec.package,
        "version": spec.version,
        "integrity": integrity,
        "files": files,
    }


def _build_pypi(definition: AgentDefinition, staging: Path) -> dict:
    spec = definition.spec.install
    python = shutil.which(spec.python) or spec.python
    venv = staging / "venv"
    _run(
        [python, "-m", "venv", str(venv)],
        cwd=staging,
        timeout=300,
        what=f"{definition.label}: python -m venv",
    )
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            *(["--no-deps"] if spec.no_deps else []),
            f"{spec.package}=={spec.version}",
            *spec.requirements,
        ],
        cwd=staging,
        timeout=PIP_TIMEOUT_SEC,
        what=f"{definition.label}: pip install {spec.package}=={spec.version}",
    )
    freeze = _run(
        [str(venv / "bin" / "python"), "-m", "pip", "freeze"],
        cwd=staging,
        timeout=120,
        what=f"{definition.label}: pip freeze",
    )
    version = _run(
        [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version)"],
        cwd=staging,
        timeout=60,
        what="python version",
    )
    return {
        "kind": "pypi",
        "package": spec.package,
        "version": spec.version,
        "python": version.strip(),
        "freeze": freeze.split(),
    }


def _run(argv: list[str], *, cwd: Path, timeout: float, what: str) -> str:
    try:
        result = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError as exc:
        raise InstallError(f"{what}: {argv[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"{what}: no result after {timeout:.0f}s") from exc
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip()[-1500:]
        raise InstallError(f"{what} failed (exit {result.returncode}): {tail}")
    return result.stdout


def _readable_by_all(top: Path) -> None:
    """Folders 0755, files 0644 (0755 when executable): the sandbox user reads, never writes."""
    for dirpath, _dirnames, filenames in os.walk(top):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            mode = os.stat(path).st_mode
            os.chmod(path, 0o755 if mode & 0o111 else 0o644)
