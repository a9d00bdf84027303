"""The notices above a leaderboard, each about the rows shown and one line until opened.

Issue 29: a notice listed every approximate instance of the suite (207 lines) above the table,
on every view, also when every row was a published result graded elsewhere (where the
environment here means nothing), and read the Python versions by importing the official
harness inside the request (3 s of CPU). Here a notice concerns only the rows shown and the
tasks of the selection, and reads what the import stored on each task.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Subquery

from runs.results.leaderboard import Leaderboard
from tasks_app.models import GoldValidation, GoldValidationStatus, Task

ENV_APPROXIMATE_LABEL = "env-approximate"  # sandbox.environments.envspec's, without its imports


@dataclass(frozen=True, slots=True)
class ApproximateTask:
    task_id: str
    asked: str  # the Python its specification asks for ("" when not known)
    used: str  # the one its environment is built with here
    state: str  # how it counts: gold-valid, not validated yet, left out
    built: bool  # built on this machine (its task page says the same)


@dataclass(frozen=True, slots=True)
class ApproximateNotice:
    tasks: list[ApproximateTask]

    @property
    def built(self) -> int:
        return sum(t.built for t in self.tasks)

    @property
    def left_out(self) -> int:
        return sum(t.state.endswith("left out") for t in self.tasks)


def graded_here(board: Leaderboard) -> list:
    """The rows whose attempts this harness graded (published results are graded elsewhere)."""
    return [r for r in board.all_rows if not r.is_published]


def approximate_notice(board: Leaderboard) -> ApproximateNotice | None:
    """The instances of the selection on an approximate environment that rows graded here
    attempted (or that gold validation left out), or None when there are none: then the page
    says nothing of environments."""
    results = board.results
    rows = graded_here(board)
    if not rows:
        return None
    approximate = {pk for pk, t in results.tasks.items() if ENV_APPROXIMATE_LABEL in t.labels}
    if not approximate:
        return None  # the selection read every task's labels: no query
    attempted: set[int] = set()
    for r in rows:
        attempted.update(r.score.attempted_keys())
    concerned = approximate & (attempted | set(results.excluded))
    if not concerned:
        return None
    validations = GoldValidation.objects.filter(task=OuterRef("pk"))
    with_python = validations.exclude(python_used="").order_by("backend")
    tasks = (
        Task.objects.filter(pk__in=concerned)
        .annotate(
            gold_valid=Exists(validations.filter(status=GoldValidationStatus.VALID)),
            # Tasks imported before the columns existed and never migrated (none should be):
            # what a gold validation recorded.
            v_asked=Subquery(with_python.values("python_asked")[:1]),
            v_used=Subquery(with_python.values("python_used")[:1]),
        )
        .order_by("task_id")
        .values_list(
            "pk",
            "task_id",
            "repo_commit",
            "python_asked",
            "python_used",
            "v_asked",
            "v_used",
            "gold_valid",
        )
    )
    from sandbox.environments.build import built_instance

    out = []
    for pk, task_id, commit, asked, used, v_asked, v_used, valid in tasks:
        state = (
            "gold patch fails here: left out"
            if pk in results.excluded
            else "gold-valid: counted"
            if valid
            else "not validated yet: counted"
        )
        built = built_instance(task_id)
        out.append(
            ApproximateTask(
                task_id=task_id,
                asked=asked or v_asked or "",
                used=used or v_used or "",
                state=state,
                built=built is not None and built.base_commit == commit,
            )
        )
    return ApproximateNotice(out)
