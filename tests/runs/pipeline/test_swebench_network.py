"""The final tests of a SWE-bench instance see a network that drops everything, as the official
harness's containers have a network: a connect to a non-routable address times out (not
refused, not unreachable), DNS gets no answer, nothing on the host or beyond answers; and gold
validation names the tests that truly need the internet.

On an instance of our own (the tiny repository of tests/support/swebench_cache_fixtures.py, version
3.0: pytest, graded by the official pytest parser), built for real in a cache root of the
test's own, validated (gold and empty attempts through the pipeline) on both backends. Its
test patch adds tests that probe the network from the final test stage: the stand-in internet
and a listener on every host address are the ones the sandbox conformance suite uses. Its
repository is committed on a date of our choosing, so the build's installs are dated: the
final tests' own header shows that nothing released after that date was installed. And the
env's python started through a link to it (as ``tox --current-env`` runs it) is the env's.
"""

from __future__ import annotations

import json

import pytest
from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

from runs.pipeline import artifacts
from runs.pipeline.swebench_validation import gold_validate
from sandbox.environments.build import Builder
from sandbox.environments.repos import RepoSource
from sandbox.host_fence import host_ipv4_addresses
from tasks_app.models import GoldValidation, Task
from tasks_app.swebench.importer import swebench_import
from tests.support.netns_fixtures import FakeInternet, Listener, host_address_for
from tests.support.swebench_cache_fixtures import (
    TINY_REPO,
    TINY_SPECS,
    drop_root,
    new_root,
    seed_base,
    tiny_repos,
)
from tests.support.swebench_fixtures import write_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.django_db, pytest.mark.docker, pytest.mark.bwrap]

INSTANCE = "agentbench-test__tiny-net-1"
PROBES = """import socket
import time

TARGETS = {targets!r}
INTERNET = {internet!r}


def connect(host, port):
    s = socket.socket()
    s.settimeout(1.5)
    started = time.monotonic()
    try:
        s.connect((host, port))
        return "reached"
    except socket.timeout:
        print(host, port, "timed out after %.1f s" % (time.monotonic() - started))
        return "timeout"
    except OSError as exc:
        return "error: %s" % exc


def test_value():
    import tiny

    assert tiny.VALUE == 3


def test_a_non_routable_address_times_out():
    assert connect("10.255.255.1", 80) == "timeout"


def test_nothing_on_the_host_or_beyond_answers():
    assert {{t: connect(*t) for t in TARGETS}} == {{t: "timeout" for t in TARGETS}}


def test_dns_gets_no_answer():
    server = next(l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver"))
    query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.settimeout(1.5)
    dns.sendto(query, (server, 53))
    try:
        dns.recv(512)
        answered = True
    except socket.timeout:
        answered = False
    assert not answered
    try:
        socket.getaddrinfo("example.com", 80)
        resolved = True
    except socket.gaierror:
        resolved = False
    assert not resolved


def test_reads_the_internet():
    greeting = socket.create_connection(INTERNET, timeout=2).recv(100)
    assert greeting
"""
GOLD = """diff --git a/tiny.py b/tiny.py
--- a/tiny.py
+++ b/tiny.py
@@ -1 +1 @@
-VALUE = 0
+VALUE = 3
"""
TIMEOUT_TESTS = [
    "test_network.py::test_a_non_routable_address_times_out",
    "test_network.py::test_nothing_on_the_host_or_beyond_answers",
    "test_network.py::test_dns_gets_no_answer",
]
INTERNET_TEST = "test_network.py::test_reads_the_internet"
# tox --current-env's way of running the env's python: through a link to it from elsewhere.
LINKS = """import subprocess


def test_a_link_to_the_venv_python_is_the_venvs_python(tmp_path):
    link = tmp_path / "bin" / "python"
    link.parent.mkdir()
    link.symlink_to("/opt/venv/bin/python")
    done = subprocess.run(
        [str(link), "-c", "import sys, pytest; print(sys.prefix)"],
        capture_output=True, text=True, cwd=str(tmp_path),
    )
    assert done.stdout.strip() == "/opt/venv", done.stderr
"""
LINK_TEST = "test_links.py::test_a_link_to_the_venv_python_is_the_venvs_python"


