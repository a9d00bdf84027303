"""Root-filesystem trees of engine images, for the bubblewrap backend.

An image on the local Docker engine (pulled from a registry, built from a Dockerfile, loaded)
becomes a tree bubblewrap runs on read-only, like an offline-built SWE-bench instance tree: the
engine's export of a container created from it (never started), unpacked as root so owners and
modes stay, plus the mount points the sandbox binds over a read-only root (an image need not
have ``/workspace`` or ``/home/agent``).

The tree is a level of the environments cache (``cache.py``), kind ``image``: at
``<cache>/trees/image-<image id>``, keyed by the image ID (the same content always gives the
same tree, whatever tag named it), counted in the disk budget (``SWEBENCH_CACHE_MAX_GB``) and
evicted least recently used first by ``eviction.make_room``, never while a use lease is held
(``leased_tree``). Built in a work folder beside it and renamed (``trees.staging``): a reader
sees a whole tree or none. The record keeps the image's ``Env``, working directory and user,
which an engine applies when it runs the image and bubblewrap must apply itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments import cache, eviction, trees
from sandbox.environments.repos import locked

KIND = "image"
# Where the sandbox mounts things over the read-only root (sandbox/bwrap_backend.py): bwrap
# cannot make a mount point in a read-only tree, so the tree has them all. ``workspace`` and
# ``testbed`` are the workspaces of task.yaml tasks and SWE-bench instances.
MOUNT_DIRS = ("proc", "dev", "tmp", "mnt", "run", "home/agent", "workspace", "testbed")
# Files bound over: the sandbox's account files, and the resolver of a networked command.
MOUNT_FILES = ("etc/passwd", "etc/group", "etc/resolv.conf", "etc/hosts")
EXPORT_TIMEOUT_SEC = 3600


class ImageTreeError(RuntimeError):
    """An image could not become a tree; ``reason`` names why in a word or two (``no image``,
    ``over the disk budget``, ``export failed``), the message says the rest."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"[{reason}] {message}")
        self.reason = reason


@dataclass(frozen=True)
class ImageTree:
    """A tree made from an image: where it is, and what running the image would set."""

    path: Path
    image_id: str
    env: tuple[str, ...] = ()  # the image's Config.Env ("KEY=value")
    workdir: str = ""
    user: str = ""

    def env_dict(self) -> dict[str, str]:
        pairs = (item.partition("=") for item in self.env)
        return {key: value for key, _, value in pairs if key}


def level_name(image_id: str) -> str:
    """The cache level name of an image's tree: ``image-<hex of its ID>``."""
    return f"{KIND}-{image_id.removeprefix('sha256:')}"


def inspect_image(image: str) -> dict:
    """``docker image inspect`` of ``image`` (a tag, digest reference or ID)."""
    done = subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True)
    if done.returncode != 0:
        words = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise ImageTreeError("no image", f"no image {image} on the Docker engine: {words[0]}")
    return json.loads(done.stdout)[0]


def tree_for_image(
    image: str,
    *,
    max_bytes: int | Callable[[], int | None] | None = eviction.max_bytes_from_env,
    report: Callable[[str], None] | None = None,
) -> ImageTree:
    """The root-filesystem tree of local engine image ``image`` (tag, ``name@sha256:...`` or
    ID), exported once per image ID and cached. ``max_bytes``: the cache's budget (default
    ``SWEBENCH_CACHE_MAX_GB``). Raises ImageTreeError naming the reason.

    The caller that runs from the tree holds its use lease (``leased_tree``), else eviction
    may remove it meanwhile."""
    budget = max_bytes() if callable(max_bytes) else max_bytes
    info = inspect_image(image)
    name = level_name(info["Id"])
    path = cache.trees_dir() / name
    if not path.is_dir():
        with locked(name):  # the level's build lock (Level.lock_name)
            if not path.is_dir():
                _build(image, info, path, max_bytes=budget, report=report)
    cache.touch(name)
    return _described(path, info)


@contextlib.contextmanager
def leased_tree(image: str, **kwargs) -> Iterator[ImageTree]:
    """``tree_for_image`` held under a use lease for the block (never evicted meanwhile)."""
    for _ in range(3):
        tree = tree_for_image(image, **kwargs)
        with cache.lease(tree.path.name):
            if tree.path.is_dir():  # not evicted between the build and the lease
                yield tree
                return
    raise ImageTreeError("evicted", f"the tree of {image} was evicted three times in a row")


def _described(path: Path, info: dict) -> ImageTree:
    config = info.get("Config") or {}
    return ImageTree(
        path=path,
        image_id=info["Id"],
        env=tuple(config.get("Env") or ()),
        workdir=config.get("WorkingDir") or "",
        user=config.get("User") or "",
    )


