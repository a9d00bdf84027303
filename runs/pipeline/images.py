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
    from sandbox.environments import cache, oci_trees
    from sandbox.environments.image_trees import ImageTreeError, leased_tree, level_name
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
    ready = replace(plan, image=pulled.image_id)
    with contextlib.ExitStack() as stack:
        stack.enter_context(cache.lease(level_name(pulled.image_id)))
        if fetch is not None:
            try:  # held now: evicted between the pull and the lease, it is fetched again
                if not (cache.trees_dir() / level_name(pulled.image_id)).is_dir():
                    pulled = task_image_pull(task=task, fetch=fetch)
                tree = oci_trees.tree_of(pulled.image_id)
            except (PullError, ImageTreeError) as exc:
                raise SandboxError(f"{IMAGE_TAG} image {plan.image} on bubblewrap: {exc}") from exc
            ready = replace(ready, image_tree=str(tree.path), image_env=tree.env)
        elif bwrap:
            try:
                tree = stack.enter_context(leased_tree(pulled.image_id))
            except ImageTreeError as exc:
                raise SandboxError(f"{IMAGE_TAG} image {plan.image} on bubblewrap: {exc}") from exc
            ready = replace(ready, image_tree=str(tree.path), image_env=tree.env)
        yield ready, digest


@contextlib.contextmanager
def built_image(plan: TaskPlan, *, backend: str) -> Iterator[TaskPlan]:
    """A plan whose image the engine already holds, built here (a Dockerfile environment, a
    Harbor task's): never pulled; on bubblewrap with its tree (leased for the block) and the
    image's environment."""
    if plan.rootfs or not runs_on_bwrap(backend):
        yield plan
        return
    from sandbox.environments.image_trees import ImageTreeError, leased_tree

    with contextlib.ExitStack() as stack:
        try:
            tree = stack.enter_context(leased_tree(plan.image))
        except ImageTreeError as exc:
            raise SandboxError(f"{IMAGE_TAG} image {plan.image} on bubblewrap: {exc}") from exc
        yield replace(plan, image_tree=str(tree.path), image_env=tree.env)


@contextlib.contextmanager
def official_plan(plan: TaskPlan, official: OfficialImage, *, backend: str) -> Iterator[TaskPlan]:
    """A SWE-bench instance on its official image (``ab swebench build --source image``): run
    by its ID on Docker, from its tree on bubblewrap (the same mounts as an offline-built
    tree: the testbed is copied out of it into the workspace), leased for the block."""
    from sandbox.environments import cache
    from sandbox.environments.image_trees import ImageTreeError, leased_tree, level_name

    ready = replace(
        plan, image=official.image_id, image_digest=official.repo_digest or official.image_id
    )
    with contextlib.ExitStack() as stack:
        stack.enter_context(cache.lease(level_name(official.image_id)))
        if runs_on_bwrap(backend):
            try:
                tree = stack.enter_context(leased_tree(official.image_id))
            except ImageTreeError as exc:
                raise SandboxError(
                    f"{IMAGE_TAG} image {official.name} on bubblewrap: {exc}"
                ) from exc
            path = str(tree.path)
            ready = replace(ready, rootfs=path, image_tree=path, image_env=tree.env)
        yield ready


def env_of(plan: TaskPlan) -> dict[str, str]:
    """The image's own environment, for a sandbox on its tree (an engine sets it itself)."""
    pairs = (item.partition("=") for item in plan.image_env)
    return {key: value for key, _, value in pairs if key}