def new_file_patch(name: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def test_the_final_tests_see_a_network_that_drops_everything_on_both_backends(
    tmp_path, monkeypatch, settings, fake_internet: FakeInternet, listener: Listener
):
    monkeypatch.setitem(MAP_REPO_VERSION_TO_SPECS, TINY_REPO, TINY_SPECS)
    settings.ARTIFACTS_ROOT = tmp_path / "artifacts"
    repos = tmp_path / "repos"
    # Committed (so the env level's installs dated) 2023-12-15: pytest 7.4.3 (2023-10-24), not
    # 7.4.4 (2023-12-31) or 8.0.0 (2024-01-27); pluggy 1.3.0, not 1.4.0 (2024-01-24).
    commits = tiny_repos(repos, committed_at="2023-12-15T00:00:00Z")
    targets = [(fake_internet.address, fake_internet.port)] + [
        (address, listener.port)
        for address in sorted({*host_ipv4_addresses(), host_address_for("docker")})
        if not address.startswith("127.")  # inside, loopback is the sandbox's own
    ]
    probes = PROBES.format(targets=targets, internet=(fake_internet.address, fake_internet.port))
    row = {
        "instance_id": INSTANCE,
        "repo": TINY_REPO,
        "version": "3.0",
        "base_commit": commits[0],
        "environment_setup_commit": commits[0],
        "created_at": "2024-01-01T00:00:00Z",
        "patch": GOLD,
        "test_patch": new_file_patch("test_network.py", probes)
        + new_file_patch("test_links.py", LINKS),
        "problem_statement": "make VALUE 3",
        "hints_text": "",
        "FAIL_TO_PASS": json.dumps(["test_network.py::test_value"]),
        "PASS_TO_PASS": json.dumps([*TIMEOUT_TESTS, LINK_TEST, INTERNET_TEST]),
    }
    swebench_import(source=write_jsonl(tmp_path / "net.jsonl", [row]), suite_name="tiny-net")
    root = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    try:
        seed_base(root)
        builder = Builder(RepoSource(repos), docker=True, max_bytes=None)
        reports = {
            backend: gold_validate(suite_name="tiny-net", builder=builder, backend=backend)
            for backend in ("docker", "bwrap")
        }
    finally:
        drop_root(root)

    task = Task.objects.get(suite__name="tiny-net", task_id=INSTANCE)
    # One gold (oracle) attempt per validation, in the order they ran.
    golds = list(task.attempts.filter(run__model_config__agent_variant="oracle").order_by("id"))
    for (backend, report), gold in zip(reports.items(), golds, strict=True):
        (row_,) = report.rows
        stored = GoldValidation.objects.get(task=task, backend=backend)
        assert gold.grade, (backend, gold.failure_reason_id, gold.error_text)
        log = (artifacts.folder_of(gold.artifacts_dir) / "logs" / "final_test.txt").read_text()
        # Dated installs: nothing released after the env level's date is installed.
        assert "pytest-7.4.3, pluggy-1.3.0" in log, log[:2000]
        assert stored.installs_as_of == "env 2023-12-15T00:00:00Z, instance 2024-01-01T00:00:00Z"
        # The probes that expect silence pass: every connect timed out, DNS had no answer. And
        # the env's python started through a link to it has the env's packages (venv_links).
        passed = gold.test_results["PASS_TO_PASS"]["success"]
        assert sorted(passed) == sorted([*TIMEOUT_TESTS, LINK_TEST]), (backend, gold.test_results)
        assert "10.255.255.1 80 timed out after 1." in log  # printed by the probe that passed
        assert listener.accepted == 0
        # The one test that needs the internet fails, and gold validation names it.
        assert (row_.status, row_.gold_grade, row_.empty_grade) == ("invalid", "NO", "NO")
        assert row_.reason.startswith(
            "tests that need the internet (network errors in their output; the final tests' "
            f"network reaches nothing): {INTERNET_TEST};"
        ), row_.reason
        assert stored.reason == row_.reason and INTERNET_TEST in stored.failing_tests
