"""How many files sandboxed code left in the workspace, checked before the harness reads the
tree back. No Django.

Everything after the agent costs the host per file of the workspace, whatever the files'
sizes: ``git add`` and the diff, the patch's statistics, the attempt's page. Empty files cost
the disk quota nothing in bytes, so 200,000 of them passed it and made the host work for
minutes. The sandbox's quota filesystem holds at most ``SANDBOX_MAX_FILES`` inodes
(``sandbox/disk.py``); this check applies the same limit where there is no quota (no root,
or quotas turned off) and names the outcome when the quota's inodes ran out: the attempt ends
SANDBOX_ERROR ``[file-limit]`` and the tree is not read back (no patch, no final tests).
"""

from __future__ import annotations

import os
from pathlib import Path

from runs.pipeline.stages import StageResult
from runs.taxonomy import Reason, Stage

FILE_LIMIT_TAG = "[file-limit]"
STAGE_NAME = "workspace_files"


def count_entries(root: Path, *, stop_after: int) -> int:
    """Files, folders and links under ``root`` (links are not followed), counted up to one
    past ``stop_after``: the walk stops there, so a huge tree costs only the limit."""
    count = 0
    folders = [str(root)]
    while folders:
        try:
            listing = os.scandir(folders.pop())
        except OSError:  # removed meanwhile, or unreadable: nothing to count there
            continue
        with listing:
            for entry in listing:
                count += 1
                if count > stop_after:
                    return count
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                except OSError:
                    continue
    return count


def files_over_limit(workspace: Path, limit: int) -> str | None:
    """Why the workspace holds too many files (more than ``limit``, counted up to one past
    it; or its filesystem, the sandbox's quota, has no inode left), else None."""
    try:
        fs = os.statvfs(workspace)
    except OSError:
        return None
    used = fs.f_files - fs.f_ffree
    if fs.f_files and fs.f_favail == 0:
        return f"the workspace's filesystem has no free inode left ({used:,} used)"
    if fs.f_files and used <= limit:
        return None  # the whole filesystem holds fewer: no walk needed (a quota's case)
    found = count_entries(workspace, stop_after=limit)
    if found <= limit:
        return None
    return f"the workspace holds more than {limit:,} files"


def file_limit_stage(workspace: Path, limit: int) -> StageResult | None:
    """A failed stage when sandboxed code left more than ``limit`` files in ``workspace``;
    None within it (or with no limit: 0)."""
    if limit <= 0:
        return None
    why = files_over_limit(workspace, limit)
    if why is None:
        return None
    return StageResult(
        STAGE_NAME,
        Stage.AGENT_RUN,
        reason=Reason.SANDBOX_ERROR,
        note=(
            f"{FILE_LIMIT_TAG} {why}, the sandbox's limit (SANDBOX_MAX_FILES={limit}): the "
            "tree is not read back (no patch, no final tests)"
        ),
    )
