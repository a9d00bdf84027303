"""Build an agent CLI's pinned install once into the content-keyed cache (no Django).

``<root>/<name>-<version>-<key>/`` (root: ``AGENT_INSTALL_ROOT``, default
``/var/lib/agentbench/agents``; key: ``AgentDefinition.install_key``) holds:

- npm: the files the definition keeps from the package's tarball, fetched with ``npm pack``
  (the npm registry, at build time only) and checked against the pinned sha512 integrity;
- pypi: a venv (``venv/``) with the pinned package and requirements, for CLIs that run on
  the worker.

plus ``manifest.json`` (what was installed, the integrity, pip's freeze). A folder is built in a
staging folder and renamed into place when complete, under a lock, so concurrent workers build
it once and a crash leaves no half install. Everything is readable by the sandbox user (it is
mounted read-only into sandboxes) and nothing in it is writable by that user.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runs.agents.cli.definition import AgentDefinition

DEFAULT_ROOT = Path("/var/lib/agentbench/agents")
MANIFEST = "manifest.json"
NPM_TIMEOUT_SEC = 900
PIP_TIMEOUT_SEC = 1800


class InstallError(RuntimeError):
    """The install could not be built (the registry, a hash mismatch, pip): names the CLI."""


@dataclass(frozen=True)
class Install:
    definition: AgentDefinition
    path: Path
    built: bool  # False: found in the cache
    seconds: float = 0.0

    @property
    def manifest(self) -> dict:
        return json.loads((self.path / MANIFEST).read_text())


def install_root() -> Path:
    return Path(os.environ.get("AGENT_INSTALL_ROOT") or DEFAULT_ROOT)


def cached_install(definition: AgentDefinition, root: Path | None = None) -> Path | None:
    path = (root or install_root()) / definition.install_dir_name
    return path if (path / MANIFEST).is_file() else None


def ensure_install(definition: AgentDefinition, root: Path | None = None) -> Install:
    """The CLI's install, built now if the cache does not have it."""
    root = root or install_root()
    found = cached_install(definition, root)
    if found is not None:
        return Install(definition, found, built=False)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    started = time.monotonic()
    with _lock(root / f".lock-{definition.install_dir_name}"):
        found = cached_install(definition, root)  # built by another worker meanwhile
        if found is not None:
            return Install(definition, found, built=False)
        final = root / definition.install_dir_name
        for leftover in root.glob(f".build-{final.name}-*"):  # a builder that died
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=root))
        try:
            if definition.spec.install.kind == "npm":
                manifest = _build_npm(definition, staging)
            else:
                manifest = _build_pypi(definition, staging)
            manifest |= {"definition": definition.name, "key": definition.install_key}
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
            _readable_by_all(staging)
            if final.exists():  # a half folder from before manifests were written last
                shutil.rmtree(final)
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return Install(definition, final, built=True, seconds=round(time.monotonic() - started, 1))


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_npm(definition: AgentDefinition, staging: Path) -> dict:
    spec = definition.spec.install
    download = staging / ".download"
    download.mkdir()
    ref = f"{spec.package}@{spec.version}"
    result = _run(
        ["npm", "pack", ref, "--json", "--pack-destination", str(download)],
        cwd=download,
        timeout=NPM_TIMEOUT_SEC,
        what=f"{definition.name}: npm pack {ref}",
    )
    try:
        filename = json.loads(result)[0]["filename"]
    except (ValueError, LookupError, TypeError) as exc:
        raise InstallError(f"{definition.name}: npm pack {ref} printed no file name") from exc
    tarball = download / Path(filename).name
    digest = hashlib.sha512()
    with open(tarball, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    integrity = "sha512-" + base64.b64encode(digest.digest()).decode()
    if integrity != spec.integrity:
        raise InstallError(
            f"{definition.name}: {ref} does not match its pinned integrity "
            f"(expected {spec.integrity}, got {integrity})"
        )
    wanted = set(spec.keep)
    with tarfile.open(tarball, "r:gz") as archive:
        members = [m for m in archive.getmembers() if m.name in wanted]
        missing = wanted - {m.name for m in members}
        if missing:
            raise InstallError(f"{definition.name}: {ref} has no {', '.join(sorted(missing))}")
        for member in members:
            if not member.isfile():
                raise InstallError(f"{definition.name}: {member.name} is not a regular file")
            archive.extract(member, staging, filter="data")
    shutil.rmtree(download)
    files = {name: (staging / name).stat().st_size for name in sorted(wanted)}
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
        what=f"{definition.name}: python -m venv",
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
        what=f"{definition.name}: pip install {spec.package}=={spec.version}",
    )
    freeze = _run(
        [str(venv / "bin" / "python"), "-m", "pip", "freeze"],
        cwd=staging,
        timeout=120,
        what=f"{definition.name}: pip freeze",
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
