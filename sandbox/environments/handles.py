"""The environment of a task, whatever its source, as one handle leased for an attempt.

The pipeline asks ``environment_of(source, tree=...)`` and gets an ``Environment``: keyed by
its source's kind and key (``offline``: the instance level's build key; ``image``: the image
ID, pulled or official; ``dockerfile``: the build context's hash), what the engine runs
(``image``), and on bubblewrap the root filesystem to run on (``tree``, exported once per image
and cached) with the image's own environment variables. For the whole block the environment is
held under its use lease (``cache.lease``): the budget's eviction and ``ab environments prune``
leave it alone. Getting the environment (building, pulling) is each source's own step before
this (``build``, ``pulled``, ``dockerfile``); this holds and describes what is there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from sandbox.environments import cache, dockerfile_store
from sandbox.environments.build import use_built_instance
from sandbox.environments.image_trees import leased_tree, level_name

OFFLINE = "offline"
IMAGE = "image"
DOCKERFILE = "dockerfile"
KINDS = (OFFLINE, IMAGE, DOCKERFILE)


@dataclass(frozen=True)
class Source:
    """Where a task's environment comes from: ``key`` is an instance id (offline), an image
    ID (image) or a context hash (dockerfile, ``image`` then its tag)."""

    kind: str
    key: str
    image: str = ""
    digest: str = ""  # the repository digest an image was pulled by ("" when none)
    # An image whose tree was made straight from the registry (oci_trees: no engine), not
    # exported from the engine.
    from_registry: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown environment source {self.kind!r} (one of {KINDS})")


@dataclass(frozen=True)
class Environment:
    """A task's environment, leased while the block that got it runs."""

    kind: str
    key: str
    lease: str  # the use lease held (its name in the cache)
    image: str = ""  # what the engine runs ("" when only a tree was built)
    tree: str = ""  # the root filesystem bubblewrap runs on ("" when none was asked for)
    env: tuple[str, ...] = ()  # the image's Config.Env, for a sandbox on its tree
    digest: str = ""
    commit: str = ""  # offline: the base commit the instance was built at


@contextlib.contextmanager
def environment_of(source: Source, *, tree: bool) -> Iterator[Environment | None]:
    """The environment of ``source`` held under its lease for the block, with its tree when
    ``tree`` (bubblewrap). None: an offline instance never built here. Raises
    ``image_trees.ImageTreeError`` when an image's tree cannot be made."""
    if source.kind == OFFLINE:
        with use_built_instance(source.key) as built:
            if built is None:
                yield None
                return
            yield Environment(
                OFFLINE,
                built.key,
                Path(built.rootfs).name,
                image=built.image,
                tree=built.rootfs,
                commit=built.base_commit,
            )
        return
    if source.kind == DOCKERFILE:
        lease, image = dockerfile_store.lease_name(source.key), source.image
    else:
        lease, image = level_name(source.key), source.image or source.key
    with contextlib.ExitStack() as stack:
        stack.enter_context(cache.lease(lease))
        found = Environment(source.kind, source.key, lease, image=image, digest=source.digest)
        if tree:
            if source.from_registry:
                from sandbox.environments.oci_trees import tree_of

                made = tree_of(source.key)  # under the lease just taken
            else:
                made = stack.enter_context(leased_tree(image))
            found = replace(found, tree=str(made.path), env=made.env)
        yield found
