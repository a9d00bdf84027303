"""A sandbox cannot make the host do quadratic work with a huge change set.

The issue's reproduction: 200,000 empty files left in a workspace cost 10.5 minutes of host
CPU after the agent (``patch_stats`` searched a list per file) and a 100 MB attempt page (40 s
a view). Here: the statistics grow linearly with the files changed; a sandbox holds at most
``SANDBOX_MAX_FILES`` files (the quota's inode count, and a check after the agent where there
is no quota: SANDBOX_ERROR ``[file-limit]``); the attempt page of a huge patch is summarised
and bounded. The sizes are scaled down (the limit too) to keep the tests cheap.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.pipeline.change_set import file_limit_stage
from runs.pipeline.workspace import patch_stats
from runs.taxonomy import Reason
from runs.web.diffview import MAX_FILES_SHOWN, MAX_PARSE_CHARS
from sandbox.disk import SandboxDisk, disk_root
from tasks_app.models import Task
from tests.support.pages_fixtures import (
    make_attempt,
    make_model,
    make_run,
    make_suite,
)
from tests.support.pipeline_fixtures import (
    git_repo,
    import_tasks,
    run_attempt,
    run_json,
    write_task,
)

pytestmark = pytest.mark.django_db


def empty_files_patch(count: int) -> str:
    """What ``git diff --cached --binary`` prints for ``count`` new empty files."""
    return "".join(
        f"diff --git a/junk/f{i:06d} b/junk/f{i:06d}\n"
        "new file mode 100644\nindex 0000000..e69de29\n"
        for i in range(count)
    )


def cpu_seconds(fn, *args) -> float:
    """The least CPU time of three calls (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        fn(*args)
        best = min(best, time.process_time() - started)
    return best


def test_patch_statistics_grow_linearly_with_the_files_changed():
    small, large = empty_files_patch(5_000), empty_files_patch(20_000)
    stats = patch_stats(large)
    assert len(stats.files_touched) == 20_000 and stats.lines_changed == 0
    assert stats.files_touched[:2] == ["junk/f000000", "junk/f000001"]

    # Four times the files: about four times the work when linear, sixteen when quadratic
    # (the list search made it ~15x here). A ratio of two measurements of this process's own
    # CPU time, not a time limit.
    ratio = cpu_seconds(patch_stats, large) / cpu_seconds(patch_stats, small)
    assert ratio < 8, f"20,000 files cost {ratio:.1f}x 5,000 files: not linear"


def test_a_file_named_twice_counts_once_in_the_order_first_seen():
    patch = (
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -3 +3 @@\n-x\n+y\n"
    )
    stats = patch_stats(patch)
    assert stats.files_touched == ["b.py", "a.py"] and stats.lines_changed == 6


# --- the attempt page -------------------------------------------------------------------


@pytest.fixture
def huge_attempt(artifacts_root):
    suite = make_suite("huge", tasks=1)
    task = Task.objects.get(suite=suite)
    patch = empty_files_patch(20_000)
    stats = patch_stats(patch)
    return make_attempt(
        make_run(suite, make_model("filler")),
        task,
        "TESTS_FAILED",
        final_patch=patch,
        files_touched=stats.files_touched,
        lines_changed=stats.lines_changed,
    )


def test_the_attempt_page_summarises_a_huge_change_set(client, bob, huge_attempt):
    client.force_login(bob)
    url = reverse("attempt-detail", args=[huge_attempt.public_id])
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    # The old page listed every file twice: 20,000 files made ~10 MB (200,000: 100 MB).
    assert len(response.content) < 600_000, len(response.content)
    assert "A large change set: 20000 files" in body
    assert f"The page shows the first {MAX_FILES_SHOWN} files" in body
    assert body.count('class="diff-file"') == MAX_FILES_SHOWN
    assert "junk/f000000" in body and f"junk/f{MAX_FILES_SHOWN:06d}" not in body
    download = reverse("attempt-patch", args=[huge_attempt.public_id, "final"])
    assert f'href="{download}">download the full patch' in body
    # The page reads only the patch's start from the database, never all of it.
    selects = [q["sql"] for q in queries.captured_queries if '"final_patch"' in q["sql"]]
    assert selects, "the patch's start is read"
    for sql in selects:
        assert sql.count('"final_patch"') == sql.count('SUBSTR("runs_attempt"."final_patch"') + (
            sql.count('LENGTH("runs_attempt"."final_patch"')
        ), sql[:300]
    assert str(MAX_PARSE_CHARS) in selects[0]

    # The download still has every file.
    full = client.get(download)
    assert full.content.decode().count("diff --git ") == 20_000

    # Side by side: summarised the same way.
    both = client.get(reverse("attempt-vs", args=[huge_attempt.public_id, huge_attempt.public_id]))
    assert both.status_code == 200 and len(both.content) < 1_200_000
    assert both.content.decode().count("A large change set: 20000 files") == 2


def test_a_small_patch_shows_no_summary(client, bob, huge_attempt):
    huge_attempt.final_patch = empty_files_patch(3)
    huge_attempt.files_touched = patch_stats(huge_attempt.final_patch).files_touched
    huge_attempt.save(update_fields=["final_patch", "files_touched"])
    client.force_login(bob)
    body = client.get(reverse("attempt-detail", args=[huge_attempt.public_id])).content.decode()
    assert "A large change set" not in body
    assert body.count('class="diff-file"') == 3 and "in 3 files" in body


# --- the sandbox: at most SANDBOX_MAX_FILES files ----------------------------------------

FILE_LIMIT = 2_000
# Sandboxed code (the task's setup) leaves 5,000 empty files in the workspace.
MAKE_FILES = """\
import os
os.makedirs("junk")
for i in range(5000):
    open(f"junk/f{i:06d}", "w").close()
"""


def _task_making_files(tmp_path: Path) -> Task:
    commit = git_repo(
        tmp_path / "repo",
        {"test_x.py": "def test_x():\n    assert False\n", "make_files.py": MAKE_FILES},
    )
    write_task(
        tmp_path / "tasks",
        "makes_files",
        f"""
        repo: {{url: {tmp_path / "repo"}, commit: {commit}}}
        environment: {{docker_image: agentbench/py-runner:0.1.0, workdir: /workspace,
                       timeout_sec: 60}}
        setup: {{commands: ["python3 make_files.py"], network: false}}
        run: {{command: "python3 -m pytest -q test_x.py"}}
        validation: {{enforce_clean_setup: false, check_flaky: false}}
        """,
    )
    import_tasks(tmp_path / "tasks", also=[tmp_path])
    return Task.objects.get(task_id="makes_files")


@pytest.mark.docker
@pytest.mark.bwrap
def test_files_past_the_limit_without_a_quota_end_the_attempt_by_name(
    tmp_path: Path,
    backend: str,
    artifacts_root: Path,
    settings,
) -> None:
    """No quota (none asked for, as where the host cannot make one): the check after the
    agent names the outcome, and the tree is never read back."""
    settings.SANDBOX_DISK_MB = 0
    settings.SANDBOX_MAX_FILES = FILE_LIMIT
    attempt = run_attempt(_task_making_files(tmp_path), variant="nop", backend=backend)
    assert attempt.failure_reason_id == Reason.SANDBOX_ERROR.value, attempt.error_text
    assert attempt.is_infra
    assert attempt.error_text.startswith("[file-limit] SANDBOX_ERROR in workspace_files:")
    assert (
        f"the workspace holds more than {FILE_LIMIT:,} files, the sandbox's limit "
        f"(SANDBOX_MAX_FILES={FILE_LIMIT})" in attempt.error_text
    )
    assert attempt.final_patch == "" and attempt.files_touched == []
    names = list(attempt.stages.values_list("name", flat=True))
    assert "workspace_files" in names and "final_test" not in names
    assert run_json(attempt)["outcome"]["final_patch_path"] == ""


@pytest.mark.docker
@pytest.mark.bwrap
def test_the_quota_holds_no_more_files_than_the_limit(
    tmp_path: Path,
    backend: str,
    artifacts_root: Path,
    settings,
) -> None:
    """With the quota, the filesystem's inode count is the limit: creating file 2,001 fails
    with ENOSPC (64 MiB would otherwise hold 16,384), and the attempt says why."""
    settings.SANDBOX_DISK_MB = 64
    settings.SANDBOX_MAX_FILES = FILE_LIMIT
    attempt = run_attempt(_task_making_files(tmp_path), variant="nop", backend=backend)
    assert attempt.failure_reason_id == Reason.SANDBOX_ERROR.value, attempt.error_text
    assert attempt.error_text.startswith("[disk-quota] SANDBOX_ERROR in setup"), attempt.error_text
    assert "No space left on device" in attempt.error_text
    assert "SANDBOX_MAX_FILES files" in attempt.error_text
    described = run_json(attempt)["sandbox"]["disk_quota"]
    inodes = re.match(r"ext4 image of 64 MiB, (\d+) inodes", described)
    assert inodes and 0 < int(inodes.group(1)) <= FILE_LIMIT, described
    assert list(disk_root().glob(f"*{attempt.public_id}*")) == []


def test_the_quota_filesystem_has_the_inodes_asked_for_and_reads_full_when_they_are_gone(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    disk = SandboxDisk("ab-test-inodes", 64, root=tmp_path / "disks", files=500)
    disk.create(ws)
    try:
        made = 0
        with pytest.raises(OSError, match="No space left on device"):
            for made in range(1_000):
                (ws / f"f{made:04d}").touch()
        assert 400 < made <= 500 and disk.full()
        assert disk.describe().startswith("ext4 image of 64 MiB, ")
        # The check after the agent names it, whatever limit it was given.
        stage = file_limit_stage(ws, 100_000)
        assert stage is not None and stage.reason is Reason.SANDBOX_ERROR
        assert stage.note.startswith("[file-limit] the workspace's filesystem has no free inode")
        (ws / f"f{made - 1:04d}").unlink()
        assert file_limit_stage(ws, 100_000) is None
    finally:
        disk.remove(workspace=ws)
    # Asked for more than one per 4 KiB: the bytes keep their room (mkfs's densest default).
    assert SandboxDisk("x", 64, files=10**6).inode_count() == 16_384
