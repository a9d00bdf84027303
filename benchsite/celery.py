"""The Celery app. Workers: `celery -A benchsite worker` (or `ab worker`)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")

app = Celery("benchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
