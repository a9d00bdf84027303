"""A SWE-bench instance on an image in the official layout, pulled through a registry mirror
and run with the official eval script on both backends (``ab swebench build --source image``).

The image is built here from the runner image: the instance's repository at /testbed (at its
base commit) and an environment ``testbed`` under /opt/miniconda3. Conda itself cannot be
installed offline, so the environment is a stand-in: ``/opt/miniconda3/envs/testbed`` is a
venv (with the runner's pytest) and ``/opt/miniconda3/bin/activate`` defines a ``conda``
function whose ``conda activate testbed`` puts that env first on PATH, which is what the
official eval script's two activation lines need. It is pushed to a loopback registry under
the official name (``swebench/sweb.eval.x86_64.<id with __ as _1776_>:latest``) and pulled as
``docker.io/swebench/...`` through ``REGISTRY_MIRRORS=docker.io=<registry>``.

Gold validation in substance: the gold patch (oracle) grades FULL and the empty patch (nop)
grades NO, on Docker and on bubblewrap (the image's exported tree)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from sandbox.environments import eviction, registry
from sandbox.environments.official_images import official_image_name, official_record
from tests.support.backends import backend_params
from tests.support.registry_fixtures import local_registry
from tests.support.swebench_cache_fixtures import (
    TINY_REPO,
    new_root,
    register_tiny_specs,
    tiny_repos,
)
from tests.support.swebench_fixtures import write_jsonl

RUNNER = "agentbench/py-runner:0.1.0"
INSTANCE = "agentbench-test__tiny-official-1"
GOLD = "diff --git a/tiny.py b/tiny.py\n--- a/tiny.py\n+++ b/tiny.py\n@@ -1 +1 @@\n" + (
    "-VALUE = 0\n+VALUE = 3\n"
)
TEST_FILE = """import sys

import tiny


def test_value():
    assert tiny.VALUE == 3


def test_env():
    assert sys.prefix == "/opt/miniconda3/envs/testbed"
"""
ACTIVATE = """# A stand-in for conda's activate (conda cannot be installed offline): a `conda`
# function whose `conda activate NAME` puts /opt/miniconda3/envs/NAME first on PATH.
conda() {
  if [ "$1" = activate ]; then
    export CONDA_DEFAULT_ENV="$2" PATH="/opt/miniconda3/envs/$2/bin:$PATH"
  fi
}
export PATH="/opt/miniconda3/bin:$PATH"
"""
# One worker builds the official-layout image once (the module's fixture) for every test here.
pytestmark = [
    pytest.mark.docker,
    pytest.mark.bwrap,
    pytest.mark.django_db,
    pytest.mark.xdist_group("official-images"),
]


def new_file_patch(name: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{name}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """(registry, the instance's row, the digest pushed) with the official-layout image."""
    folder = tmp_path_factory.mktemp("official")
    commits = tiny_repos(folder / "repos")
    context = folder / "context"
    context.mkdir()
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            str(folder / "repos/agentbench-test__tiny.git"),
            str(context / "testbed"),
        ],
        check=True,
    )
    subprocess.run(
        ["git", "-C", str(context / "testbed"), "checkout", "-q", commits[0]], check=True
    )
    (context / "activate").write_text(ACTIVATE)
    # The env's own pytest entry point, as an installed package would have it.
    (context / "pytest").write_text(
        "#!/opt/miniconda3/envs/testbed/bin/python\nimport sys\n\nimport pytest\n\n"
        "sys.exit(pytest.console_main())\n"
    )
    (context / "pytest").chmod(0o755)
    (context / "Dockerfile").write_text(
        f"FROM {RUNNER}\nUSER root\n"
        "RUN python3 -m venv --without-pip --system-site-packages /opt/miniconda3/envs/testbed\n"
        "COPY activate /opt/miniconda3/bin/activate\n"
        "COPY pytest /opt/miniconda3/envs/testbed/bin/\n"
        "COPY testbed /testbed\n"
        "RUN git config --global --add safe.directory /testbed\nWORKDIR /testbed\n"
    )
    local = f"agentbench-test/official-{uuid.uuid4().hex[:8]}:1"
    subprocess.run(
        ["docker", "build", "-q", "-t", local, str(context)], check=True, capture_output=True
    )
    name = official_image_name(INSTANCE)
    assert name == "swebench/sweb.eval.x86_64.agentbench-test_1776_tiny-official-1:latest"
    row = {
        "instance_id": INSTANCE,
        "repo": TINY_REPO,
        "version": "3.0",
        "base_commit": commits[0],
        "environment_setup_commit": commits[0],
        "created_at": "2024-01-01T00:00:00Z",
        "patch": GOLD,
        "test_patch": new_file_patch("test_official.py", TEST_FILE),
        "problem_statement": "make VALUE 3",
        "hints_text": "",
        "FAIL_TO_PASS": json.dumps(["test_official.py::test_value"]),
        "PASS_TO_PASS": json.dumps(["test_official.py::test_env"]),
    }
    with local_registry(folder / "registry") as reg:
        digest = reg.push(local, name)
        subprocess.run(["docker", "image", "rm", local], capture_output=True)
        try:
            yield reg, row, digest
        finally:
            for ref in (
                f"{reg.host}/{name}",
                f"{reg.host}/{name.split(':')[0]}@{digest.split('@')[1]}",
            ):
                subprocess.run(["docker", "image", "rm", "--force", ref], capture_output=True)


