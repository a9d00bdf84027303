"""SWE-bench offline: build times per level, and a warm oracle attempt against its bare test run.

    python bench/swebench_eval.py [--instance ID ...] [--backends docker,bwrap] [--runs 3]

For each instance (already built by ``ab swebench build``; default: four Lite dev instances):

- cold build seconds of the base, env and instance levels, as recorded when each level was
  first built on this machine (``<cache>/trees/<level>.build.json``; the base includes its
  ``docker import``, env and instance their ``docker build``);
- warm oracle attempt: median wall time of ``--runs`` whole attempts through the pipeline
  (copy of /testbed, sandbox, gold patch, test patch, final test command, grading);
- bare script: median wall time of the command the attempt's final stage runs, the whole
  official eval script (git status/show/diff, the spec's reinstall, which fails offline,
  reset, test patch, tests, reset), in the same image with nothing else (``docker run`` of the
  instance image, or ``bwrap`` on its tree) on a /testbed with the gold patch applied: what a
  user reproducing the official evaluation by hand runs. The ratio attempt / bare script is
  the harness's own overhead (copy, sandbox, quota, grading); the target is <= 1.3x;
- bare test: the same for the test command alone on a /testbed with the gold and test patches
  applied, for reference: the ratio attempt / bare test adds the official script's own steps.

Every run, attempt or bare, starts from a fresh copy of /testbed (the copy is not timed for
the bare runs), as the official harness's fresh container does, and the attempt and bare runs
alternate so the machine's load weighs on both alike.

Prints the load average before and after: on 2 shared cores the figures move with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_INSTANCES = [
    "marshmallow-code__marshmallow-1359",
    "sqlfluff__sqlfluff-1625",
    "pylint-dev__astroid-1333",
    # ~100 MB of testbed (data files): where copying and dropping the tree shows.
    "pvlib__pvlib-python-1707",
]
TARGET_RATIO = 1.3


def setup_django(tmp: Path) -> None:
    os.environ["AB_VAR_DIR"] = str(tmp)
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ["ARTIFACTS_ROOT"] = str(tmp / "artifacts")
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchsite.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def import_instances(tmp: Path, ids: list[str]) -> None:
    import json

    from tasks_app.swebench.importer import swebench_import

    source = ROOT / "examples" / "swebench" / "lite_dev.jsonl"
    wanted = [
        line for line in source.read_text().splitlines() if json.loads(line)["instance_id"] in ids
    ]
    path = tmp / "instances.jsonl"
    path.write_text("\n".join(wanted) + "\n")
    swebench_import(source=path, suite_name="bench-swebench")


def oracle_attempt(instance_id: str, backend: str) -> tuple[float, str]:
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task

    task = Task.objects.get(suite__name="bench-swebench", task_id=instance_id)
    attempt = attempt_create_adhoc(task=task, model_config=model_config_for_variant("oracle"))
    started = time.perf_counter()
    attempt = attempt_execute(attempt, backend=backend)
    return time.perf_counter() - started, attempt.grade or attempt.failure_reason_id or "?"


def patched_testbed(built, task, dest: Path, *, with_tests: bool = True) -> None:
    subprocess.run(["cp", "-a", f"{built.rootfs}/testbed/.", str(dest)], check=True)
    for patch in (task.gold_patch, task.test_patch) if with_tests else (task.gold_patch,):
        subprocess.run(["git", "-C", str(dest), "apply", "-"], input=patch, text=True, check=True)
    subprocess.run(["chown", "-R", "1000:1000", str(dest)], check=True)


def bare_script(task, testbed: Path) -> str:
    """The official eval script written into ``testbed`` (a command to run it there)."""
    from runs.pipeline.plan import plan_for_task
    from runs.pipeline.swebench import EVAL_ENV, eval_script_for

    script = eval_script_for(plan_for_task(task, default_image=""))
    (testbed / ".git" / "bare-eval.sh").write_text(script)
    return f"{EVAL_ENV} bash /testbed/.git/bare-eval.sh"


def bare_run(built, command: str, backend: str, testbed: Path) -> float:
    from sandbox.environments.envspec import VENV
    from sandbox.environments.trees import PATH_ENV

    path = f"{VENV}/bin:{PATH_ENV}"
    if backend == "docker":
        cmd = [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-u",
            "1000:1000",
            "-v",
            f"{testbed}:/testbed",
            "-w",
            "/testbed",
            "-e",
            f"PATH={path}",
            "-e",
            "HOME=/tmp",
            built.image,
            "sh",
            "-c",
            command,
        ]
    else:
        cmd = [
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--uid",
            "1000",
            "--gid",
            "1000",
            "--ro-bind",
            built.rootfs,
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/home/agent",
            "--bind",
            str(testbed),
            "/testbed",
            "--chdir",
            "/testbed",
            "--setenv",
            "PATH",
            path,
            "--setenv",
            "HOME",
            "/home/agent",
            "sh",
            "-c",
            command,
        ]
    started = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False)
    return time.perf_counter() - started


BARE_KINDS = ("test", "script")


def bare_once(built, task, backend: str, tmp: Path, kind: str) -> float:
    """One bare run on a fresh patched testbed (the copy is not timed): ``test`` runs the test
    command on a testbed with the gold and test patches; ``script`` the whole official eval
    script on a testbed with the gold patch."""
    with_tests = kind == "test"
    testbed = tmp / f"bare-{kind}"
    subprocess.run(["rm", "-rf", str(testbed)], check=True)
    testbed.mkdir()
    patched_testbed(built, task, testbed, with_tests=with_tests)
    command = task.test_command if with_tests else bare_script(task, testbed)
    return bare_run(built, command, backend, testbed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", action="append", default=None)
    parser.add_argument("--backends", default="docker,bwrap")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ids = args.instance or DEFAULT_INSTANCES
    backends = args.backends.split(",")

    tmp = Path(tempfile.mkdtemp(prefix="ab-bench-swebench-"))
    try:
        setup_django(tmp)
        import_instances(tmp, ids)
        from sandbox.environments.build import built_instance
        from tasks_app.models import Task

        print(f"load average before: {os.getloadavg()[0]:.2f}")
        print("cold build seconds (recorded at first build): base / env / instance")
        built = {}
        for instance_id in ids:
            found = built_instance(instance_id)
            if found is None:
                print(f"  {instance_id}: not built (run ab swebench build SUITE --instance ...)")
                continue
            built[instance_id] = found
            s = found.cold_seconds
            print(
                f"  {instance_id:40s} {s.get('base', 0):6.0f} {s.get('env', 0):6.0f} "
                f"{s.get('instance', 0):6.0f}"
            )
        print(f"\nwarm oracle attempt vs bare test command (median of {args.runs})")
        print(
            f"  {'instance':40s} {'backend':7s} {'attempt':>8s}  {'bare test, ratio':>18s}  "
            f"{'bare script, ratio':>18s}"
        )
        for instance_id, found in built.items():
            task = Task.objects.get(suite__name="bench-swebench", task_id=instance_id)
            for backend in backends:
                if backend == "docker" and not found.has_image():
                    print(f"  {instance_id:40s} {backend:7s} no Docker image built")
                    continue
                oracle_attempt(instance_id, backend)  # warm-up (page cache, image layers)
                for kind in BARE_KINDS:
                    bare_once(found, task, backend, tmp, kind)  # warm-up
                # Interleaved, so the machine's load weighs on the attempt and the bare runs
                # alike; every bare run gets a fresh testbed, as every attempt does (and as
                # the official harness's fresh container from the instance image does).
                times, grades = [], set()
                bare: dict[str, list[float]] = {kind: [] for kind in BARE_KINDS}
                for _ in range(args.runs):
                    seconds, grade = oracle_attempt(instance_id, backend)
                    times.append(seconds)
                    grades.add(grade)
                    for kind in BARE_KINDS:
                        bare[kind].append(bare_once(found, task, backend, tmp, kind))
                attempt_s = statistics.median(times)
                ratios = [f"{attempt_s:7.2f}s"]
                for kind in BARE_KINDS:
                    bare_s = statistics.median(bare[kind])
                    verdict = "ok" if attempt_s / bare_s <= TARGET_RATIO else "over"
                    ratios.append(f"{bare_s:6.2f}s {attempt_s / bare_s:5.2f}x {verdict:4s}")
                print(
                    f"  {instance_id:40s} {backend:7s} {'  '.join(ratios)} "
                    f"(grade {'/'.join(sorted(grades))})"
                )
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
