"""The Docker engine as every Docker module here reaches it: a client, the labels on what we
create, and an engine error as one line.

Its own module so that ``docker_backend`` (the sandbox) and ``docker_images`` (files out of
images, which the backend asks for an image's accounts) both import it one way."""

from __future__ import annotations

import docker

MANAGED_LABEL = "agentbench.managed"
EXPORT_LABEL = "agentbench.export"
ENGINE_TIMEOUT_SEC = 30


def engine_client(timeout: int = ENGINE_TIMEOUT_SEC) -> docker.DockerClient:
    return docker.from_env(timeout=timeout)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
