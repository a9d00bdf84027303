"""``python manage.py seed_demo``: deterministic demo runs for the pages (idempotent)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from runs.demo.seed import seed_demo


class Command(BaseCommand):
    help = "Create demo runs of several models on custom-dev and a SWE-bench suite (idempotent)."

    def handle(self, *args, **options) -> None:
        report = seed_demo()
        self.stdout.write(
            f"demo runs: created {len(report.runs_created)} ({report.attempts} attempts), "
            f"kept {len(report.runs_kept)}"
        )
