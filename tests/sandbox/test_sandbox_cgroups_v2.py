"""The cgroup v2 side of sandbox/cgroups.py, over a directory laid out like a unified hierarchy.

The CI machine runs cgroup v1 with every controller bound there (Docker uses them), so the
kernel offers no controller to a v2 mount and the real v2 path cannot run here: the bubblewrap
tests in test_sandbox_backends.py exercise v1 for real. These tests pin down what the v2 path
writes and reads (file names, values, controller delegation); what they cannot show is the
kernel accepting it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox import cgroups

LIMITS = cgroups.Limits(pids=64, memory_bytes=256 * 1024 * 1024, cpus=0.5)


@pytest.fixture
def unified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cgroup2 "mount" offering the controllers, as /sys/fs/cgroup does on Debian 12."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.subtree_control").write_text("\n")
    monkeypatch.setattr(cgroups, "_mounts", lambda: [("cgroup2", str(root), {"rw", "nsdelegate"})])
    return root


def test_it_picks_the_unified_hierarchy_when_it_offers_the_controllers(unified: Path) -> None:
    assert cgroups.detect() is None
    group = cgroups.SandboxCgroup("ab-v2", LIMITS)
    assert group.version == 2
    assert group.unique_dirs == [unified / "agentbench" / "ab-v2"]


def test_it_delegates_the_controllers_and_writes_the_v2_limits(unified: Path) -> None:
    (unified / "agentbench").mkdir()
    (unified / "agentbench" / "cgroup.subtree_control").write_text("")
    group = cgroups.SandboxCgroup("ab-v2", LIMITS)
    group.create()

    for level in (unified, unified / "agentbench"):
        enabled = (level / "cgroup.subtree_control").read_text().split()
        assert enabled == ["+pids", "+memory", "+cpu"]
    d = unified / "agentbench" / "ab-v2"
    assert (d / "pids.max").read_text() == "64"
    assert (d / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (d / "memory.swap.max").read_text() == "0"
    assert (d / "cpu.max").read_text() == "50000 100000"


def test_it_counts_oom_kills_from_memory_events(unified: Path) -> None:
    (unified / "agentbench").mkdir()
    (unified / "agentbench" / "cgroup.subtree_control").write_text("")
    group = cgroups.SandboxCgroup("ab-v2", LIMITS)
    group.create()
    (group.dirs["memory"] / "memory.events").write_text(
        "low 0\nhigh 0\nmax 7\noom 3\noom_kill 2\noom_group_kill 0\n"
    )
    assert group.oom_kills() == 2


def test_it_empties_a_leftover_group_without_cgroup_kill(unified: Path) -> None:
    """A group left by a crashed worker: its processes are killed before it is reused (v2
    kernels before 5.14 have no cgroup.kill, so the pids are killed one by one)."""
    leftover = unified / "agentbench" / "ab-v2"
    leftover.mkdir(parents=True)
    (unified / "agentbench" / "cgroup.subtree_control").write_text("")
    straggler = subprocess.Popen(["sleep", "60"])
    try:
        (leftover / "cgroup.procs").write_text(f"{straggler.pid}\n")
        cgroups.SandboxCgroup("ab-v2", LIMITS).create()
        assert straggler.wait(timeout=5) == -9
    finally:
        straggler.kill()
        straggler.wait()
    assert (leftover / "pids.max").read_text() == "64"
