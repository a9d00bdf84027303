"""How long a lost worker's attempt takes to start again elsewhere, with the default timings.

    python bench/recovery.py

PostgreSQL + Redis (tests/support/worker_stack.py) with the default heartbeat (5 s), stale threshold
(40 s) and reaper interval (10 s). A worker takes one attempt and is killed with SIGKILL (its
main and pool processes) two seconds into it; a second worker with the reaper is then started.
Prints the time from the kill, and from the attempt's last heartbeat, to the attempt starting on
the second worker (bound: stale threshold + reaper interval = 50 s), and the load average.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.worker_stack import create_stack, wait_until  # noqa: E402

# The defaults of benchsite/settings.py, written out: worker_stack's own are short, for tests.
DEFAULTS = {
    "ATTEMPT_HEARTBEAT_SEC": "5",
    "ATTEMPT_STALE_AFTER_SEC": "40",
    "ATTEMPT_REAPER_INTERVAL_SEC": "10",
    "CELERY_POLLING_INTERVAL_SEC": "0.2",
}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ab-recovery-") as tmp:
        stack = create_stack("postgres+redis", Path(tmp), extra_env=DEFAULTS)
        for key in (
            "AB_VAR_DIR",
            "ARTIFACTS_ROOT",
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "CELERY_QUEUE",
        ):
            os.environ[key] = stack.env[key]
        os.environ |= DEFAULTS | {"DJANGO_SETTINGS_MODULE": "benchsite.settings"}
        import django

        django.setup()
        from runs.models import Attempt, AttemptStatus

        try:
            doomed = stack.start_worker("doomed")
            stack.ab("run-suite", "custom-dev", "--variant", "nop", "--task", "toy_fail_pytest")
            attempt = wait_until(
                lambda: Attempt.objects.filter(status=AttemptStatus.RUNNING).first(),
                timeout=120,
                what="the attempt to start",
            )
            time.sleep(2)
            stack.kill_worker(doomed)
            killed = time.time()
            last_beat = Attempt.objects.get(pk=attempt.pk).heartbeat_at.timestamp()
            stack.start_worker("rescuer", beat=True)
            wait_until(
                lambda: Attempt.objects.get(pk=attempt.pk).worker.startswith("rescuer@"),
                timeout=300,
                what="the attempt to start again",
                poll=0.2,
            )
            restarted = Attempt.objects.get(pk=attempt.pk).started_at.timestamp()
            print(f"kill -9 -> started on another worker: {restarted - killed:.1f} s")
            print(f"last heartbeat -> started again:     {restarted - last_beat:.1f} s")
            print("bound with the defaults: 40 s stale + 10 s reaper interval = 50 s")
            print(f"load average: {os.getloadavg()[0]:.2f}")
        finally:
            stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
