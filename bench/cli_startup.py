"""CPU (user+sys of the child) and wall medians of `ab` start-up.

Run: python bench/cli_startup.py [N]
"""

import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = (["--help"], ["list-tasks", "custom-dev"], ["leaderboard", "custom-dev"])


def measure(args: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "benchsite.cli.main", *args], capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {runs} runs each")
    for args in COMMANDS:
        measure(args)  # warm the file cache (and apply migrations once)
        samples = [measure(args) for _ in range(runs)]
        cpu = statistics.median(s[0] for s in samples)
        wall = statistics.median(s[1] for s in samples)
        print(f"ab {' '.join(args):28} cpu {cpu:.3f} s   wall {wall:.3f} s")


if __name__ == "__main__":
    main()
