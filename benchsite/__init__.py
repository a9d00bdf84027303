"""The Django project. The Celery app is loaded only by code that sends or runs work
(``runs.services.attempts_enqueue``, ``runs.workers``, ``/healthz``, ``celery -A benchsite``),
never on import of this package or at Django set-up: ``ab --help``, ``ab list-tasks``, the pages
and the database commands skip Celery and kombu."""


def __getattr__(name: str):
    if name == "celery_app":
        from benchsite.celery import app

        return app
    raise AttributeError(name)


__all__ = ("celery_app",)
