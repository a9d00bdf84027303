"""The SWE-bench tasks of an imported suite, by name: what ``ab swebench build`` builds and
``ab validate-suite`` validates."""

from __future__ import annotations

from tasks_app.models import Suite, Task, TaskSource


class NotSwebenchSuite(ValueError):
    pass


def swebench_suite_tasks(suite_name: str, instance_ids: list[str] | None = None) -> list[Task]:
    """The SWE-bench tasks of an imported suite (all, or the ids given). Raises
    NotSwebenchSuite naming what is missing."""
    suite = Suite.objects.filter(name=suite_name).first()
    if suite is None:
        raise NotSwebenchSuite(f"no suite {suite_name!r} (import it with ab import-swebench)")
    tasks = list(Task.objects.for_suite(suite).filter(source=TaskSource.SWEBENCH))
    if not tasks:
        raise NotSwebenchSuite(f"suite {suite_name!r} holds no SWE-bench task")
    if instance_ids:
        by_id = {t.task_id: t for t in tasks}
        unknown = [i for i in instance_ids if i not in by_id]
        if unknown:
            raise NotSwebenchSuite(f"suite {suite_name!r} has no instance {', '.join(unknown)}")
        tasks = [by_id[i] for i in instance_ids]
    return sorted(tasks, key=lambda t: t.task_id)
