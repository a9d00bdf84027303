"""The final tests of a SWE-bench-style instance see the CPUs upstream's containers see: the
host's, in the sandbox's cgroup (where pylint sizes its parallel tests from), on both backends;
and gold validation whose fail-to-pass test is skipped says so, with the skip message.

End to end on an instance of our own (the tiny repository of
tests/support/swebench_cache_fixtures.py, version 3.0: pytest), built for real in a cache root of
the test's own and validated (gold and empty attempts through the pipeline) on both backends. Its
test patch reads the cgroup's CPU quota (v2 ``cpu.max``, v1 ``cpu/cpu.cfs_quota_us``) as pylint
does, and skips a fail-to-pass test the way pylint's "Need 2 or more cores" does, asking for one
core more than the host has.
"""

from __future__ import annotations

import json
import os

import pytest
from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

from runs.pipeline.log_errors import skipped_tests
from runs.pipeline.plan import plan_for_task
from runs.pipeline.swebench_validation import gold_validate
from sandbox.environments.build import Builder
from sandbox.environments.repos import RepoSource
from tasks_app.models import GoldValidation, Task
from tasks_app.spec import EnvironmentSpec
from tasks_app.swebench.importer import swebench_import
from tests.support.pipeline_fixtures import attempt_folder
from tests.support.swebench_cache_fixtures import (
    TINY_REPO,
    TINY_SPECS,
    drop_root,
    new_root,
    seed_base,
    tiny_repos,
)
from tests.support.swebench_fixtures import write_jsonl

HOST = os.cpu_count() or 1
INSTANCE = "agentbench-test__tiny-cpus-1"
PROBES = """import pathlib

import pytest

HOST_CPUS = {host}


def cgroup_cpus():
    v2 = pathlib.Path("/sys/fs/cgroup/cpu.max")
    if v2.is_file():
        quota, period = v2.read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    v1 = pathlib.Path("/sys/fs/cgroup/cpu")
    quota = int((v1 / "cpu.cfs_quota_us").read_text())
    return None if quota == -1 else quota / int((v1 / "cpu.cfs_period_us").read_text())


def test_value():
    import tiny

    assert tiny.VALUE == 3


def test_the_cgroup_gives_the_hosts_cpus():
    print("cgroup cpus:", cgroup_cpus())
    assert cgroup_cpus() == HOST_CPUS


def test_needs_more_cores_than_the_host_has():
    if cgroup_cpus() < HOST_CPUS + 1:
        pytest.skip("Need {more} or more cores for test to be meaningful")
"""
SKIP_LINE = (
    PROBES.splitlines().index(
        '        pytest.skip("Need {more} or more cores for test to be meaningful")'
    )
    + 1
)
GOLD = """diff --git a/tiny.py b/tiny.py
--- a/tiny.py
+++ b/tiny.py
@@ -1 +1 @@
-VALUE = 0
+VALUE = 3
"""
CGROUP_TEST = "test_cpus.py::test_the_cgroup_gives_the_hosts_cpus"
SKIPPED_TEST = "test_cpus.py::test_needs_more_cores_than_the_host_has"


