from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs and attempts"

    def ready(self) -> None:
        # Every Django process (web, worker, DB commands) gets the project's Celery app as the
        # current app before any @shared_task is used; benchsite/__init__ no longer imports it.
        import benchsite.celery  # noqa: F401
