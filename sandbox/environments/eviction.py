"""Keeping the SWE-bench cache within a disk budget, and pruning what nothing names.

**The budget** (``SWEBENCH_CACHE_MAX_GB``, in GB of 10^9 bytes; unset or 0: none) covers the
level trees and their Docker images together (``cache.py`` says how each is counted), the
commits fetched over the network (``repo_fetch.py``) and the images built from Dockerfiles
(``dockerfile_store.py``, each by its whole size). Before a level is built, ``make_room``
frees room for it (its size estimated from the levels of its kind already built) and after the
build for what it really took: least recently used fetched commits first (fetched again in
seconds), then instance levels, then env levels no remaining instance level stands on, then
base levels no env level stands on, a Dockerfile image taking its turn when it was used
longer ago than the level next in line; never a level (or fetched commit, or image) someone
holds a use lease on (an attempt running from it, a build on top of it). Each eviction is
logged (the callback, the module's logger and ``<cache>/evictions.log``). When everything
left is in use the cache stays over the budget and that is logged too: a build is never
failed for it.

**Pruning** (``prune``) removes levels built with an older recipe, levels a newer build
superseded (an instance level no instance record names; an env or base level nothing stands
on whose instances were rebuilt elsewhere), image trees whose image left the engine, images
whose level is gone, work folders of killed builds and instance records whose tree is gone.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.environments import cache, docker_images, dockerfile_store, repo_fetch
from sandbox.environments.cache import Level
from sandbox.environments.repos import cache_root, locked

log = logging.getLogger(__name__)

GB = 10**9
BUDGET_ENV = "SWEBENCH_CACHE_MAX_GB"
# What a level of each kind is assumed to take before one has been measured here (tree and
# image; measured on Lite dev: see the README).
DEFAULT_ESTIMATE = {
    "base": 1_200_000_000,
    "env": 1_000_000_000,
    "instance": 400_000_000,
    "image": 1_000_000_000,
}
EVICTION_LOG = "evictions.log"


class BudgetError(ValueError):
    """``SWEBENCH_CACHE_MAX_GB`` is not a number."""


def max_bytes_from_env() -> int | None:
    """The budget in bytes, or None when there is none."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return None
    try:
        gb = float(raw)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb):
        raise BudgetError(f"{BUDGET_ENV} must be a number of GB, got {raw!r}")
    return int(gb * GB) if gb > 0 else None