@pytest.mark.parametrize("backend", backend_params())
def test_an_official_image_is_pulled_through_the_mirror_and_gold_validates(
    official, backend: str, tmp_path: Path, artifacts_root: Path, monkeypatch, capsys
) -> None:
    from benchsite.cli.main import main
    from runs.pipeline.adhoc import attempt_create_adhoc, model_config_for_variant
    from runs.pipeline.artifacts import folder_of
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task
    from tasks_app.swebench.importer import swebench_import

    reg, row, digest = official
    register_tiny_specs()
    root = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    monkeypatch.delenv(eviction.BUDGET_ENV, raising=False)
    monkeypatch.setenv(registry.MIRRORS_ENV, f"docker.io={reg.host}")
    name = official_image_name(INSTANCE)
    subprocess.run(["docker", "image", "rm", "--force", f"{reg.host}/{name}"], capture_output=True)
    suite = f"official-{backend}"
    swebench_import(source=write_jsonl(tmp_path / "rows.jsonl", [row]), suite_name=suite)
    try:
        code = main(["swebench", "build", suite, "--source", "image", "--backend", backend])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"[1/1] {INSTANCE}: image {name} -> {digest} (pulled from {reg.host}/{name})" in out
        recorded = official_record(INSTANCE)
        assert recorded is not None and recorded.repo_digest == digest
        task = Task.objects.get(suite__name=suite, task_id=INSTANCE)
        assert (task.image_digest, task.image_source) == (digest, f"{reg.host}/{name}")
        grades, logs = {}, {}
        for variant in ("oracle", "nop"):
            attempt = attempt_execute(
                attempt_create_adhoc(task=task, model_config=model_config_for_variant(variant)),
                backend=backend,
            )
            grades[variant] = (attempt.grade, attempt.failure_reason_id)
            assert attempt.image_digest == digest
            log = (folder_of(attempt.artifacts_dir) / "logs" / "final_test.txt").read_text()
            assert "conda activate testbed" in log, log[:3000]
            logs[variant] = log[-3000:]
        assert grades == {"oracle": ("FULL", None), "nop": ("NO", "TESTS_FAILED")}, (grades, logs)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)


def test_source_auto_builds_offline_when_the_registry_does_not_answer_else_uses_the_image(
    official, tmp_path: Path, artifacts_root: Path, monkeypatch, capsys
) -> None:
    """``--source auto``: a registry that does not answer (a closed port on loopback as the
    mirror) gives an offline build, and the task says so; the registry seeded gives the
    official image, no build, and gold validation runs on that image."""
    from benchsite.cli.main import main
    from sandbox.environments.build import built_instance
    from tasks_app.cli.swebench_build import OFFLINE_SOURCE
    from tasks_app.models import GoldValidation, Task
    from tasks_app.swebench.importer import swebench_import
    from tests.support.registry_fixtures import free_port
    from tests.support.swebench_cache_fixtures import drop_root, seed_base, tiny_rows

    reg, row, digest = official
    register_tiny_specs()
    root = new_root()
    monkeypatch.setenv("SWEBENCH_CACHE_DIR", str(root))
    monkeypatch.delenv(eviction.BUDGET_ENV, raising=False)
    name = official_image_name(INSTANCE)
    try:
        # No registry: the port is closed. A small instance of its own (version 1.0: a venv
        # and nothing installed), built as a tree only.
        seed_base(root, docker=False)
        offline = tiny_rows(tiny_repos(tmp_path / "repos"))[0]
        swebench_import(source=write_jsonl(tmp_path / "a.jsonl", [offline]), suite_name="auto-a")
        monkeypatch.setenv(registry.MIRRORS_ENV, f"docker.io=127.0.0.1:{free_port()}")
        repos = str(tmp_path / "repos")
        args = ["auto-a", "--source", "auto", "--backend", "bwrap", "--repos", repos]
        code = main(["swebench", "build", *args])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "auto: building 1 instance(s) offline" in out and "1 built" in out, out
        assert built_instance(offline["instance_id"]) is not None
        assert official_record(offline["instance_id"]) is None
        task = Task.objects.get(suite__name="auto-a", task_id=offline["instance_id"])
        assert (task.image_source, task.image_digest) == (OFFLINE_SOURCE, "")

        # The registry seeded (the loopback registry as the mirror): the official image,
        # pulled (an earlier test of this module may have left it on the engine).
        monkeypatch.setenv(registry.MIRRORS_ENV, f"docker.io={reg.host}")
        subprocess.run(
            ["docker", "image", "rm", "--force", f"{reg.host}/{name}"], capture_output=True
        )
        swebench_import(source=write_jsonl(tmp_path / "b.jsonl", [row]), suite_name="auto-b")
        code = main(["swebench", "build", "auto-b", "--source", "auto", "--backend", "docker"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"{INSTANCE}: image {name} -> {digest}" in out and "offline" not in out, out
        assert built_instance(INSTANCE) is None
        task = Task.objects.get(suite__name="auto-b", task_id=INSTANCE)
        assert (task.image_source, task.image_digest) == (f"{reg.host}/{name}", digest)

        # Gold validation on the official image: nothing to build, gold FULL and nop NO.
        code = main(["validate-suite", "auto-b", "--variant", "oracle", "--backend", "docker"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"{INSTANCE}: image" in out and re.search(r"^valid\s+1$", out, re.M), out
        stored = GoldValidation.objects.get(task=task, backend="docker")
        assert (stored.status, stored.gold_grade, stored.empty_grade) == ("valid", "FULL", "NO")
    finally:
        drop_root(root)
