"""CPU accounting for the bench scripts, from /proc: a process tree's CPU time and the
machine's busy time, so a figure can say how much CPU it used and how much the machine had."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and every process below it: user + system, plus that of their
    children already reaped (so short-lived commands they ran count too)."""
    stats: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    total, frontier, seen = stats.get(pid, (0, 0))[1], [pid], {pid}
    while frontier:
        parent = frontier.pop()
        for child, (ppid, ticks) in stats.items():
            if ppid == parent and child not in seen:
                seen.add(child)
                total += ticks
                frontier.append(child)
    return total / TICK


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, every process) since boot."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / TICK
