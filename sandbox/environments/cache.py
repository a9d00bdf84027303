"""The offline SWE-bench cache as levels: what each holds, what it stands on, who uses it.

Under ``cache_root()``:

- ``trees/<name>``: a level's root filesystem (``base-<suite>-<key>``, ``env-<repo>-<version>-
  <key>``, ``instance-<id>-<key>``; ``image-<image id>``, an engine image's tree:
  ``image_trees.py``), and ``trees/<name>.build.json`` its record (``Level``: kind, key, the
  level below, its Docker image, the recipe version it was built with, its cold build seconds
  and its own bytes). Records written before this module held only the seconds; ``read_level``
  fills in what the tree itself tells (the level below is found by a file the two share, see
  ``_infer_parent``).
- ``instances/<id>.json``: the last build of each instance (``build.BuiltInstance``).
- ``locks/``: one build lock per level (``repos.locked``) and one **use lease** per level,
  ``use-<name>.lock``: whoever runs from a level (an attempt, a build on top of it) holds a
  shared ``flock`` on it for as long as it does; eviction and pruning take it exclusively
  without waiting, and leave a level alone when they cannot. ``flock`` locks belong to an open
  file, so the lease holds across processes and between threads of one process alike. The
  lease file's mtime is the level's last use (least recently used goes first).

Bytes: a tree counts what ``du`` counts for it after the trees below it (hard links are
counted once: a level's tree shares every file it did not change with the level below); an
image counts the layers it adds over the image below (its ``Size`` minus the parent's), so the
images of a suite add up to what they take once, the base image counted once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from sandbox.environments import docker_images
from sandbox.environments.repos import CACHE_ROOT, cache_root

# Evicted in reverse: an image's tree (exported again in seconds) before an instance level.
KINDS = ("base", "env", "instance", "image")
RECORD_SUFFIX = ".build.json"
DEFAULT_IMAGE_PREFIX = "agentbench/swebench"
# The file each level's tree gets from the level below it unchanged (a hard link), which tells
# a record-less tree what it stands on: the env level writes the pip constraints, the base
# level writes /etc/hostname.
PARENT_MARKERS = {"instance": "etc/agentbench-pip-constraints.txt", "env": "etc/hostname"}


@dataclass
class Level:
    """One level of the cache, as its record says (or its tree tells, for an older record)."""

    name: str
    kind: str  # base | env | instance | image (an engine image's tree: image_trees.py)
    key: str
    parent: str = ""  # the name of the level below ("" for a base, or unknown)
    image: str = ""  # its Docker image tag ("" when only the tree was built; kind image: the
    # ID of the image the tree was exported from, which is not this cache's to remove)
    recipe: int | None = None  # envspec.RECIPE_VERSION it was built with (None: not recorded)
    instance_id: str = ""
    repo: str = ""
    version: str = ""
    suite: str = ""
    seconds: float = 0.0  # the cold build time
    tree_bytes: int | None = None
    image_bytes: int | None = None
    built_at: float = 0.0
    # An env level: the instances built on it (prune tells a superseded env level by them).
    instances: list[str] = field(default_factory=list)
    # An image level pulled here (pulled.py): the reference asked for, the one pulled (a
    # mirror's), the repository digest served and when. Its engine image is then this
    # cache's: counted in the budget and removed with the level.
    reference: str = ""
    source: str = ""
    repo_digest: str = ""
    pulled_at: float = 0.0
    # "registry": the tree came straight from the registry (oci_trees.py: skopeo, umoci), no
    # engine image is the cache's; ``image_config`` then keeps the image's Env, WorkingDir,
    # User and architecture, which bubblewrap applies itself.
    via: str = ""
    image_config: dict = field(default_factory=dict)

    @property
    def tree(self) -> Path:
        return trees_dir() / self.name

    @property
    def lock_name(self) -> str:
        """The name of its build lock (``repos.locked``), as build.py takes it."""
        return f"{self.kind}-{self.key}"

    @property
    def bytes(self) -> int:
        return (self.tree_bytes or 0) + (self.image_bytes or 0)

    def last_used(self) -> float:
        """When an attempt or a build last used it (its lease file's mtime), else when it was
        built."""
        try:
            return use_file(self.name).stat().st_mtime
        except OSError:
            return self.built_at or _mtime(self.tree)


def trees_dir() -> Path:
    return cache_root() / "trees"


def record_path(name: str) -> Path:
    return trees_dir() / f"{name}{RECORD_SUFFIX}"


def use_file(name: str) -> Path:
    return cache_root() / "locks" / f"use-{name}.lock"


def image_prefix() -> str:
    """The repository prefix of this cache root's images: ``agentbench/swebench`` for the
    default root, ``agentbench/swebench-<hash of the root>`` for any other, so two cache roots
    (a test's, the bench's) never share a tag and never prune each other's images."""
    root = cache_root()
    if root.resolve() == CACHE_ROOT.resolve():
        return DEFAULT_IMAGE_PREFIX
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:10]
    return f"{DEFAULT_IMAGE_PREFIX}-{digest}"


def image_repository(kind: str, name: str) -> str:
    """``<prefix>-base.<suite>``, ``<prefix>-env.<repo>.<version>``, ``<prefix>-eval.<id>``."""
    label = {"base": "base", "env": "env", "instance": "eval"}[kind]
    return f"{image_prefix()}-{label}.{name}"


