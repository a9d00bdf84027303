"""A task's own image (``environment.docker_image`` other than the runner's): pulled when the
engine lacks it (``tasks_app.images``: mirrors, retries, the disk budget, recorded on the
task), held under the cache's use lease for the attempt (never evicted meanwhile) and run by
its ID, so the attempt runs what was pulled whatever name a mirror gave it. On Docker the
engine runs it; on bubblewrap it runs from the image's root-filesystem tree
(``sandbox.environments.image_trees``: exported once per image ID, cached under the budget)
with the image's own environment variables.

A failure is the sandbox's (SANDBOX_ERROR, tagged ``[image]``, with the pull's named reason:
not found, unauthorized, wrong architecture, over the disk budget): the agent never got a
sandbox."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from runs.pipeline.plan import TaskPlan
from sandbox.errors import SandboxError

if TYPE_CHECKING:
    from sandbox.environments.handles import Environment, Source
    from sandbox.environments.official_images import OfficialImage
    from tasks_app.models import Task

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
def task_image(
    plan: TaskPlan, *, task: Task, backend: str, default_image: str
) -> Iterator[tuple[TaskPlan, str]]:
    """The plan ready for its image on ``backend`` and the image's digest ("" for the
    runner's): pulled when missing, leased for the block, on bubblewrap with its tree."""
    if plan.image == default_image or plan.is_swebench:
        yield plan, ""
        return
    from sandbox.environments import oci_trees
    from sandbox.environments.handles import IMAGE, Source
    from sandbox.environments.image_trees import ImageTreeError
    from sandbox.environments.registry import PullError
    from tasks_app.images import task_image_pull

    bwrap = runs_on_bwrap(backend)
    # No engine (or IMAGE_TREES_FROM=registry): the tree straight from the registry.
    try:
        fetch = oci_trees.pull_tree if bwrap and oci_trees.from_registry_wanted() else None
    except ValueError as exc:  # the setting's value: said as it is, never a traceback
        raise SandboxError(f"{IMAGE_TAG} image {plan.image}: {exc}") from exc
    try:
        pulled = task_image_pull(task=task, fetch=fetch)
    except PullError as exc:
        raise SandboxError(f"{IMAGE_TAG} image {plan.image}: {exc}") from exc
    except ImageTreeError as exc:
        raise SandboxError(f"{IMAGE_TAG} image {plan.image} on bubblewrap: {exc}") from exc
    digest = pulled.repo_digest or pulled.image_id
    # The one door (handles): the engine's image, on bubblewrap its exported tree; or the tree
    # made straight from the registry when there is no engine (oci_trees).
    source = Source(
        IMAGE,
        pulled.image_id,
        image=pulled.image_id,
        digest=digest,
        from_registry=fetch is not None,
    )
    with _environment(source, plan.image, backend) as env:
        ready = replace(plan, image=env.image)
        if env.tree:
            ready = replace(ready, image_tree=env.tree, image_env=env.env)
        yield ready, digest


@contextlib.contextmanager
def _environment(source: Source, name: str, backend: str) -> Iterator[Environment]:
    """``handles.environment_of`` (the one door to a task's environment, leased for the
    block), its tree asked for on bubblewrap; a tree that cannot be made is the sandbox's
    failure."""
    from sandbox.environments.handles import environment_of
    from sandbox.environments.image_trees import ImageTreeError

    on_bwrap = runs_on_bwrap(backend)
    with contextlib.ExitStack() as stack:
        try:
            env = stack.enter_context(environment_of(source, tree=on_bwrap))
        except ImageTreeError as exc:
            raise SandboxError(f"{IMAGE_TAG} image {name} on bubblewrap: {exc}") from exc
        assert env is not None  # only an offline source has none
        yield env


@contextlib.contextmanager
def built_image(plan: TaskPlan, *, key: str, backend: str) -> Iterator[TaskPlan]:
    """A plan whose image was built here from a Dockerfile (a task.yaml's, a Harbor task's;
    ``key``: its context's hash): leased for the block (never evicted meanwhile), never pulled;
    on bubblewrap with its tree and the image's environment."""
    from sandbox.environments.handles import DOCKERFILE, Source

    with _environment(Source(DOCKERFILE, key, image=plan.image), plan.image, backend) as env:
        yield replace(plan, image_tree=env.tree, image_env=env.env) if env.tree else plan


@contextlib.contextmanager
def official_plan(plan: TaskPlan, official: OfficialImage, *, backend: str) -> Iterator[TaskPlan]:
    """A SWE-bench instance on its official image (``ab swebench build --source image``): run
    by its ID on Docker, from its tree on bubblewrap (the same mounts as an offline-built
    tree: the testbed is copied out of it into the workspace), leased for the block."""
    from sandbox.environments.handles import IMAGE, Source

    digest = official.repo_digest or official.image_id
    source = Source(IMAGE, official.image_id, image=official.image_id, digest=digest)
    with _environment(source, official.name, backend) as env:
        ready = replace(plan, image=env.image, image_digest=env.digest)
        if env.tree:
            ready = replace(ready, rootfs=env.tree, image_tree=env.tree, image_env=env.env)
        yield ready


def env_of(plan: TaskPlan) -> dict[str, str]:
    """The image's own environment, for a sandbox on its tree (an engine sets it itself)."""
    pairs = (item.partition("=") for item in plan.image_env)
    return {key: value for key, _, value in pairs if key}
