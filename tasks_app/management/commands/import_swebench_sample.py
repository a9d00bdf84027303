"""Import the SWE-bench Lite dev sample shipped in examples/ as suite ``swebench-lite-dev``.

Called by ``ab setup-demo``; idempotent (a second run changes nothing).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.swebench.importer import swebench_import

SAMPLE = settings.BASE_DIR / "examples" / "swebench" / "lite_dev.jsonl"
SUITE = "swebench-lite-dev"


class Command(BaseCommand):
    help = "Import examples/swebench/lite_dev.jsonl as suite swebench-lite-dev (idempotent)."

    def handle(self, *args, **options) -> None:
        try:
            report = swebench_import(
                source=SAMPLE,
                suite_name=SUITE,
                dataset_version="SWE-bench_Lite dev",
                description="SWE-bench Lite, dev split: 23 real instances (sample shipped in "
                "examples/swebench). Instance images are swebench/sweb.eval.x86_64.*.",
            )
        except SwebenchInputError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{SUITE}: {report.summary()}")
