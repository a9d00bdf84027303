"""Times SWE-bench imports: a 500-instance dataset file, then results of 25 models on it.

    python bench/import.py [--instances 500] [--models 25]

Runs on a fresh SQLite database in a temporary folder (or DATABASE_URL when set). The
instances are generated from the shape of the real rows in examples/swebench/lite_dev.jsonl
(same fields, sizes and test lists; new instance ids). Targets: instances <= 3 s, the 25
result sets <= 5 s. Each figure is wall time and this process's CPU time: on a shared, busy
machine the wall time includes waiting for a core, the CPU time does not.
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
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ab-bench-import-"))
    os.environ.setdefault("AB_VAR_DIR", str(work / "var"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from tasks_app.models import Task
    from tasks_app.swebench.importer import swebench_import
    from tasks_app.swebench.results import results_import

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
    print(f"dataset: {args.instances} instances, {size_mb:.1f} MB JSONL; load average {load}")
    print(f"import instances (new):        {first}   (target <= 3 s)")
    print(f"re-import instances (no-op):   {second}")
    print(f"import results, {args.models} models:   {results}   (target <= 5 s)")
    print(f"re-import results (no-op):     {results_again}")
    print(f"stored: {Task.objects.count()} tasks, {Attempt.objects.count()} attempts")
    ok = first.wall <= 3 and results.wall <= 5
    print("targets met (wall time)" if ok else "TARGETS MISSED (wall time; see CPU on a busy host)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
