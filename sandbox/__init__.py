"""Execution sandboxes: one interface (``sandbox.base.Sandbox``), a Docker and a bubblewrap
backend, chosen by name or automatically. Imports nothing from Django: callers pass settings in.
``sandbox.environments`` builds the environments they run in (SWE-bench instances) offline.

    with open_sandbox(SandboxConfig(name=attempt_id, workspace=path)) as sb:
        result = sb.exec("python -m pytest -q", timeout=60)
"""

from __future__ import annotations

from pathlib import Path

from sandbox.base import ExecResult, Sandbox, SandboxConfig
from sandbox.errors import SandboxError, SandboxPathError, SandboxUnavailable

BACKENDS = ("docker", "bwrap")

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxPathError",
    "SandboxUnavailable",
    "available_backends",
    "open_sandbox",
]


def _reason(backend: str, bwrap_rootfs: Path | None) -> str | None:
    # Each backend module is imported only when asked about: the docker SDK is slow to import
    # and may be missing where only bubblewrap is used.
    if backend == "docker":
        try:
            from sandbox import docker_backend
        except ImportError as exc:
            return f"the docker Python package is not installed ({exc})"
        return docker_backend.unavailable_reason()
    if backend == "bwrap":
        from sandbox import bwrap_backend

        return bwrap_backend.unavailable_reason(bwrap_rootfs)
    raise ValueError(f"unknown sandbox backend {backend!r} (choose auto, docker or bwrap)")


def available_backends(*, bwrap_rootfs: Path | None = None) -> dict[str, str | None]:
    """Backend name -> None if it works here, else the reason it does not."""
    return {name: _reason(name, bwrap_rootfs) for name in BACKENDS}


def open_sandbox(
    config: SandboxConfig, backend: str = "auto", *, bwrap_rootfs: Path | None = None
) -> Sandbox:
    """A sandbox of the named backend (not started: use it as a context manager).

    ``auto`` takes Docker when its engine answers, else bubblewrap. Raises SandboxUnavailable
    with every backend's reason when none can run here. ``bwrap_rootfs`` defaults to the
    ``SANDBOX_BWRAP_ROOTFS`` environment variable, then /var/lib/agentbench/rootfs/py-runner.
    """
    if backend not in ("auto", *BACKENDS):
        raise ValueError(f"unknown sandbox backend {backend!r} (choose auto, docker or bwrap)")
    candidates = BACKENDS if backend == "auto" else (backend,)
    reasons = {}
    for name in candidates:
        reason = _reason(name, bwrap_rootfs)
        if reason is None:
            return _build(name, config, bwrap_rootfs)
        reasons[name] = reason
    detail = "; ".join(f"{name}: {why}" for name, why in reasons.items())
    raise SandboxUnavailable(f"no sandbox backend can run here ({detail})")


def _build(name: str, config: SandboxConfig, bwrap_rootfs: Path | None) -> Sandbox:
    if name == "docker":
        from sandbox.docker_backend import DockerSandbox

        return DockerSandbox(config)
    from sandbox.bwrap_backend import BwrapSandbox

    return BwrapSandbox(config, rootfs=bwrap_rootfs)
