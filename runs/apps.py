from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    """At ready() only hooks the data version's triggers to ``migrate``. Celery is imported by
    the code that sends or runs work (``runs.services.attempts_enqueue``, ``runs.workers``,
    ``/healthz``), so pages and database commands start without it."""

    name = "runs"
    verbose_name = "Runs and attempts"

    def ready(self) -> None:
        # The data version's triggers, after every migrate (runs/data_version.py says why).
        post_migrate.connect(_install_data_version, sender=self)


def _install_data_version(sender, using: str = "default", **kwargs) -> None:
    from runs import data_version

    data_version.install(using)
