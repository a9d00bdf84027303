"""Task.python_asked / python_used: the Python a SWE-bench task's specification asks for and
the one used here, filled for the tasks already imported (once, here, rather than by importing
the official harness inside every leaderboard request)."""

from django.db import migrations, models


def fill(apps, schema_editor):
    Task = apps.get_model("tasks_app", "Task")
    tasks = list(Task.objects.filter(source="swebench").only("pk", "spec"))
    if not tasks:
        return
    from sandbox.environments.envspec import approximate_pythons

    known: dict[tuple[str, str], tuple[str, str]] = {}
    for task in tasks:
        spec = task.spec if isinstance(task.spec, dict) else {}
        key = (str(spec.get("repo", "")), str(spec.get("version", "")))
        if key not in known:
            known[key] = approximate_pythons(*key) if all(key) else ("", "")
        task.python_asked, task.python_used = known[key]
    Task.objects.bulk_update(tasks, ["python_asked", "python_used"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0003_gold_validation_environment"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="python_asked",
            field=models.CharField(blank=True, max_length=10),
        ),
        migrations.AddField(
            model_name="task",
            name="python_used",
            field=models.CharField(blank=True, max_length=10),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
