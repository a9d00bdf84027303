"""A task's own image (``environment.docker_image`` other than the runner's): on Docker the
engine runs it as it is; on bubblewrap it runs from the image's root-filesystem tree
(``sandbox.environments.image_trees``: exported once per image ID, cached under the disk
budget), held under a use lease for the attempt, with the image's own environment variables.

A failure to make the tree is the sandbox's (SANDBOX_ERROR, tagged ``[image]``): the agent
never got a sandbox."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

from runs.pipeline.plan import TaskPlan
from sandbox.errors import SandboxError

IMAGE_TAG = "[image]"


def runs_on_bwrap(backend: str) -> bool:
    """Whether ``backend`` (auto | docker | bwrap) resolves to bubblewrap: auto takes Docker
    when its engine answers (``sandbox.open_sandbox``)."""
    if backend != "auto":
        return backend == "bwrap"
    try:
        from sandbox import docker_backend
    except ImportError:
        return True
    return docker_backend.unavailable_reason() is not None


@contextlib.contextmanager
def task_image(plan: TaskPlan, *, backend: str, default_image: str) -> Iterator[TaskPlan]:
    """The plan ready for its image on ``backend``: on bubblewrap, with the tree of a task's
    own image (leased for the block) and that image's environment."""
    if plan.image == default_image or plan.rootfs or not runs_on_bwrap(backend):
        yield plan
        return
    from sandbox.environments.image_trees import ImageTreeError, leased_tree

    with contextlib.ExitStack() as stack:
        try:
            tree = stack.enter_context(leased_tree(plan.image))
        except ImageTreeError as exc:
            raise SandboxError(f"{IMAGE_TAG} image {plan.image} on bubblewrap: {exc}") from exc
        yield replace(plan, image_tree=str(tree.path), image_env=tree.env)


def env_of(plan: TaskPlan) -> dict[str, str]:
    """The image's own environment, for a sandbox on its tree (an engine sets it itself)."""
    pairs = (item.partition("=") for item in plan.image_env)
    return {key: value for key, _, value in pairs if key}
