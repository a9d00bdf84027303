from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Loads nothing at ready(): Celery is imported by the code that sends or runs work
    (``runs.services.attempts_enqueue``, ``runs.workers``, ``/healthz``), so pages and database
    commands start without it."""

    name = "runs"
    verbose_name = "Runs and attempts"
