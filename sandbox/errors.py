"""Sandbox exceptions. The taxonomy maps any SandboxError to SANDBOX_ERROR."""


class SandboxError(Exception):
    """The execution environment itself failed (engine down, image missing, container died)."""


class SandboxUnavailable(SandboxError):
    """No backend can run here (neither a Docker engine nor bubblewrap works)."""


class SandboxClosed(SandboxError):
    """The harness closed the sandbox (a cancel, a shutdown) while a command ran: a kill by us,
    recorded as INTERRUPTED rather than as a broken environment."""


class SandboxPathError(ValueError):
    """A path given to read_file/write_file/copy_in/copy_out leaves the workspace (``..``, an
    absolute path elsewhere, or a symlink on the way). Bad input from the caller (for example an
    agent's tool call), not a broken environment, hence not a SandboxError."""