def new_file_patch(name: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


# --- the CPUs a task asks for ------------------------------------------------------------


def test_a_swebench_instance_gets_the_hosts_cpus_and_a_task_what_it_asks_for():
    def plan(source: str, spec: dict):
        return plan_for_task(Task(task_id="t", source=source, spec=spec), default_image="i")

    environment = {"docker_image": "i"}
    assert plan("swebench", {"repo": "a/b"}).cpus == HOST
    assert plan("swebench", {"repo": "a/b", "cpus": 0.5}).cpus == 0.5
    assert plan("yaml", {"environment": environment}).cpus is None  # SANDBOX_CPUS
    assert plan("yaml", {"environment": environment | {"cpus": 0.5}}).cpus == 0.5
    assert plan("yaml", {"environment": environment | {"cpus": 4096}}).cpus == HOST
    assert EnvironmentSpec(docker_image="i", cpus=2).cpus == 2.0
    with pytest.raises(ValueError, match="greater than 0"):
        EnvironmentSpec(docker_image="i", cpus=0)


def test_it_reads_the_skip_message_of_a_skipped_test_from_pytests_summary():
    log = (
        "test_cpus.py::test_value PASSED\n"
        "test_cpus.py::test_b SKIPPED (Need 3 or more cores for test to be meani...) [ 66%]\n"
        "PASSED test_cpus.py::test_value\n"
        "SKIPPED [1] test_cpus.py:30: Need 3 or more cores for test to be meaningful\n"
        "SKIPPED [1] other.py:3: no network\n"
        "SKIPPED [1] other.py:9: no display\n"
    )

    found = skipped_tests(
        log,
        [
            "test_cpus.py::test_b",
            "test_cpus.py::test_value",
            "other.py::test_c",
            "missing.py::test_d",
        ],
    )

    assert found == {
        "test_cpus.py::test_b": "test_cpus.py:30: Need 3 or more cores for test to be meaningful",
        # -rA names no test: a test with no result in a file with skips gets the file's.
        "other.py::test_c": "other.py:3: no network | other.py:9: no display",
    }


# --- end to end --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.docker
@pytest.mark.bwrap
def test_the_final_tests_see_the_hosts_cpus_and_a_skipped_test_is_named_on_both_backends(
    tmp_path, monkeypatch, settings
):
    monkeypatch.setitem(MAP_REPO_VERSION_TO_SPECS, TINY_REPO, TINY_SPECS)
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    settings.SANDBOX_CPUS = 1.0  # the default quota: not what a SWE-bench instance gets
    repos = tmp_path / "repos"
    commits = tiny_repos(repos, committed_at="2023-12-15T00:00:00Z")
    row = {
        "instance_id": INSTANCE,
        "repo": TINY_REPO,
        "version": "3.0",
        "base_commit": commits[0],
        "environment_setup_commit": commits[0],
        "created_at": "2024-01-01T00:00:00Z",
        "patch": GOLD,
        "test_patch": new_file_patch("test_cpus.py", PROBES.format(host=HOST, more=HOST + 1)),
        "problem_statement": "make VALUE 3",
        "hints_text": "",
        "FAIL_TO_PASS": json.dumps(["test_cpus.py::test_value", SKIPPED_TEST]),
        "PASS_TO_PASS": json.dumps([CGROUP_TEST]),
    }
    swebench_import(source=write_jsonl(tmp_path / "cpus.jsonl", [row]), suite_name="tiny-cpus")
    root = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    try:
        seed_base(root)
        builder = Builder(RepoSource(repos), docker=True, max_bytes=None)
        reports = {
            backend: gold_validate(suite_name="tiny-cpus", builder=builder, backend=backend)
            for backend in ("docker", "bwrap")
        }
    finally:
        drop_root(root)

    task = Task.objects.get(suite__name="tiny-cpus", task_id=INSTANCE)
    golds = list(task.attempts.filter(run__model_config__agent_variant="oracle").order_by("id"))
    for (backend, report), gold in zip(reports.items(), golds, strict=True):
        (row_,) = report.rows
        # The cgroup's quota is the host's CPU count, not SANDBOX_CPUS.
        passed = gold.test_results["PASS_TO_PASS"]["success"]
        assert passed == [CGROUP_TEST], (backend, gold.test_results, gold.error_text)
        # The test that needs more cores than there are is skipped: invalid, saying so.
        assert (row_.status, row_.gold_grade, row_.empty_grade) == ("invalid", "PARTIAL", "NO")
        assert row_.reason.startswith(
            f"fail-to-pass tests skipped: {SKIPPED_TEST} (test_cpus.py:{SKIP_LINE}: Need "
            f"{HOST + 1} or more cores for test to be meaningful); gold patch grades PARTIAL: "
            f"{SKIPPED_TEST}"
        ), (backend, row_.reason)
        assert "first error" not in row_.reason, row_.reason
        # The attempt's record says which CPUs its tests were given.
        record = json.loads((attempt_folder(gold) / "run.json").read_text())
        assert record["sandbox"]["cpus"] == float(HOST), (backend, record["sandbox"])
        stored = GoldValidation.objects.get(task=task, backend=backend)
        assert stored.reason == row_.reason and stored.failing_tests == [SKIPPED_TEST]
