"""Every environment this cache root holds, whatever its source, as one list: the offline
levels (``base``, ``env``, ``instance``: trees and their images), engine images pulled here and
the trees exported from images (``image``), images built from Dockerfiles (``dockerfile``) and
commits fetched over the network (``fetched``). Each is keyed by what it was made from (a
build key, an image ID, a Dockerfile context's hash, a commit), has its own bytes, its last use
(its lease file's mtime) and whether something leases it now.

``ab environments du`` lists them, ``ab environments prune --unused-days N`` removes those not
used for N days and ``--to-gb X`` evicts least recently used first down to X GB: across kinds,
never a leased one, never a level something that stays stands on. The budget's own eviction
(``eviction.make_room``) picks its victims the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sandbox.environments import cache, dockerfile_store, eviction, repo_fetch
from sandbox.environments.cache import Level
from sandbox.environments.eviction import PruneItem, Snapshot
from sandbox.environments.repos import locked

DAY = 86400.0


@dataclass(frozen=True)
class Entry:
    """One environment in the cache."""

    kind: str  # base | env | instance | image | dockerfile | fetched
    key: str
    name: str  # its use lease's name (cache.lease)
    label: str  # what it is for a reader (an instance id, an image reference, a commit)
    tree_bytes: int
    image_bytes: int
    last_used: float
    leased: bool
    parent: str = ""  # a level: the level it stands on

    @property
    def bytes(self) -> int:
        return self.tree_bytes + self.image_bytes


def leased(name: str) -> bool:
    """Whether something holds the use lease ``name`` now (without making its lease file,
    whose mtime is the last use)."""
    if not cache.use_file(name).exists():
        return False
    with cache.exclusive(name) as free:
        return not free


def entries(snap: Snapshot | None = None) -> list[Entry]:
    """Every environment of the cache (``snap``: an eviction snapshot already taken)."""
    snap = snap if snap is not None else eviction.snapshot()
    found = [_level_entry(level) for level in snap.levels]
    found += [
        Entry(
            "dockerfile",
            image.key,
            image.name,
            image.tag,
            0,
            image.bytes,
            image.last_used,
            leased(image.name),
        )
        for image in snap.dockerfiles
    ]
    found += [
        Entry(
            "fetched",
            f.commit,
            f.name,
            f"{f.repo} {f.commit[:12]}",
            f.bytes,
            0,
            f.last_used(),
            leased(f.name),
        )
        for f in snap.fetched
    ]
    return found


def _level_entry(level: Level) -> Entry:
    label = level.instance_id or level.name
    if level.kind == "env" and level.repo:
        label = f"{level.repo} {level.version}"
    elif level.kind == "image":
        label = level.reference or level.image[:19]
        label += " (pulled" + (", tree)" if level.tree.is_dir() else ")") if level.source else ""
    return Entry(
        level.kind,
        level.key,
        level.name,
        label,
        level.tree_bytes or 0,
        level.image_bytes or 0,
        level.last_used(),
        leased(level.name),
        level.parent,
    )


def prune_unused(*, unused_days: float, dry_run: bool) -> list[PruneItem]:
    """Remove every environment not used for ``unused_days`` days, least recently used first
    (see the module docstring)."""
    cutoff = time.time() - unused_days * DAY
    items: list[PruneItem] = []
    with locked("evict"):
        snap = eviction.snapshot()
        old = sorted((e for e in entries(snap) if e.last_used < cutoff), key=lambda e: e.last_used)
        gone: set[str] = set()
        why = f"not used for {unused_days:g} day(s)"
        # A level goes only after what stands on it: passes until nothing more can go.
        pending = list(old)
        while pending:
            progress = False
            for entry in list(pending):
                above = [lv.name for lv in snap.levels if lv.parent == entry.name]
                if any(name not in gone for name in above):
                    continue
                pending.remove(entry)
                progress = True
                item = PruneItem(entry.name, entry.kind, entry.bytes, f"{why} ({entry.label})")
                items.append(item)
                if not dry_run:
                    item.skipped = _remove(entry, snap)
                if not item.skipped:
                    gone.add(entry.name)
            if not progress:
                break
        for entry in pending:
            items.append(
                PruneItem(
                    entry.name,
                    entry.kind,
                    entry.bytes,
                    why,
                    skipped="a level that stays stands on it",
                )
            )
    return items


def shrink_to(max_bytes: int, *, report=None) -> list[str]:
    """Evict least recently used first, across kinds, until the cache fits ``max_bytes``
    (``eviction.make_room``); returns the names of what went."""
    return eviction.make_room(max_bytes=max_bytes, report=report)


def _remove(entry: Entry, snap: Snapshot) -> str:
    """Remove one environment under its exclusive lease: "" when it went, else why not."""
    with cache.exclusive(entry.name) as free:
        if not free:
            return "in use"
        if entry.kind == "dockerfile":
            image = next(i for i in snap.dockerfiles if i.key == entry.key)
            return dockerfile_store.remove(image)
        if entry.kind == "fetched":
            repo_fetch.remove(next(f for f in snap.fetched if f.name == entry.name))
            return ""
        level = next(lv for lv in snap.levels if lv.name == entry.name)
        return eviction.remove_level(level, snap.image_of.get(level.name))
