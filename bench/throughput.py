"""Attempt throughput with one and with two worker processes, and enqueue-to-start latency.

    python bench/throughput.py [--stack postgres+redis|sqlite+sqla] [--attempts 16] [--latency 15]

Real worker processes (``celery -A benchsite worker``, concurrency 1 each) on a fresh
database and broker (tests/support/worker_stack.py: PostgreSQL + Redis by default, as `.ci/test`
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
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proc_stats import machine_busy_seconds, tree_cpu_seconds  # noqa: E402

from tests.support.worker_stack import KINDS, Stack, create_stack, wait_until  # noqa: E402

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


# Stages that run on the host (git) rather than in the sandbox.
HOST_STAGES = ("git_clone", "git_checkout", "export_testbed")


@dataclass
class Measure:
    """One throughput run: its rate, and where each attempt's time and CPU went."""

    per_min: float
    resolved: int
    wall: float  # mean seconds from an attempt's start to its end (means add up)
    in_sandbox: float  # mean seconds from setup's start to the final tests' end
    on_host: float  # mean seconds of host-side stages (git clone, checkout)
    harness: float  # the rest: sandbox start before setup, removal and records after the tests
    worker_cpu: float  # CPU seconds per attempt of the worker process trees
    machine_cpu: float  # CPU seconds per attempt of the whole machine (every process)
    machine_share: float  # cores the machine had busy during the run, over its cores


def throughput(stack: Stack, workers: int, samples: int) -> Measure:
    """Attempts per minute from the first start to the last finish, and where time went."""
    from runs.models import AttemptStage

    procs = [stack.start_worker(f"tp{workers}-{i}") for i in range(workers)]
    time.sleep(3)  # let the workers connect before the messages arrive
    cpu_before = sum(tree_cpu_seconds(p.pid) for p in procs)
    busy_before, clock_before = machine_busy_seconds(), time.monotonic()
    run = launch(stack, samples)
    attempts = wait_run(stack, run)
    worker_cpu = sum(tree_cpu_seconds(p.pid) for p in procs) - cpu_before
    busy = machine_busy_seconds() - busy_before
    elapsed = time.monotonic() - clock_before
    for proc in procs:
        stack.kill_worker(proc, sig=15)
    stack.workers.clear()
    first = min(a.started_at for a in attempts)
    last = max(a.finished_at for a in attempts)
    resolved = sum(1 for a in attempts if a.failure_reason_id is None)
    walls, sandbox, host, harness = [], [], [], []
    for attempt in attempts:
        wall = (attempt.finished_at - attempt.started_at).total_seconds()
        rows = AttemptStage.objects.filter(attempt=attempt, started_at__isnull=False)
        stages = list(rows.values_list("name", "started_at", "duration_sec"))
        on_host = sum(d or 0 for n, _, d in stages if n in HOST_STAGES)
        # From the first sandbox stage's start to the last stage's end: setup, baseline, the
        # agent and the final tests (the agent stage's row is stamped when it ends, so its
        # own duration cannot be summed).
        inside = [(t, t.timestamp() + (d or 0)) for n, t, d in stages if n not in HOST_STAGES]
        in_sandbox = max(e for _, e in inside) - min(t for t, _ in inside).timestamp()
        walls.append(wall)
        host.append(on_host)
        sandbox.append(in_sandbox)
        harness.append(wall - on_host - in_sandbox)
    count = len(attempts)
    return Measure(
        per_min=count * 60 / (last - first).total_seconds(),
        resolved=resolved,
        wall=statistics.mean(walls),
        in_sandbox=statistics.mean(sandbox),
        on_host=statistics.mean(host),
        harness=statistics.mean(harness),
        worker_cpu=worker_cpu / count,
        machine_cpu=busy / count,
        machine_share=busy / elapsed / (os.cpu_count() or 1),
    )


def describe(label: str, m: Measure, samples: int) -> None:
    print(f"{label}: {m.per_min:6.1f} attempts/min  ({m.resolved}/{samples} resolved)")
    print(
        f"    per attempt (mean): {m.wall:.2f} s wall = {m.in_sandbox:.2f} s setup to final "
        f"tests (sandboxed commands, agent) + {m.on_host:.2f} s git on the host + "
        f"{m.harness:.2f} s harness (sandbox start before setup, removal and records after)"
    )
    print(
        f"    CPU per attempt: {m.worker_cpu:.2f} s in the worker processes, "
        f"{m.machine_cpu:.2f} s on the whole machine; machine {m.machine_share:.0%} busy"
    )


def competing_load(count: int) -> list[subprocess.Popen]:
    """``count`` processes that spin on a core each (the "other process" of the issue);
    they stop with this script (SIGTERM from ``stop_load``, or their own 1-hour bound)."""
    spin = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


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
    parser.add_argument(
        "--compete", type=int, default=0, help="processes spinning on a core meanwhile"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ab-throughput-") as tmp:
        stack = create_stack(args.stack, Path(tmp), extra_env={"LOG_LEVEL": "WARNING"})
        # This process uses the stack's database and broker as its own.
        for key in (
            "AB_VAR_DIR",
            "ARTIFACTS_ROOT",
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "CELERY_QUEUE",
        ):
            if key in stack.env:
                os.environ[key] = stack.env[key]
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
        import django

        django.setup()
        try:
            print(f"stack: {args.stack}; {args.attempts} attempts of {TASK} (scripted agent)")
            print(f"load average before: {os.getloadavg()[0]:.2f}")
            load = competing_load(args.compete)
            if args.compete:
                print(f"competing load: {args.compete} process(es) spinning on a core each")
            try:
                one = throughput(stack, 1, args.attempts)
                describe("1 worker ", one, args.attempts)
                two = throughput(stack, 2, args.attempts)
                describe("2 workers", two, args.attempts)
            finally:
                stop_load(load)
            print(f"speed-up : {two.per_min / one.per_min:6.2f}x  (target >= 1.8)")
            if args.latency == 0:
                print(f"load average after: {os.getloadavg()[0]:.2f}")
                return 0
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
