"""A task's image from its registry, recorded on the task.

``task_image_pull`` pulls ``Task.docker_image`` when the engine lacks it
(``sandbox.environments.pulled``: mirrors, retries, the disk budget) and keeps on the task
which image it is (the repository digest), where it came from and when; while the pull runs,
``Task.image_status`` holds its progress (the task page shows it), and after a failure the
named reason. The CLI (``ab pull``) and the attempt pipeline both come through here.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from sandbox.environments import registry
from sandbox.environments.image_trees import ImageTreeError
from tasks_app.models import Task

# The task row's progress is written at most this often (a pull reports many events a second).
STATUS_EVERY_SEC = 1.0


def task_image_pull(
    *,
    task: Task,
    reference: str = "",
    progress: Callable[[registry.Progress], None] | None = None,
    fetch: Callable[..., registry.Pulled] | None = None,
) -> registry.Pulled:
    """The task's image (``reference``, by default ``docker_image``) on the engine, pulled
    when missing, and its record on the task. ``fetch``: how (default
    ``pulled.ensure_pulled``, the engine; ``oci_trees.pull_tree`` makes the bubblewrap tree
    straight from the registry). Raises registry.PullError naming the reason (also kept in
    ``image_status``)."""
    from sandbox.environments.pulled import ensure_pulled

    fetch = fetch or ensure_pulled

    last = [0.0]
    latest: dict[str, object] = {}

    def report(state: registry.Progress) -> None:
        if progress is not None:
            progress(state)
        latest.update(progress_of(state))
        now = time.monotonic()
        if now - last[0] >= STATUS_EVERY_SEC:
            last[0] = now
            Task.objects.filter(pk=task.pk).update(
                image_status=state.line()[:500], image_progress=dict(latest)
            )

    try:
        pulled = fetch(reference or task.docker_image, progress=report)
    except (registry.PullError, ImageTreeError) as exc:
        Task.objects.filter(pk=task.pk).update(
            image_status=f"pull failed: {exc}"[:500],
            image_progress=latest
            | {"state": "failed", "reason": exc.reason, "line": f"pull failed: {exc}"[:500]},
        )
        raise
    fields: dict[str, object] = {"image_status": ""}
    if latest:  # pulled now: the last numbers, complete
        done = latest | {"state": "done", "layers_done": latest.get("layers"), "eta_sec": 0}
        done |= {"bytes_done": latest.get("bytes_total"), "seconds": pulled.seconds}
        done["line"] = f"pulled {pulled.repo_digest or pulled.image_id} in {pulled.seconds:g} s"
        fields["image_progress"] = done
    if pulled.pulled_at:  # pulled here (now or before): say from where and when
        fields |= {
            "image_digest": pulled.repo_digest or pulled.image_id,
            "image_source": pulled.source,
            "image_pulled_at": dt.datetime.fromtimestamp(pulled.pulled_at, tz=dt.UTC),
        }
    elif not task.image_digest:  # on the engine already (loaded, built): its digest or ID
        fields |= {"image_digest": pulled.repo_digest or pulled.image_id, "image_source": "local"}
    Task.objects.filter(pk=task.pk).update(**fields)
    for name, value in fields.items():
        setattr(task, name, value)
    return pulled


def progress_of(state: registry.Progress) -> dict[str, object]:
    """A pull's progress as the task page's endpoint gives it (``Task.image_progress``)."""
    return {
        "state": "pulling",
        "reference": state.reference,
        "layers": state.layers,
        "layers_done": state.layers_done,
        "bytes_done": state.bytes_done,
        "bytes_total": state.bytes_total,
        "eta_sec": None if state.eta_sec is None else round(state.eta_sec, 1),
        "status": state.status[:200],
        "attempt": state.attempt,
        "line": state.line()[:500],
        "updated_at": time.time(),
    }


# A pull whose record has not moved for this long is taken as ended (its process is gone).
STALLED_SEC = 300.0


def image_progress(task: Task) -> dict[str, object]:
    """``Task.image_progress`` for the page and its endpoint: ``final`` once the pull ended
    (done, failed, or no word from it for STALLED_SEC), and the digest now recorded."""
    progress = dict(task.image_progress or {})
    state = str(progress.get("state") or "none")
    updated = float(progress.get("updated_at") or 0)  # type: ignore[arg-type]
    if state == "pulling" and updated and time.time() - updated > STALLED_SEC:
        state = "stalled"
        progress["line"] = f"{progress.get('line', '')} (no word from the pull since then)"
    progress["state"] = state
    progress["final"] = state != "pulling"
    progress["digest"] = task.image_digest
    return progress
