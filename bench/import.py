"""Times SWE-bench imports: a run folder of 500 trajectories, a 500-instance dataset file,
then results of 25 models on it.

    python bench/import.py [--trajectories 500] [--traj-kb 200] [--instances 500] [--models 25]

Runs on a fresh SQLite database in a temporary folder (or DATABASE_URL when set). The
instances are generated from the shape of the real rows in examples/swebench/lite_dev.jsonl
(same fields, sizes and test lists; new instance ids). Targets: instances <= 3 s, the 25
result sets <= 5 s. Each figure is wall time and this process's CPU time: on a shared, busy
machine the wall time includes waiting for a core, the CPU time does not.

The run folder (``ab import-run``) is generated from the real mini-swe-agent run in
examples/swebench/mini_swe_agent_run: each instance gets that run's trajectory shape, its
messages repeated up to ``--traj-kb`` KB, and a real report.json. Targets: 500 trajectories
of 200 KB in <= 30 s with the process's peak memory (max RSS, Django and all) <= 300 MB; it
runs first so that peak is the import's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "swebench" / "lite_dev.jsonl"
MINI = ROOT / "examples" / "swebench" / "mini_swe_agent_run"


def generate_run_folder(folder: Path, count: int, traj_kb: int) -> tuple[list[dict], int]:
    """A run folder of ``count`` trajectories of about ``traj_kb`` KB, reports and dataset."""
    real = sorted((MINI / "trajs").glob("*/*.traj.json"))
    template = json.loads(real[0].read_text())
    report = (MINI / "logs" / real[0].parent.name / "report.json").read_text()
    unresolved = report.replace('"resolved": true', '"resolved": false')
    rows = generate_instances(count)
    messages = template["messages"]
    total = 0
    for index, row in enumerate(rows):
        instance_id = row["instance_id"]
        traj = dict(template, instance_id=instance_id)
        traj["messages"] = []
        size = 0
        while size < traj_kb * 1024:
            message = messages[len(traj["messages"]) % len(messages)]
            traj["messages"].append(message)
            size += len(json.dumps(message))
        traj["info"] = dict(
            template["info"], submission=f"diff --git a/f{index}.py b/f{index}.py\n"
        )
        path = folder / "trajs" / instance_id / f"{instance_id}.traj.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(traj))
        total += path.stat().st_size
        logs = folder / "logs" / instance_id
        logs.mkdir(parents=True)
        (logs / "report.json").write_text(report if index % 2 == 0 else unresolved)
    (folder / "instances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows, total


def max_rss_mb() -> float:
    import resource

    # Linux reports kilobytes.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate_instances(count: int) -> list[dict]:
    base = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    out = []
    for index in range(count):
        row = dict(base[index % len(base)])
        owner, name = row["repo"].split("/")
        row["instance_id"] = f"{owner}__{name}-{100000 + index}"
        row["base_commit"] = f"{index:040x}"
        out.append(row)
    return out


def generate_run_report(ids: list[str], rng: random.Random) -> dict:
    shuffled = ids[:]
    rng.shuffle(shuffled)
    n = len(shuffled)
    resolved = shuffled[: int(n * rng.uniform(0.2, 0.6))]
    rest = shuffled[len(resolved) :]
    empty = rest[:5]
    errors = rest[5:8]
    # A few instances left out entirely: they count as missing (unresolved).
    unresolved = rest[8 : len(rest) - 4]
    submitted = resolved + empty + errors + unresolved
    return {
        "total_instances": n,
        "submitted_instances": len(submitted),
        "completed_instances": len(resolved) + len(unresolved),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": sorted(resolved + unresolved),
        "incomplete_ids": [],
        "empty_patch_ids": sorted(empty),
        "submitted_ids": sorted(submitted),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "error_ids": sorted(errors),
        "schema_version": 2,
    }


class Timer:
    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:6.2f} s wall, {self.cpu:5.2f} s CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--models", type=int, default=25)
    parser.add_argument("--trajectories", type=int, default=500)
    parser.add_argument("--traj-kb", type=int, default=200)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ab-bench-import-"))
    os.environ.setdefault("AB_VAR_DIR", str(work / "var"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from runs.imports.run_import import run_folder_import

    folder = work / "run-folder"
    _, folder_bytes = generate_run_folder(folder, args.trajectories, args.traj_kb)
    rss_before = max_rss_mb()
    with Timer() as run_first:
        imported = run_folder_import(path=folder, suite_name="bench-run", model_name="bench-agent")
    rss_after = max_rss_mb()
    assert imported.added == args.trajectories, imported.summary()
    with Timer() as run_again:
        again_run = run_folder_import(path=folder, suite_name="bench-run", model_name="bench-agent")
    assert again_run.added == again_run.updated == 0, again_run.summary()

    from runs.imports.results import results_import
    from tasks_app.models import Task
    from tasks_app.swebench.importer import swebench_import

    rows = generate_instances(args.instances)
    dataset = work / f"swebench_{args.instances}.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    size_mb = dataset.stat().st_size / 1e6

    with Timer() as first:
        report = swebench_import(source=dataset, suite_name="bench-swebench", dataset_version="b1")
    assert len(report.created) == args.instances, report.summary()

    with Timer() as second:
        again = swebench_import(source=dataset, suite_name="bench-swebench", dataset_version="b1")
    assert len(again.unchanged) == args.instances, again.summary()

    rng = random.Random(7)
    ids = [r["instance_id"] for r in rows]
    reports = []
    for index in range(args.models):
        path = work / f"model-{index}.run.json"
        path.write_text(json.dumps(generate_run_report(ids, rng)))
        reports.append(path)
    with Timer() as results:
        for index, path in enumerate(reports):
            results_import(source=path, suite_name="bench-swebench", model_name=f"model-{index}")

    with Timer() as results_again:
        for index, path in enumerate(reports):
            results_import(source=path, suite_name="bench-swebench", model_name=f"model-{index}")

    from runs.models import Attempt

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"run folder: {args.trajectories} trajectories, {folder_bytes / 1e6:.0f} MB "
        f"(+ reports, dataset); load average {load}"
    )
    print(f"import-run (new):              {run_first}   (target <= 30 s)")
    print(f"import-run again (no-op):      {run_again}")
    print(
        f"peak memory (max RSS):         {rss_after:6.0f} MB   (target <= 300 MB; "
        f"{rss_before:.0f} MB before the import)"
    )
    print(f"dataset: {args.instances} instances, {size_mb:.1f} MB JSONL")
    print(f"import instances (new):        {first}   (target <= 3 s)")
    print(f"re-import instances (no-op):   {second}")
    print(f"import results, {args.models} models:   {results}   (target <= 5 s)")
    print(f"re-import results (no-op):     {results_again}")
    print(f"stored: {Task.objects.count()} tasks, {Attempt.objects.count()} attempts")
    ok = first.wall <= 3 and results.wall <= 5 and run_first.wall <= 30 and rss_after <= 300
    print("targets met (wall time)" if ok else "TARGETS MISSED (wall time; see CPU on a busy host)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
