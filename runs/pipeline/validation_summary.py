"""The summary table every gold validation ends with (``ab validate-suite SUITE --variant
oracle``), whatever the suite's source: SWE-bench instances (gold patch, on an offline build or
the official image), Harbor tasks (``solution/solve.sh``) and ``task.yaml`` tasks (the
reference solution, on a Dockerfile environment or an image). Tasks by verdict, then why,
alike reasons grouped (a task's own id, commits and test names taken out so that they fall
together). Pure: plain values in, lines out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# The verdict columns of a SWE-bench validation; other sources give theirs.
VERDICTS = ("valid", "approximate-valid", "invalid", "not_buildable")


@dataclass(frozen=True)
class Verdict:
    """One task's verdict, as the table needs it."""

    task_id: str
    verdict: str  # one of the table's columns
    reason: str = ""
    failing_tests: tuple[str, ...] = ()


def summary_table(
    verdicts: Sequence[Verdict],
    *,
    backend: str,
    unit: str = "instance",
    columns: Sequence[str] = VERDICTS,
) -> list[str]:
    """Counts by verdict (every column, zeros too), then the reasons of the tasks not valid."""
    lines = [f"{'verdict':<20} {unit + 's':>9}"]
    for verdict in columns:
        count = sum(1 for v in verdicts if v.verdict == verdict)
        lines.append(f"{verdict.replace('_', ' '):<20} {count:>9}")
    lines.append(
        f"of {len(verdicts)} {unit}(s) on {backend}; leaderboards leave the invalid ones out of "
        "every rate"
    )
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        if v.verdict not in ("valid", "approximate-valid"):
            groups.setdefault(f"{v.verdict.replace('_', ' ')}: {reason_kind(v)}", []).append(
                v.task_id
            )
    if groups:
        lines += ["", f"{'why':<90} {unit + 's':>9}"]
        for why, ids in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
            shown = why if len(why) <= 90 else why[:87] + "..."
            lines.append(f"{shown:<90} {len(ids):>9}  {listed(ids)}")
    return lines


def reason_kind(v: Verdict) -> str:
    """The first part of the reason with what is the task's own taken out."""
    text = v.reason.split("; ")[0].replace(v.task_id, "<instance>")
    text = re.sub(r"\b[0-9a-f]{40}\b", "<commit>", text)
    for test in sorted(v.failing_tests, key=len, reverse=True):
        text = text.replace(test, "")
    text = re.sub(r" and \d+ more", "", text)
    return re.sub(r"[:,\s]+$", "", re.sub(r"(, )+", ", ", text))


def listed(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
