"""Sandbox exceptions. The taxonomy maps any SandboxError to SANDBOX_ERROR."""


class SandboxError(Exception):
    """The execution environment itself failed (engine down, image missing, container died)."""


class SandboxUnavailable(SandboxError):
    """No backend can run here (neither a Docker engine nor bubblewrap works)."""
