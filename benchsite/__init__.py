"""The Django project. The Celery app is loaded when Django sets up (runs.apps.RunsConfig.ready),
not on import of this package, so ``ab --help`` and ``ab list-tasks`` skip Celery and kombu."""


def __getattr__(name: str):
    if name == "celery_app":
        from benchsite.celery import app

        return app
    raise AttributeError(name)


__all__ = ("celery_app",)