def _build(
    image: str,
    info: dict,
    path: Path,
    *,
    max_bytes: int | None,
    report: Callable[[str], None] | None,
) -> None:
    """Export ``info``'s image into ``path`` within the budget, and record the level."""
    size = int(info.get("Size") or 0)
    need_room(size, max_bytes=max_bytes, what=f"the tree of {image}", report=report)
    started = time.monotonic()
    with trees.staging(path) as work:
        export_into(info["Id"], work)
        add_mount_points(work)
    # The record of its pull (pulled.py), when it was pulled here, stays: one level.
    level = cache.read_level(path.name) or cache.Level(
        path.name, KIND, info["Id"].removeprefix("sha256:"), built_at=time.time()
    )
    level.image = info["Id"]
    level.seconds = round(time.monotonic() - started, 1)
    level.tree_bytes = cache.own_tree_bytes(path, [])
    cache.write_level(level)
    # Room for what it really took (the image's size was an estimate), never by evicting the
    # tree just made: its caller is about to use it.
    with cache.lease(path.name):
        eviction.make_room(max_bytes=max_bytes, report=report)


def need_room(
    need: int, *, max_bytes: int | None, what: str, report: Callable[[str], None] | None = None
) -> None:
    """Evict until ``need`` more bytes fit the budget; ImageTreeError ``over the disk budget``
    when they cannot (what is left is in use, or ``need`` alone is over it)."""
    if max_bytes is None:
        return
    eviction.make_room(max_bytes=max_bytes, need=need, report=report)
    total = eviction.snapshot(measure_missing=False).total
    if total + need > max_bytes:
        raise ImageTreeError(
            "over the disk budget",
            f"{what} needs {eviction.human(need)} and the cache holds {eviction.human(total)} "
            f"it cannot evict, over {eviction.BUDGET_ENV}={max_bytes / eviction.GB:g}",
        )


def export_into(image_id: str, dest: Path) -> None:
    """Unpack the filesystem of a container created from ``image_id`` (never started) into
    ``dest``, as root with numeric owners (the image's users, whatever the host's are)."""
    from sandbox.docker_engine import EXPORT_LABEL, MANAGED_LABEL

    created = subprocess.run(
        [
            "docker",
            "create",
            "--network",
            "none",
            "--label",
            f"{MANAGED_LABEL}=1",
            "--label",
            f"{EXPORT_LABEL}={os.getpid()}",
            "--entrypoint",
            "",
            image_id,
            "true",
        ],
        capture_output=True,
        text=True,
    )
    if created.returncode != 0:
        raise ImageTreeError("export failed", f"docker create {image_id}: {created.stderr.strip()}")
    container = created.stdout.strip()
    try:
        with tempfile.TemporaryFile() as complaints:
            export = subprocess.Popen(
                ["docker", "export", container], stdout=subprocess.PIPE, stderr=complaints
            )
            untar = subprocess.run(
                [
                    "tar",
                    "--extract",
                    "--numeric-owner",
                    "--same-owner",
                    "--preserve-permissions",
                    f"--directory={dest}",
                    "--file=-",
                ],
                stdin=export.stdout,
                capture_output=True,
                text=True,
                timeout=EXPORT_TIMEOUT_SEC,
            )
            assert export.stdout is not None
            export.stdout.close()
            export.wait()
            complaints.seek(0)
            engine_words = complaints.read().decode(errors="replace").strip()
    finally:
        subprocess.run(["docker", "rm", "--force", container], capture_output=True)
    if export.returncode != 0 or untar.returncode != 0:
        words = engine_words or untar.stderr.strip()[-500:]
        full = "No space left on device" in untar.stderr
        raise ImageTreeError(
            "disk full" if full else "export failed", f"export of {image_id} failed: {words}"
        )


def add_mount_points(tree: Path) -> None:
    """Make the folders and files the sandbox mounts over (empty; a link there is replaced
    only when it points nowhere inside the tree, since bwrap would follow it out)."""
    for rel in MOUNT_DIRS:
        target = tree / rel
        if target.is_symlink() and not _inside(tree, target):
            target.unlink()
        if not target.exists():
            target.mkdir(parents=True, mode=0o755)
    (tree / "tmp").chmod(0o1777)
    for rel in MOUNT_FILES:
        target = tree / rel
        if target.is_symlink():
            target.unlink()  # e.g. resolv.conf -> /run/systemd/...: the mount replaces it
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(mode=0o644)


def _inside(tree: Path, link: Path) -> bool:
    """Whether ``link``, resolved inside ``tree`` as its root, lands on a folder in it."""
    target = os.readlink(link)
    base = tree if target.startswith("/") else link.parent
    resolved = (base / target.lstrip("/")).resolve()
    return resolved.is_dir() and resolved.is_relative_to(tree.resolve())
