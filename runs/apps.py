from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs and attempts"

    def ready(self) -> None:
        # Every Django process (web, worker, DB commands) gets the project's Celery app as the
        # current app before any @shared_task is used; benchsite/__init__ no longer imports it.
        import benchsite.celery  # noqa: F401

        # The data version's triggers, after every migrate (runs/data_version.py says why).
        post_migrate.connect(_install_data_version, sender=self)


def _install_data_version(sender, using: str = "default", **kwargs) -> None:
    from runs import data_version

    data_version.install(using)
