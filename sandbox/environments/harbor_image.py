"""The image a Harbor task runs in: its ``environment/`` build context (or a one-line
``FROM <docker_image>``) built by ``dockerfile`` with one layer of the harness on top.

The layer: ``/logs``, ``/tests`` and ``/solution`` become links into ``HARNESS_DIR`` under /tmp,
since a sandbox's root filesystem is read-only and /tmp is writable; Harbor's verifiers write
``/logs/verifier/reward.txt`` and read ``/tests`` at those fixed paths. No Django here: the
pipeline, ``ab build-environments`` and the task page share it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from sandbox.environments import dockerfile
from sandbox.environments.repos import cache_root

HARNESS_DIR = "/tmp/.harbor"
EXTRA_LAYER = (
    "USER root\n"
    "RUN rm -rf /logs /tests /solution"
    f" && ln -s {HARNESS_DIR}/logs /logs && ln -s {HARNESS_DIR}/tests /tests"
    f" && ln -s {HARNESS_DIR}/solution /solution\n"
)


def context_path(folder: Path | str, docker_image: str = "") -> Path:
    """Where the build context is: the task's environment/, or for ``docker_image`` a folder
    of ours named by the image's hash (made by ``build``)."""
    if not docker_image:
        return Path(folder) / "environment"
    name = hashlib.sha256(docker_image.encode()).hexdigest()[:24]
    return cache_root() / "dockerfiles" / "from-image" / name


def build(
    folder: Path | str, *, docker_image: str = "", timeout_sec: float, max_bytes: int | None
) -> dockerfile.DockerfileImage:
    """Build (or find built) the task's image; raises ``dockerfile.DockerfileBuildError``."""
    context = context_path(folder, docker_image)
    if docker_image:
        context.mkdir(parents=True, exist_ok=True)
        (context / "Dockerfile").write_text(f"FROM {docker_image}\n")
    return dockerfile.build(
        context, timeout_sec=timeout_sec, extra=EXTRA_LAYER, max_bytes=max_bytes
    )


def last_build(folder: Path | str, docker_image: str = "") -> dict | None:
    """The last build of the task's context on this machine (or its failure), if any."""
    return dockerfile.last_build(context_path(folder, docker_image))
