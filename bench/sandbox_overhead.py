"""Per-command overhead of the sandboxes against running the same command directly.

    python bench/sandbox_overhead.py [--runs 30] [--backends docker,bwrap]

For each backend: start one sandbox (warm: the container or cgroup already exists), run a
trivial command ``--runs`` times, and compare the median wall time with ``subprocess.run`` of
the same command on the host. Targets on a 2-core machine: Docker <= 100 ms, bubblewrap
<= 10 ms median overhead.

Each measurement is a ``Row``; ``main`` prints them as one table. Another measurement (for
example a whole toy attempt against its bare commands) is a function returning more rows,
added to ``MEASUREMENTS``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import available_backends, open_sandbox  # noqa: E402
from sandbox.base import SandboxConfig  # noqa: E402

COMMAND = ["true"]
TARGET_MS = {"docker": 100.0, "bwrap": 10.0}


@dataclass(frozen=True)
class Row:
    what: str
    median_ms: float
    baseline_ms: float
    target_ms: float | None = None

    @property
    def overhead_ms(self) -> float:
        return self.median_ms - self.baseline_ms

    @property
    def verdict(self) -> str:
        if self.target_ms is None:
            return ""
        return "ok" if self.overhead_ms <= self.target_ms else "MISSED"


def median_ms(fn: Callable[[], object], runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def direct_ms(runs: int) -> float:
    return median_ms(lambda: subprocess.run(COMMAND, check=True), runs)


def sandbox_exec_rows(backends: list[str], runs: int) -> list[Row]:
    baseline = direct_ms(runs)
    rows = [Row(f"direct subprocess {' '.join(COMMAND)}", baseline, baseline)]
    reasons = available_backends()
    for backend in backends:
        if reasons.get(backend):
            print(f"skipping {backend}: {reasons[backend]}", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="ab-bench-") as tmp:
            config = SandboxConfig(
                name=f"bench-{uuid.uuid4().hex[:8]}",
                workspace=Path(tmp) / "ws",
                labels={"agentbench.bench": "sandbox_overhead"},
            )
            with open_sandbox(config, backend) as sb:

                def run_once(sb=sb) -> None:
                    result = sb.exec(COMMAND, timeout=30)
                    assert result.ok, result

                rows.append(
                    Row(
                        f"{backend} exec (warm)",
                        median_ms(run_once, runs),
                        baseline,
                        TARGET_MS[backend],
                    )
                )
    return rows


# --- a whole toy attempt through the pipeline against its bare commands (runs/pipeline) ---

TOY_TASK = ROOT / "tasks" / "custom-dev" / "toy_fail_pytest"
TOY_ATTEMPT_TARGET_RATIO = 1.5


def toy_attempt_rows(args: argparse.Namespace) -> list[Row]:
    """Clone + setup + baseline + apply solution.patch + final test of toy_fail_pytest, through
    the whole pipeline (sandbox, stage logs, run.json, database rows; warm) against the same
    commands run bare on the host. Target: the pipeline within 1.5x the bare time."""
    import os
    import shutil

    runs = max(5, args.runs // 6)
    tmp = Path(tempfile.mkdtemp(prefix="ab-bench-attempt-"))
    os.environ.update(AB_VAR_DIR=str(tmp / "var"), ARTIFACTS_ROOT=str(tmp / "artifacts"))
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from runs.models import Attempt
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task
    from tasks_app.services import tasks_import
    from tasks_app.spec import load_task_file

    call_command("migrate", verbosity=0)
    tasks_import(directory=TOY_TASK / "task.yaml")
    loaded = load_task_file(TOY_TASK / "task.yaml")
    spec = loaded.spec
    task = Task.objects.get(task_id=spec.id)
    solution = (TOY_TASK / "solution.patch").read_text()
    # "external" applies a given patch and nothing else (no extra test runs of an agent loop).
    config = model_config_for_variant("external", name="bench-solution-patch")

    # The host's Python has many pytest plugins (django, playwright...); the runner image has
    # none. Not loading them keeps the bare run the same work, and the comparison strict. This
    # interpreter's directory comes first on PATH: a version manager's shim (pyenv) would add
    # a shell script's start-up to every bare python and flatter the sandboxes.
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }

    def bare() -> None:
        work = Path(tempfile.mkdtemp(prefix="ab-bench-bare-"))
        repo = work / "repo"
        try:
            steps = [
                ["git", "clone", "-q", "--no-checkout", loaded.repo_url, str(repo)],
                ["git", "-C", str(repo), "checkout", "-q", "--detach", spec.repo.commit],
                *(["sh", "-c", c] for c in spec.setup.commands),
                ["sh", "-c", spec.run.command],
                ["git", "-C", str(repo), "apply", str(TOY_TASK / "solution.patch")],
                ["sh", "-c", spec.run.command],
            ]
            codes = [
                subprocess.run(s, cwd=repo if i else work, env=env, capture_output=True).returncode
                for i, s in enumerate(steps)
            ]
            assert codes[-3:] == [1, 0, 0], codes  # baseline fails, patch applies, tests pass
        finally:
            shutil.rmtree(work, ignore_errors=True)

    reasons = available_backends()
    backends = [b for b in args.backends if not reasons.get(b)]
    for backend in set(args.backends) - set(backends):
        print(f"skipping {backend}: {reasons[backend]}", file=sys.stderr)

    def through_pipeline(backend: str) -> None:
        attempt = attempt_create_adhoc(task=task, model_config=config)
        Attempt.objects.filter(pk=attempt.pk).update(final_patch=solution)
        attempt.refresh_from_db()
        attempt = attempt_execute(attempt, backend=backend)
        assert attempt.resolved, attempt.error_text

    # Interleaved rounds: on a shared machine the load drifts, and each round sees the same.
    candidates: dict[str, Callable[[], None]] = {"bare": bare}
    for backend in backends:
        candidates[backend] = lambda backend=backend: through_pipeline(backend)
    for fn in candidates.values():  # warm: imports, page cache, the image's layers
        fn()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(runs):
        for name, fn in candidates.items():
            started = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - started) * 1000)
    bare_ms = statistics.median(times["bare"])
    rows = [Row("toy attempt, bare host commands", bare_ms, bare_ms)]
    for backend in backends:
        piped_ms = statistics.median(times[backend])
        # Row's verdict compares overhead with a target in ms: 1.5x bare is 0.5x bare of it.
        target = (TOY_ATTEMPT_TARGET_RATIO - 1) * bare_ms
        rows.append(Row(f"toy attempt, pipeline {backend} (warm)", piped_ms, bare_ms, target))
        print(
            f"toy attempt on {backend}: pipeline {piped_ms / 1000:.2f}s vs bare "
            f"{bare_ms / 1000:.2f}s = {piped_ms / bare_ms:.2f}x "
            f"(target <= {TOY_ATTEMPT_TARGET_RATIO}x; median of {runs} interleaved rounds)",
            file=sys.stderr,
        )
    shutil.rmtree(tmp, ignore_errors=True)
    return rows


MEASUREMENTS: list[Callable[[argparse.Namespace], list[Row]]] = [
    lambda args: sandbox_exec_rows(args.backends, args.runs),
    toy_attempt_rows,
]


def print_table(rows: list[Row]) -> None:
    # Figures on a shared 2-core machine swing with load; print it so they can be read in context.
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} CPUs")
    print(f"{'measurement':<34} {'median ms':>10} {'overhead ms':>12} {'target ms':>10}  verdict")
    for row in rows:
        target = f"{row.target_ms:.0f}" if row.target_ms is not None else "-"
        print(
            f"{row.what:<34} {row.median_ms:>10.2f} {row.overhead_ms:>12.2f} {target:>10}"
            f"  {row.verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--backends",
        type=lambda s: s.split(","),
        default=["docker", "bwrap"],
        help="comma-separated: docker,bwrap",
    )
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for measure in MEASUREMENTS:
        rows.extend(measure(args))
    print_table(rows)
    return 1 if any(row.verdict == "MISSED" for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