def kind_of_repository(repository: str) -> str | None:
    """The level kind of an image repository of this root's prefix, else None."""
    prefix = image_prefix() + "-"
    if not repository.startswith(prefix):
        return None
    rest = repository[len(prefix) :]
    for kind, label in (("base", "base."), ("env", "env."), ("instance", "eval.")):
        if rest.startswith(label):
            return kind
    return None


# --- records ------------------------------------------------------------------------------


def read_level(name: str) -> Level | None:
    """The level whose tree is ``trees/<name>``, or None when ``name`` names no level."""
    kind = name.split("-", 1)[0]
    if kind not in KINDS or "-" not in name:
        return None
    try:
        data = json.loads(record_path(name).read_text())
    except (OSError, ValueError):
        data = {}
    known = {f.name for f in fields(Level)}
    values = {k: v for k, v in data.items() if k in known}
    level = Level(**{"name": name, "kind": kind, "key": name.rsplit("-", 1)[1], **values})
    if not level.parent and kind in PARENT_MARKERS:
        level.parent = _infer_parent(level)
    return level


def write_level(level: Level) -> None:
    """Write ``level``'s record (atomically: readers see the old or the new one)."""
    path = record_path(level.name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    tmp.write_text(json.dumps(asdict(level), indent=2))
    tmp.rename(path)


def all_levels() -> list[Level]:
    """Every level whose tree is in the cache (work folders of builds under way excluded),
    and every image pulled here whose tree was not made (its record alone)."""
    folder = trees_dir()
    if not folder.is_dir():
        return []
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            level = read_level(entry.name)
        elif entry.name.startswith("image-") and entry.name.endswith(RECORD_SUFFIX):
            name = entry.name.removesuffix(RECORD_SUFFIX)
            level = None if (folder / name).is_dir() else read_level(name)
            level = level if level is not None and level.source else None
        else:
            continue
        if level is not None:
            found.append(level)
    return found


def _infer_parent(level: Level) -> str:
    """The level below ``level``: the one whose tree holds the same inode at the marker."""
    marker = PARENT_MARKERS[level.kind]
    try:
        inode = os.lstat(level.tree / marker).st_ino
    except OSError:
        return ""
    below = "env" if level.kind == "instance" else "base"
    for entry in trees_dir().glob(f"{below}-*"):
        if entry.name.endswith(RECORD_SUFFIX) or entry.name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if os.lstat(entry / marker).st_ino == inode:
                return entry.name
    return ""


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# --- sizes --------------------------------------------------------------------------------


def own_tree_bytes(tree: Path, below: list[Path]) -> int:
    """Disk bytes of ``tree`` not already in the trees ``below`` it (``du`` counts a hard link
    once, for the first argument that holds it)."""
    args = [str(p) for p in below if p.is_dir()] + [str(tree)]
    done = subprocess.run(["du", "-s", "-B1", *args], capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if not lines:
        return 0
    return int(lines[-1].split()[0])


def chain(level: Level) -> list[Level]:
    """The levels below ``level``, lowest first (as far as they are known and present)."""
    below: list[Level] = []
    current = level
    while current.parent:
        parent = read_level(current.parent)
        if parent is None or not parent.tree.is_dir():
            break
        below.insert(0, parent)
        current = parent
    return below


def measure(level: Level) -> Level:
    """Fill in ``level``'s own bytes (tree, and image when it has one)."""
    below = chain(level)
    level.tree_bytes = own_tree_bytes(level.tree, [b.tree for b in below])
    level.image_bytes = None
    if level.image:
        size = docker_images.image_size(level.image)
        if size is not None:
            parent_size = docker_images.image_size(below[-1].image) if below else 0
            level.image_bytes = max(size - (parent_size or 0), 0)
    return level


# --- leases -------------------------------------------------------------------------------


@contextlib.contextmanager
def lease(name: str) -> Iterator[None]:
    """Hold a shared use lease on level ``name`` (waits while the level is being evicted:
    check that its tree is still there once this returns). Marks it used, now and at the end."""
    with _locked_file(use_file(name), fcntl.LOCK_SH) as path:
        _touch(path)
        try:
            yield
        finally:
            _touch(path)


@contextlib.contextmanager
def exclusive(name: str) -> Iterator[bool]:
    """Try to take level ``name``'s lease exclusively without waiting: True when nobody uses
    it (and nobody can start to until the block ends), False when someone does."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_locked_file(use_file(name), fcntl.LOCK_EX | fcntl.LOCK_NB))
        except BlockingIOError:
            got = False
        else:
            got = True
        yield got


def touch(name: str) -> None:
    """Mark level ``name`` used now (a build that found it cached)."""
    path = use_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


@contextlib.contextmanager
def _locked_file(path: Path, operation: int) -> Iterator[Path]:
    """Lock ``path`` (created when missing). An evictor may unlink the file of a level it
    removed: a lock on an unlinked file is no lock, so check that the file locked is still the
    one at ``path`` and start again when it is not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")  # noqa: SIM115 (held open for the lease)
        try:
            fcntl.flock(handle, operation)
        except BaseException:
            handle.close()
            raise
        try:
            same = os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()
    try:
        yield path
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
