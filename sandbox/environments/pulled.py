"""Images pulled into the environments cache: ``registry`` pulls, this module keeps the pull
under the disk budget and on record.

A pulled image is a level of kind ``image`` (``cache.Level``, ``image-<image id>``, the same
level its bubblewrap tree becomes when one is made: ``image_trees``), whose record says what
was asked for, where it came from, the repository digest and when. Its bytes on the engine
count in ``SWEBENCH_CACHE_MAX_GB``; eviction removes it (least recently used, never while
leased) like any level, and the next attempt pulls it again. An image that was already on the
engine (loaded, built, pulled by hand) is not this cache's: it is used, never removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sandbox.environments import cache, eviction, registry
from sandbox.environments.image_trees import KIND, level_name
from sandbox.environments.repos import locked


def ensure_pulled(
    reference: str,
    *,
    progress: Callable[[registry.Progress], None] | None = None,
    max_bytes: int | Callable[[], int | None] | None = eviction.max_bytes_from_env,
    report: Callable[[str], None] | None = None,
    retries: int = registry.RETRIES,
) -> registry.Pulled:
    """Image ``reference`` on the engine, pulled when missing within the budget (see the
    module docstring). Raises registry.PullError naming the reason."""
    budget = max_bytes() if callable(max_bytes) else max_bytes

    def room(need: int) -> int:
        assert budget is not None
        eviction.make_room(max_bytes=budget, need=need, report=report)
        return budget - eviction.snapshot(measure_missing=False).total

    # One pull of a reference at a time on this machine (two attempts of one task).
    with locked(f"pull-{_lock_key(reference)}"):
        pulled = registry.ensure_image(
            reference,
            progress=progress,
            room=room if budget is not None else None,
            retries=retries,
        )
    name = level_name(pulled.image_id)
    if pulled.owned:
        record_pull(pulled)
    else:
        known = cache.read_level(name)
        if known is not None and known.source:  # pulled here before: say so, and when
            pulled.source, pulled.pulled_at = known.source, known.pulled_at
            pulled.repo_digest = pulled.repo_digest or known.repo_digest
    cache.touch(name)
    return pulled


def record_pull(pulled: registry.Pulled) -> cache.Level:
    """Write (or update) the image level's record with the pull."""
    name = level_name(pulled.image_id)
    level = cache.read_level(name) or cache.Level(
        name, KIND, pulled.image_id.removeprefix("sha256:"), tree_bytes=0, built_at=time.time()
    )
    level.image = pulled.image_id
    level.via = ""  # the engine holds it now (a tree made from the registry stays valid)
    level.reference = pulled.reference
    level.source = pulled.source
    level.repo_digest = pulled.repo_digest
    level.pulled_at = pulled.pulled_at
    level.seconds = pulled.seconds
    level.image_bytes = pulled.size
    cache.trees_dir().mkdir(parents=True, exist_ok=True)
    cache.write_level(level)
    return level


def _lock_key(reference: str) -> str:
    import hashlib

    return hashlib.sha256(reference.encode()).hexdigest()[:16]
