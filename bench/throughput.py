"""Attempt throughput with one and with two worker processes, and enqueue-to-start latency.

    python bench/throughput.py [--stack postgres+redis|sqlite+sqla] [--attempts 16] [--latency 15]

Real worker processes (``celery -A benchsite worker``, concurrency 1 each) on a fresh
database and broker (tests/worker_stack.py: PostgreSQL + Redis by default, as `.ci/test`
starts them). The work is the scripted agent on toy_fail_pytest with many samples: clone,
setup, baseline, agent, final tests in a real sandbox, a few seconds each.

Prints attempts per minute (first start to last finish) with 1 and with 2 workers and their
ratio (target >= 1.8 on 2 cores), then the median time from an attempt being queued to a
worker claiming it (``queued_at``, stamped when the message is sent, -> ``started_at``, set
by the claim), measured one attempt at a time with an idle worker (target <= 50 ms on Redis).
Runs are launched from this process through ``run_launch``, as the web app launches them
(imports and broker connection warm), on the stack's database. Also prints the load average:
this machine is shared, and other processes' load lowers the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.worker_stack import KINDS, Stack, create_stack, wait_until  # noqa: E402

TASK = "toy_fail_pytest"


def launch(stack: Stack, samples: int):
    """Launch from this long-running process, as the web app does (warm imports and broker
    connection), through the same service as ``ab run-suite``."""
    from runs.models import ModelConfig
    from runs.services import run_launch
    from tasks_app.models import Suite

    config, _ = ModelConfig.objects.get_or_create(
        name="scripted", defaults={"agent_variant": "scripted"}
    )
    suite = Suite.objects.get(name="custom-dev")
    return run_launch(suite=suite, model_config=config, samples=samples, task_ids=[TASK])


def wait_run(stack: Stack, run, timeout: float = 1800) -> list:
    from runs.models import FINAL_STATES, Attempt

    attempts = Attempt.objects.filter(run_id=run.id)
    wait_until(
        lambda: not attempts.exclude(status__in=FINAL_STATES).exists(),
        timeout=timeout,
        what=f"run {run.public_id}",
        poll=0.5,
    )
    return list(attempts)


def throughput(stack: Stack, workers: int, samples: int) -> tuple[float, int]:
    """Attempts per minute from the first start to the last finish; and resolved count."""
    procs = [stack.start_worker(f"tp{workers}-{i}") for i in range(workers)]
    time.sleep(3)  # let the workers connect before the messages arrive
    run = launch(stack, samples)
    attempts = wait_run(stack, run)
    for proc in procs:
        stack.kill_worker(proc, sig=15)
    stack.workers.clear()
    first = min(a.started_at for a in attempts)
    last = max(a.finished_at for a in attempts)
    resolved = sum(1 for a in attempts if a.failure_reason_id is None)
    return len(attempts) * 60 / (last - first).total_seconds(), resolved


def latency(stack: Stack, count: int) -> list[float]:
    """queued_at -> started_at, one attempt at a time, with one idle worker waiting (after
    one attempt that warms up the worker and this process)."""
    proc = stack.start_worker("latency")
    time.sleep(3)
    wait_run(stack, launch(stack, 1))
    samples = []
    for _ in range(count):
        run = launch(stack, 1)
        (attempt,) = wait_run(stack, run)
        samples.append((attempt.started_at - attempt.queued_at).total_seconds() * 1000)
    stack.kill_worker(proc, sig=15)
    stack.workers.clear()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=KINDS, default="postgres+redis")
    parser.add_argument("--attempts", type=int, default=16, help="samples per throughput run")
    parser.add_argument("--latency", type=int, default=15, help="single attempts timed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ab-throughput-") as tmp:
        stack = create_stack(args.stack, Path(tmp), extra_env={"LOG_LEVEL": "WARNING"})
        # This process uses the stack's database and broker as its own.
        for key in ("AB_VAR_DIR", "ARTIFACTS_ROOT", "DATABASE_URL", "CELERY_BROKER_URL",
                    "CELERY_QUEUE"):  # fmt: skip
            if key in stack.env:
                os.environ[key] = stack.env[key]
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
        import django

        django.setup()
        try:
            print(f"stack: {args.stack}; {args.attempts} attempts of {TASK} (scripted agent)")
            print(f"load average before: {os.getloadavg()[0]:.2f}")
            one, ok1 = throughput(stack, 1, args.attempts)
            print(f"1 worker : {one:6.1f} attempts/min  ({ok1}/{args.attempts} resolved)")
            two, ok2 = throughput(stack, 2, args.attempts)
            print(f"2 workers: {two:6.1f} attempts/min  ({ok2}/{args.attempts} resolved)")
            print(f"speed-up : {two / one:6.2f}x  (target >= 1.8)")
            times = latency(stack, args.latency)
            print(
                f"enqueue-to-start: median {statistics.median(times):.1f} ms, "
                f"min {min(times):.1f} ms, max {max(times):.1f} ms over {len(times)} "
                f"(target <= 50 ms on Redis)"
            )
            print(f"load average after: {os.getloadavg()[0]:.2f}")
        finally:
            stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
