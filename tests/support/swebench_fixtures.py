"""Paths and helpers shared by the SWE-bench tests (real public data in examples/swebench)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO_ROOT, SHARED_DIR

EXAMPLES = REPO_ROOT / "examples" / "swebench"
LITE_DEV = EXAMPLES / "lite_dev.jsonl"
VERIFIED = EXAMPLES / "verified_sample.jsonl"
REPORTS = EXAMPLES / "sample_reports"
LEGACY_LOGS = EXAMPLES / "legacy_logs"
# The shared reference copy, when this checkout sits beside it (tests never depend on it).
SHARED_SWEBENCH = SHARED_DIR / "swebench"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path