def human(n: int | float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", GB), ("MB", 10**6), ("kB", 10**3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}" if unit == "GB" else f"{n / size:.0f} {unit}"
    return f"{int(n)} B"


# --- what the cache holds -------------------------------------------------------------------


@dataclass
class Snapshot:
    """The levels in the cache with their bytes, and this root's level images."""

    levels: list[Level]
    images: list[docker_images.ImageInfo] | None  # None: no Docker engine answers
    image_of: dict[str, docker_images.ImageInfo] = field(default_factory=dict)  # level name ->
    orphans: list[docker_images.ImageInfo] = field(default_factory=list)  # images no level has
    fetched: list[repo_fetch.Fetched] = field(default_factory=list)  # commits fetched
    # Images built from Dockerfiles (dockerfile.py) by this root.
    dockerfiles: list[dockerfile_store.StoredImage] = field(default_factory=list)

    @property
    def fetched_bytes(self) -> int:
        return sum(f.bytes for f in self.fetched)

    @property
    def dockerfile_bytes(self) -> int:
        return sum(i.bytes for i in self.dockerfiles)

    @property
    def tree_bytes(self) -> int:
        return sum(level.tree_bytes or 0 for level in self.levels)

    @property
    def image_bytes(self) -> int:
        return sum(level.image_bytes or 0 for level in self.levels) + sum(
            i.size for i in self.orphans
        )

    @property
    def total(self) -> int:
        return self.tree_bytes + self.image_bytes + self.fetched_bytes + self.dockerfile_bytes

    def above(self, level: Level) -> list[Level]:
        """The levels standing on ``level`` (an instance level of unknown parent stands on
        every env level, to be safe)."""
        return [
            other
            for other in self.levels
            if other.parent == level.name
            or (level.kind == "env" and other.kind == "instance" and not other.parent)
        ]


def snapshot(*, measure_missing: bool = True) -> Snapshot:
    """Read every level's record (measuring and recording the trees never measured) and match
    this root's images to levels by their kind and build key."""
    levels = cache.all_levels()
    for level in levels:
        if level.tree_bytes is None and measure_missing:
            level.tree_bytes = cache.own_tree_bytes(
                level.tree, [b.tree for b in cache.chain(level)]
            )
            _update_record(level)
    images = docker_images.level_images()
    snap = Snapshot(levels=levels, images=images, fetched=repo_fetch.all_fetched())
    if images is None:
        for level in levels:
            level.image_bytes = None
        return snap
    snap.dockerfiles = dockerfile_store.stored_images()
    ours = [i for i in images if _kinds_of(i)]
    by_kind_key = {(kind, i.key): i for i in ours for kind in _kinds_of(i)}
    for level in levels:
        found = by_kind_key.get((level.kind, level.key))
        if found is not None:
            snap.image_of[level.name] = found
    named = {i.id for i in snap.image_of.values()}
    snap.orphans = [i for i in ours if i.id not in named]
    for level in levels:
        image = snap.image_of.get(level.name)
        parent = snap.image_of.get(level.parent) if level.parent else None
        level.image_bytes = (
            None if image is None else max(image.size - (parent.size if parent else 0), 0)
        )
        if level.kind == "image" and level.source and level.via != "registry":  # pulled here
            level.image_bytes = docker_images.image_size(level.image)
    return snap


def own_tags(image: docker_images.ImageInfo) -> list[str]:
    """The tags of ``image`` under this cache root's prefix: the only ones it may remove (the
    same image may be tagged by another root too)."""
    return [tag for tag in image.tags if cache.kind_of_repository(tag.rsplit(":", 1)[0])]


def _kinds_of(image: docker_images.ImageInfo) -> set[str]:
    kinds = set()
    for tag in image.tags:
        kind = cache.kind_of_repository(tag.rsplit(":", 1)[0])
        if kind:
            kinds.add(kind)
    return kinds


def _update_record(level: Level) -> None:
    """Keep what was measured (best effort: the record is only metadata)."""
    try:
        cache.write_level(level)
    except OSError:
        log.warning("cannot write the record of %s", level.name, exc_info=True)


# --- the budget -----------------------------------------------------------------------------


def estimate(kind: str, snap: Snapshot) -> int:
    """Bytes a new level of ``kind`` is expected to take: the median of those built here."""
    sizes = [lv.bytes for lv in snap.levels if lv.kind == kind and lv.tree_bytes]
    return int(statistics.median(sizes)) if sizes else DEFAULT_ESTIMATE[kind]


def make_room(
    *,
    max_bytes: int | None,
    kind: str | None = None,
    need: int = 0,
    report: Callable[[str], None] | None = None,
) -> list[str]:
    """Evict until the cache plus ``need`` bytes (or, given ``kind``, what a new level of that
    kind is expected to take) fits ``max_bytes``; returns the names of the levels evicted."""
    if max_bytes is None:
        return []
    say = report or (lambda _line: None)
    evicted: list[str] = []
    with locked("evict"):  # one evictor at a time, across processes
        snap = snapshot()
        if kind is not None:
            need = estimate(kind, snap)
        busy: set[str] = set()
        while snap.total + need > max_bytes:
            fetched = _next_fetched(snap, skip=busy)
            if fetched is not None:
                with cache.exclusive(fetched.name) as free:
                    if not free:
                        busy.add(fetched.name)
                        continue
                    used = fetched.last_used()
                    repo_fetch.remove(fetched)
                snap.fetched.remove(fetched)
                evicted.append(fetched.name)
                line = (
                    f"evicted fetched commit {fetched.commit} of {fetched.repo} "
                    f"({human(fetched.bytes)}; last used {_ago(used)}) to keep the cache under "
                    f"{BUDGET_ENV}={max_bytes / GB:g} (now {human(snap.total)}, "
                    f"{human(need)} wanted)"
                )
                _log_line(line)
                say(line)
                continue
            candidate = _next_victim(snap, skip=busy)
            built = _next_dockerfile(snap, skip=busy)
            if built is not None and (
                candidate is None or built.last_used <= candidate.last_used()
            ):
                with cache.exclusive(built.name) as free:
                    problem = dockerfile_store.remove(built) if free else "in use"
                if problem:  # in use, or the engine keeps it (a container runs it)
                    busy.add(built.name)
                    continue
                snap.dockerfiles.remove(built)
                evicted.append(built.name)
                line = (
                    f"evicted Dockerfile image {built.tag} ({human(built.bytes)}; last used "
                    f"{_ago(built.last_used)}) to keep the cache under "
                    f"{BUDGET_ENV}={max_bytes / GB:g} (now {human(snap.total)}, "
                    f"{human(need)} wanted)"
                )
                _log_line(line)
                say(line)
                continue
            if candidate is None:
                line = (
                    f"cache over budget: {human(snap.total)} + {human(need)} for the next level "
                    f"> {BUDGET_ENV}={max_bytes / GB:g}; nothing left to evict "
                    f"({len(busy)} level(s) in use)"
                )
                _log_line(line)
                say(line)
                break
            used = candidate.last_used()  # its lease file goes with it
            with cache.exclusive(candidate.name) as free:
                if not free:
                    busy.add(candidate.name)
                    continue
                remove_level(candidate, snap.image_of.get(candidate.name))
            snap.levels.remove(candidate)
            snap.image_of.pop(candidate.name, None)
            evicted.append(candidate.name)
            line = (
                f"evicted {candidate.kind} level {candidate.name} ({human(candidate.bytes)}: "
                f"tree {human(candidate.tree_bytes)}, image {human(candidate.image_bytes)}; "
                f"last used {_ago(used)}) to keep the cache under "
                f"{BUDGET_ENV}={max_bytes / GB:g} (now {human(snap.total)}, "
                f"{human(need)} wanted)"
            )
            _log_line(line)
            say(line)
    return evicted


def _next_fetched(snap: Snapshot, *, skip: set[str]) -> repo_fetch.Fetched | None:
    """The least recently used fetched commit not known to be in use."""
    free = [f for f in snap.fetched if f.name not in skip]
    return min(free, key=lambda f: f.last_used()) if free else None


def _next_dockerfile(snap: Snapshot, *, skip: set[str]) -> dockerfile_store.StoredImage | None:
    """The least recently used Dockerfile image not known to be in use."""
    free = [i for i in snap.dockerfiles if i.name not in skip]
    return min(free, key=lambda i: i.last_used) if free else None


def _next_victim(snap: Snapshot, *, skip: set[str] | frozenset[str]) -> Level | None:
    """Least recently used first: an instance level, else an env level no instance level
    stands on, else a base level no env level stands on."""
    for kind in cache.KINDS[::-1]:
        free = [
            level
            for level in snap.levels
            if level.kind == kind and level.name not in skip and not snap.above(level)
        ]
        if free:
            return min(free, key=lambda level: level.last_used())
    return None


def remove_level(level: Level, image: docker_images.ImageInfo | None = None) -> str:
    """Delete a level: its instance record (when it names this tree), tree, record, image and
    lease file. The caller holds its exclusive lease. Returns the engine's complaint about the
    image ("" when it went)."""
    if level.kind == "instance":
        for record in (cache_root() / "instances").glob("*.json"):
            if _record_rootfs(record) == str(level.tree):
                record.unlink(missing_ok=True)
    subprocess.run(["rm", "-rf", "--one-file-system", str(level.tree)], check=False)
    cache.record_path(level.name).unlink(missing_ok=True)
    problem = ""
    # Pulled here through the engine: ours to remove (a tree from the registry has none).
    if level.kind == "image" and level.source and level.image and level.via != "registry":
        problem = docker_images.remove_image(level.image, force=True)
    if image is not None:
        for tag in own_tags(image):
            problem = docker_images.remove_image(tag) or problem
    cache.use_file(level.name).unlink(missing_ok=True)
    return problem


def _record_rootfs(path: Path) -> str:
    try:
        return str(json.loads(path.read_text()).get("rootfs", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _log_line(line: str) -> None:
    log.info("%s", line)
    try:
        path = cache_root() / EVICTION_LOG
        with open(path, "a") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
    except OSError:
        log.warning("cannot append to the eviction log", exc_info=True)


def _ago(when: float) -> str:
    if not when:
        return "never"
    seconds = max(time.time() - when, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


# --- pruning --------------------------------------------------------------------------------


@dataclass
class PruneItem:
    """Something ``prune`` removes (or would, with ``dry_run``), and why."""

    what: str  # a level name, an image tag or id, a folder or file
    kind: str  # base | env | instance | image | work folder | record
    bytes: int
    why: str
    skipped: str = ""  # why it was left (in use, the engine refused)


def prune(*, dry_run: bool, recipe: int) -> list[PruneItem]:
    """Remove stale levels and images (see the module docstring). ``recipe``: the current
    ``envspec.RECIPE_VERSION``."""
    items: list[PruneItem] = []
    with locked("evict"):
        snap = snapshot()
        stale = _stale_levels(snap, recipe)
        order = sorted(stale.values(), key=lambda s: cache.KINDS.index(s[0].kind), reverse=True)
        staying = {lv.name for lv in snap.levels if lv.name not in stale}
        for level, why in order:  # instance levels first: what stands on a level goes first
            item = PruneItem(level.name, level.kind, level.bytes, why)
            items.append(item)
            above = [lv for lv in snap.above(level) if lv.name in staying]
            if above:
                item.skipped = f"{above[0].name} stays and stands on it"
            elif not dry_run:
                with cache.exclusive(level.name) as free:
                    if free:
                        item.skipped = remove_level(level, snap.image_of.get(level.name))
                    else:
                        item.skipped = "in use"
            if item.skipped:
                staying.add(level.name)
        for image in sorted(snap.orphans, key=_image_order):
            tags = own_tags(image)
            item = PruneItem(tags[0], "image", image.size, "no level of this cache has its key")
            items.append(item)
            if not dry_run:
                item.skipped = next(
                    (p for p in (docker_images.remove_image(t) for t in tags) if p), ""
                )
        items += _prune_leftovers(dry_run)
    return items


def _stale_levels(snap: Snapshot, recipe: int) -> dict[str, tuple[Level, str]]:
    """Level name -> (the level, why it is stale)."""
    records = {
        _record_rootfs(path): path.stem for path in (cache_root() / "instances").glob("*.json")
    }
    stale: dict[str, tuple[Level, str]] = {}
    for level in snap.levels:
        if level.recipe is not None and level.recipe != recipe:
            stale[level.name] = (level, f"built with recipe {level.recipe} (now {recipe})")
        elif level.kind == "instance" and str(level.tree) not in records:
            stale[level.name] = (level, "no instance record names it (a newer build replaced it)")
        elif (
            level.kind == "image"
            and level.via != "registry"  # made without the engine: never on it
            and snap.images is not None
            and not _on_engine(level.image)
        ):
            stale[level.name] = (level, f"its image {level.image[:19]} is gone from the engine")
    # Levels nothing stands on once the stale ones go, superseded by newer builds.
    kept = [lv for lv in snap.levels if lv.name not in stale]
    # Instance id -> the env level its current build stands on.
    by_tree = {str(lv.tree): lv for lv in kept}
    on_env = {
        path.stem: by_tree[tree].parent
        for path in (cache_root() / "instances").glob("*.json")
        if (tree := _record_rootfs(path)) in by_tree
    }
    for level in kept:
        if level.kind == "instance" or any(o.parent == level.name for o in kept):
            continue
        if level.kind == "env":
            served = _served(level)
            moved = [i for i in served if on_env.get(i) and on_env[i] != level.name]
            if not served:
                stale[level.name] = (level, "nothing stands on it, no instance is recorded on it")
            elif len(moved) == len(served):
                stale[level.name] = (
                    level,
                    f"its instances were rebuilt on newer env levels ({len(moved)})",
                )
        elif level.kind == "base":
            newer = [
                lv
                for lv in kept
                if lv.kind == "base"
                and lv is not level
                and lv.suite == level.suite
                and any(o.parent == lv.name for o in kept)
            ]
            if newer:
                why = f"nothing stands on it; {newer[0].name} serves its suite"
                stale[level.name] = (level, why)
    return stale


def _on_engine(image_id: str) -> bool:
    return bool(image_id) and docker_images.image_size(image_id) is not None


def _served(level: Level) -> list[str]:
    """The instances an env level was built for (its record's ``instances``)."""
    return list(level.instances)


def _image_order(image: docker_images.ImageInfo) -> int:
    # Children before parents: an instance image before its env image before its base image.
    kinds = _kinds_of(image)
    return min((cache.KINDS[::-1].index(k) for k in kinds), default=0)


def _prune_leftovers(dry_run: bool) -> list[PruneItem]:
    items = []
    trees = cache.trees_dir()
    for work in sorted(trees.glob(".*")) if trees.is_dir() else []:
        name = work.name[1:].rsplit(".", 1)[0]  # trees.staging: .<level name>.<random>
        level = cache.read_level(name)
        if level is None or not work.is_dir():
            continue
        if _build_lock_free(level.lock_name):
            items.append(PruneItem(str(work), "work folder", 0, "left by a build that died"))
            if not dry_run:
                subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)
    for work in repo_fetch.leftovers():  # .<commit>.<random>: a fetch's work folder
        commit = work.name[1:].split(".", 1)[0]
        if _build_lock_free(f"fetch-{work.parent.name}-{commit}"):
            items.append(PruneItem(str(work), "work folder", 0, "left by a fetch that died"))
            if not dry_run:
                subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)
    for record in sorted((cache_root() / "instances").glob("*.json")):
        rootfs = _record_rootfs(record)
        if not rootfs or not Path(rootfs, "testbed").is_dir():
            items.append(PruneItem(str(record), "record", 0, "its instance level is gone"))
            if not dry_run:
                record.unlink(missing_ok=True)
    return items


def _build_lock_free(name: str) -> bool:
    path = cache_root() / "locks" / f"{name}.lock"
    if not path.exists():
        return True
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
    return True


def other_bytes() -> dict[str, int]:
    """What the cache holds besides levels and fetched commits (not counted in the budget):
    repositories unpacked from the archives folder, and the pip cache."""
    root = cache_root()
    out = {}
    for name in ("repos", "pip-cache"):
        folder = root / name
        if folder.is_dir():
            done = subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True)
            out[name] = int(done.stdout.split()[0]) if done.returncode == 0 else 0
    return out
