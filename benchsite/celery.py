"""The Celery app. Workers: `celery -A benchsite worker` (or `ab worker`)."""

from __future__ import annotations

import os

from celery import Celery

from benchsite import sqlite_broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")

# The embedded broker (sqla+sqlite) needs kombu's SQL transport with a fix; see the module.
sqlite_broker.register()

app = Celery("benchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The tasks live in runs/workers/tasks.py, not in an app's tasks.py where autodiscovery
# looks by default.
app.autodiscover_tasks(["runs.workers"])
