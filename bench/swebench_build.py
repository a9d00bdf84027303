"""SWE-bench offline builds: cold build time per level and in total, --jobs 1 against --jobs 2.

    python bench/swebench_build.py [--instance ID ...] [--backend docker|bwrap] [--warm-pip]
                                   [--repos DIR] [--jobs-a 1] [--jobs-b 2]

Builds the same instances twice from cold, each time in a cache root of its own (so every env
and instance level is built, and the Docker images under the root's own prefix): once with
``--jobs-a`` levels at a time, once with ``--jobs-b``. Prints, for each run, every level's
build seconds (tree and image) and bytes (tree and image, counted as ``ab swebench du``
counts them), the wall time of the whole build, the ratio of the two totals (target: --jobs 2
at least 1.6x faster than --jobs 1 on a quiet machine) and the load average before and after.

The base level (debootstrap of the Debian suite, then ``docker import``) is the same for every
instance and everything stands on it, so no two levels can overlap while it builds: it is
built once in the shared cache (its cold time is printed from its record) and given to both
roots as a hard-link copy and a second image tag. The pip cache is cold in both runs (each
root has its own, empty) unless ``--warm-pip`` (the shared cache's, filled by the first run).

The default instances are chosen so that levels can overlap, as in a suite: four repositories,
four env levels (marshmallow 3.0 and 2.20, sqlfluff 0.6, astroid 2.14) and seven instance
levels (four on sqlfluff's env, which they all wait for). With fewer instances the ratio says
more about one chain than about the machine: with the first four only, the sqlfluff env and
its two instance levels, one after the other, are nearly all of the --jobs 2 time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_INSTANCES = [
    "marshmallow-code__marshmallow-1359",
    "marshmallow-code__marshmallow-1343",
    "sqlfluff__sqlfluff-1625",
    "sqlfluff__sqlfluff-1733",
    "sqlfluff__sqlfluff-1517",
    "sqlfluff__sqlfluff-1763",
    "pylint-dev__astroid-1978",
]
TARGET_RATIO = 1.6
BENCH_ROOT = Path("/var/lib/agentbench/swebench-bench")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def rows(ids: list[str]) -> list[dict]:
    source = ROOT / "examples" / "swebench" / "lite_dev.jsonl"
    by_id = {r["instance_id"]: r for r in map(json.loads, source.read_text().splitlines())}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise SystemExit(f"not in {source}: {', '.join(missing)}")
    return [by_id[i] for i in ids]


def one_run(
    label: str, instances: list[dict], *, jobs: int, docker: bool, repos: Path, warm_pip: bool
) -> tuple[float, list]:
    from sandbox.environments import cache
    from sandbox.environments.build import Builder
    from sandbox.environments.parallel import build_all
    from sandbox.environments.repos import RepoSource
    from tests.support.swebench_cache_fixtures import remove_images, seed_base

    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=BENCH_ROOT))
    os.environ["SWEBENCH_CACHE_DIR"] = str(root)
    try:
        seed_base(root, docker=docker)
        if not warm_pip:
            (root / "pip-cache").unlink()  # the seed links the shared one: start empty
        builder = Builder(RepoSource(repos), docker=docker, max_bytes=None)
        started = time.monotonic()
        try:
            outcomes = build_all(builder, instances, jobs=jobs)
        finally:
            builder.close()  # the dated index it served
        total = time.monotonic() - started
        failed = [o.line() for o in outcomes.values() if not o.ok]
        if failed:
            raise SystemExit(f"{label}: build failed:\n" + "\n".join(failed))
        levels = [lv for lv in cache.all_levels() if lv.kind != "base"]
        return total, levels
    finally:
        if docker:
            remove_images(root)
        shutil.rmtree(root, ignore_errors=True)
        os.environ.pop("SWEBENCH_CACHE_DIR", None)


def human(n: int | None) -> str:
    from sandbox.environments.eviction import human as fmt

    return fmt(n)


def print_levels(label: str, total: float, levels: list) -> None:
    print(f"\n{label}: {total:.0f} s in total")
    print(f"  {'level':<58} {'seconds':>8} {'tree':>9} {'image':>9}")
    for level in sorted(levels, key=lambda lv: (lv.kind != "env", lv.name)):
        name = f"{level.kind} {level.instance_id or f'{level.repo} {level.version}'}"
        print(
            f"  {name:<58} {level.seconds:>8.0f} {human(level.tree_bytes):>9} "
            f"{human(level.image_bytes) if level.image_bytes is not None else '-':>9}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", action="append", default=None)
    parser.add_argument("--backend", choices=("docker", "bwrap"), default="docker")
    parser.add_argument("--repos", type=Path, default=ROOT.parent / "shared/swebench/repos")
    parser.add_argument("--warm-pip", action="store_true", help="share the pip cache")
    parser.add_argument("--jobs-a", type=int, default=1)
    parser.add_argument("--jobs-b", type=int, default=2)
    args = parser.parse_args()
    instances = rows(args.instance or DEFAULT_INSTANCES)
    docker = args.backend == "docker"

    # The swebench package's import (about 4 s) happens once per process, in whichever run
    # comes first: out of both clocks.
    import swebench.harness.constants
    import swebench.harness.test_spec.python  # noqa: F401

    from tests.support.swebench_cache_fixtures import seed_base

    print(f"load average before: {load()}")
    with tempfile.TemporaryDirectory() as scratch:
        base = seed_base(Path(scratch) / "cache", docker=docker)  # builds the shared one once
    print(
        f"base level {base.name}: {base.seconds:.0f} s cold (debootstrap"
        + (" + docker import" if docker else "")
        + f", built once in the shared cache), tree {human(base.tree_bytes)}, image "
        + f"{human(base.image_bytes)}"
    )
    results = {}
    for jobs in (args.jobs_a, args.jobs_b):
        label = f"jobs{jobs}"
        print(f"building {len(instances)} instance(s) cold with --jobs {jobs} ...", flush=True)
        results[jobs] = one_run(
            label, instances, jobs=jobs, docker=docker, repos=args.repos, warm_pip=args.warm_pip
        )
        print_levels(f"--jobs {jobs}", *results[jobs])
        print(f"load average now: {load()}", flush=True)
    a, b = results[args.jobs_a][0], results[args.jobs_b][0]
    ratio = a / b if b else float("inf")
    print(
        f"\n--jobs {args.jobs_a}: {a:.0f} s, --jobs {args.jobs_b}: {b:.0f} s: {ratio:.2f}x "
        f"(target >= {TARGET_RATIO}x on a quiet machine; "
        f"{'met' if ratio >= TARGET_RATIO else 'not met'} here)"
    )
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
