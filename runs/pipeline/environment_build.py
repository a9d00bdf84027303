"""The ``environment_build`` stage: a Dockerfile environment built (or found built) before the
sandbox starts, for a ``task.yaml`` whose ``environment.dockerfile`` names a build context and
for a Harbor task's ``environment/``.

A failure is infrastructure and names its reason (``sandbox.environments.dockerfile``):
``SETUP_TIMEOUT`` past the build timeout, ``SANDBOX_ERROR`` without an engine, else
``SETUP_FAILED`` (a failed build with its log's tail, a context over its limits, an image over
the disk budget). The engine's whole output is kept as the attempt's ``environment_build.log``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from runs.pipeline import artifacts
from runs.pipeline.stages import CommandRun, StageResult
from runs.taxonomy import Reason, Stage
from sandbox.environments import dockerfile

BUILD_LOG = "environment_build.log"
STAGE_NAME = "environment_build"


def build_stage(
    context: Path, *, timeout_sec: float, build: Callable[[], dockerfile.DockerfileImage]
) -> tuple[StageResult, dockerfile.DockerfileImage | None, Path | None]:
    """Run ``build`` (which builds ``context``) as the stage; also gives the image (None on a
    failure) and the build's log (None when no build started)."""
    stage = StageResult(STAGE_NAME, Stage.SETUP)
    started = time.monotonic()
    command = f"docker build {context} (keyed by its content; timeout {timeout_sec:g}s)"
    try:
        image = build()
    except dockerfile.DockerfileBuildError as exc:
        stage.runs.append(
            CommandRun(
                command,
                1,
                "",
                str(exc),
                time.monotonic() - started,
                timed_out=exc.reason == dockerfile.BUILD_TIMEOUT,
                where="host",
            )
        )
        if exc.reason == dockerfile.BUILD_TIMEOUT:
            stage.reason, stage.note = Reason.SETUP_TIMEOUT, f"[timeout] {exc}"
        elif exc.reason == dockerfile.ENGINE_UNAVAILABLE:
            stage.reason, stage.note = Reason.SANDBOX_ERROR, str(exc)
        else:
            stage.reason, stage.note = Reason.SETUP_FAILED, str(exc)
        return stage, None, exc.log_path
    what = "found built (no-op)" if image.reused else f"built in {image.build_seconds:g}s"
    stage.runs.append(
        CommandRun(
            command,
            0,
            f"{image.tag} {what}\nlog: {image.log_path}\n",
            "",
            time.monotonic() - started,
            where="host",
        )
    )
    return stage, image, Path(image.log_path)


def keep_log(folder: Path, image: dockerfile.DockerfileImage | None, log: Path | None) -> None:
    """Keep the engine's output as the attempt's ``environment_build.log``; for an image found
    built whose log the cache no longer holds (its folder removed, the engine's images kept),
    a line saying so. Nothing when no build started."""
    if log is None:
        return
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        if image is None or not image.reused:
            return
        text = (
            f"{image.tag} was found built in the engine; the log of its build is no longer "
            f"in the cache ({log}).\n"
        )
    artifacts.write_text(folder, BUILD_LOG, text)


def task_yaml_stage(
    context: Path, *, timeout_sec: float
) -> tuple[StageResult, dockerfile.DockerfileImage | None, Path | None]:
    """A task.yaml's ``environment.dockerfile``, built as it is (no layer of ours)."""
    from sandbox.environments import eviction

    return build_stage(
        context,
        timeout_sec=timeout_sec,
        build=lambda: dockerfile.build(
            context, timeout_sec=timeout_sec, max_bytes=eviction.max_bytes_from_env()
        ),
    )
