"""SWE-bench instances that bring their own Dockerfile (``ab import-swebench --dockerfiles``):
the instance's image is built by the engine from its folder, keyed by the folder's content
(``sandbox.environments.dockerfile``), instead of an offline build or an official image. Gold
validation and ``ab swebench build`` build it ahead; the attempts then find it built (a no-op)
in their ``environment_build`` stage, after checking the folder is still what was imported."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.environments.build import BuildOutcome
    from sandbox.environments.handles import Source
    from tasks_app.models import Task


# An instance's own image build may install a whole project's dependencies.
BUILD_TIMEOUT_SEC = 1800


def own_dockerfile(task: Task) -> dict[str, str] | None:
    """The task's own build context ({"context", "key"}), or None."""
    from tasks_app.swebench.task_folders import dockerfile_of

    return dockerfile_of(task.spec) if isinstance(task.spec, dict) else None


def changed_since_import(context: Path, key: str) -> str:
    """Why the instance's folder is not what was imported ("" when it is): the attempt would
    run an image other than the one its task records."""
    from sandbox.environments import dockerfile

    try:
        now = dockerfile.context_key(context, dockerfile_text=dockerfile.dockerfile_text(context))
    except (OSError, dockerfile.DockerfileBuildError) as exc:
        return f"[task-changed] the instance folder {context} cannot be read: {exc}; re-import it"
    if now != key:
        return (
            f"[task-changed] the instance folder {context} changed since its import; re-import "
            "it (ab import-swebench --dockerfiles) so the attempt runs what the task records"
        )
    return ""


def build_instance(task: Task) -> tuple[BuildOutcome, Source | None]:
    """Build ``task``'s own Dockerfile (or find it built): the outcome the validation
    reports, and the environment to lease until its attempts end (None on a failure)."""
    from sandbox.environments import dockerfile, eviction
    from sandbox.environments.build import BuildOutcome
    from sandbox.environments.handles import DOCKERFILE, Source

    own = own_dockerfile(task)
    assert own is not None
    changed = changed_since_import(Path(own["context"]), own["key"])
    if changed:
        return BuildOutcome(task.task_id, "failed", changed), None
    try:
        image = dockerfile.build(
            Path(own["context"]),
            timeout_sec=BUILD_TIMEOUT_SEC,
            max_bytes=eviction.max_bytes_from_env(),
        )
    except dockerfile.DockerfileBuildError as exc:
        tail = dockerfile.build_log_tail(own["key"]) if exc.log_path else ""
        return BuildOutcome(task.task_id, "failed", str(exc), log_tail=tail), None
    status = "cached" if image.reused else "built"
    outcome = BuildOutcome(task.task_id, status, f"Dockerfile image {image.tag}")
    return outcome, Source(DOCKERFILE, image.key, image=image.tag)
