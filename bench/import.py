"""Times SWE-bench imports: a 500-instance dataset file, then results of 25 models on it.

    python bench/import.py [--instances 500] [--models 25]

Runs on a fresh SQLite database in a temporary folder (or DATABASE_URL when set). The
instances are generated from the shape of the real rows in examples/swebench/lite_dev.jsonl
(same fields, sizes and test lists; new instance ids). Targets: instances <= 3 s, the 25
result sets <= 5 s.
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

    started = time.perf_counter()
    report = swebench_import(source=dataset, suite_name="bench-swebench", dataset_version="b1")
    first = time.perf_counter() - started
    assert len(report.created) == args.instances, report.summary()

    started = time.perf_counter()
    again = swebench_import(source=dataset, suite_name="bench-swebench", dataset_version="b1")
    second = time.perf_counter() - started
    assert len(again.unchanged) == args.instances, again.summary()

    rng = random.Random(7)
    ids = [r["instance_id"] for r in rows]
    reports = []
    for index in range(args.models):
        path = work / f"model-{index}.run.json"
        path.write_text(json.dumps(generate_run_report(ids, rng)))
        reports.append(path)
    started = time.perf_counter()
    for index, path in enumerate(reports):
        results_import(source=path, suite_name="bench-swebench", model_name=f"model-{index}")
    results = time.perf_counter() - started

    started = time.perf_counter()
    for index, path in enumerate(reports):
        results_import(source=path, suite_name="bench-swebench", model_name=f"model-{index}")
    results_again = time.perf_counter() - started

    from runs.models import Attempt

    print(f"dataset: {args.instances} instances, {size_mb:.1f} MB JSONL")
    print(f"import instances (new):        {first:6.2f} s   (target <= 3 s)")
    print(f"re-import instances (no-op):   {second:6.2f} s")
    print(
        f"import results, {args.models} models:   {results:6.2f} s   (target <= 5 s; "
        f"{Attempt.objects.count()} attempts)"
    )
    print(f"re-import results (no-op):     {results_again:6.2f} s")
    print(f"tasks stored: {Task.objects.count()}")
    ok = first <= 3 and results <= 5
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
