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


MEASUREMENTS: list[Callable[[argparse.Namespace], list[Row]]] = [
    lambda args: sandbox_exec_rows(args.backends, args.runs),
]


def print_table(rows: list[Row]) -> None:
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
        "--backends", type=lambda s: s.split(","), default=["docker", "bwrap"],
        help="comma-separated: docker,bwrap",
    )  # fmt: skip
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for measure in MEASUREMENTS:
        rows.extend(measure(args))
    print_table(rows)
    return 1 if any(row.verdict == "MISSED" for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
    # Figures on a shared 2-core machine swing with load; print it so they can be read in context.
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} CPUs")
