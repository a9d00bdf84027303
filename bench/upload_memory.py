"""Peak memory of reading an uploaded SWE-bench JSONL file: as one bytes object (how uploads
were read before) against from the spooled file, line by line (``upload_source``).

    python bench/upload_memory.py [--mb 200]

Writes a JSONL file of about ``--mb`` MB of SWE-bench-shaped rows, then reads it each way in a
fresh Python process and prints that process's peak resident size (VmHWM) side by side. The
records themselves are kept either way (the importer needs them); the difference is the
file's bytes, their decoded text and its lines held beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

READER = """
import sys
from pathlib import Path
from tasks_app.swebench.dataset import read_records
path, mode = Path(sys.argv[1]), sys.argv[2]
source = path.read_bytes() if mode == "bytes" else path
records = read_records(source, "data.jsonl")
del source
peak = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM"))
print(len(records), int(peak.split()[1]) // 1024)
"""


def write_dataset(path: Path, megabytes: int) -> int:
    row = {
        "repo": "example/project",
        "base_commit": "0" * 40,
        "problem_statement": "x" * 4000,
        "patch": "diff --git a/f.py b/f.py\n" + "+line\n" * 1500,
        "test_patch": "diff --git a/t.py b/t.py\n" + "+test\n" * 500,
        "FAIL_TO_PASS": json.dumps(["tests/t.py::test_a"]),
        "PASS_TO_PASS": json.dumps([]),
        "version": "1.0",
    }
    rows = 0
    with open(path, "w") as out:
        while out.tell() < megabytes * 1024 * 1024:
            out.write(json.dumps({**row, "instance_id": f"example__project-{rows}"}) + "\n")
            rows += 1
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args(argv)
    env = os.environ | {"PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "benchsite.settings"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.jsonl"
        rows = write_dataset(path, args.mb)
        size_mb = path.stat().st_size / 1024 / 1024
        print(f"{size_mb:.0f} MB JSONL, {rows} rows; load average {os.getloadavg()[0]:.1f}")
        print(f"{'read as':<28}{'peak RSS MB':>12}")
        for mode, label in (("bytes", "one bytes object (before)"), ("path", "file, line by line")):
            out = subprocess.run(
                [sys.executable, "-c", READER, str(path), mode],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            _count, peak = out.stdout.split()
            print(f"{label:<28}{int(peak):>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
