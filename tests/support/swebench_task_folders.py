"""A tiny SWE-bench dataset in the per-instance Dockerfile layout (``ab import-swebench
--dockerfiles``): one instance whose folder holds a Dockerfile built FROM the runner image
(on the engine already: no network in the build) that COPYs a tiny git repository from the
context to /testbed, and its own eval.sh (reset the test file, apply the test patch, pytest
between the harness's markers, reset again).

Each call makes a repository with a content of its own (``marker``), so the image is one no
other test builds; ``remove_images`` removes it again."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from tests.support.pipeline_fixtures import git_repo

BASE_IMAGE = "agentbench/py-runner:0.1.0"
INSTANCE = "acme__calc-1"
TEST_FILE = "tests/test_calc.py"

CALC = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
GOLD_PATCH = "\n".join(
    [
        "diff --git a/calc.py b/calc.py",
        "--- a/calc.py",
        "+++ b/calc.py",
        "@@ -1,2 +1,6 @@",
        " def add(a, b):",
        "     return a + b",
        "+",
        "+",
        "+def sub(a, b):",
        "+    return a - b",
        "",
    ]
)
TEST_PATCH = "\n".join(
    [
        f"diff --git a/{TEST_FILE} b/{TEST_FILE}",
        f"--- a/{TEST_FILE}",
        f"+++ b/{TEST_FILE}",
        "@@ -1,5 +1,9 @@",
        "-from calc import add",
        "+from calc import add, sub",
        " ",
        " ",
        " def test_add():",
        "     assert add(1, 2) == 3",
        "+",
        "+",
        "+def test_sub():",
        "+    assert sub(3, 2) == 1",
        "",
    ]
)
DOCKERFILE = f"""\
FROM {BASE_IMAGE}
COPY --chown=1000:1000 testbed /testbed
WORKDIR /testbed
"""


def eval_script(base_commit: str) -> str:
    """The instance's own eval script, in the official script's shape."""
    return f"""\
#!/bin/bash
set -uxo pipefail
cd /testbed
git config --global --add safe.directory /testbed
git checkout {base_commit} {TEST_FILE}
git apply -v - <<'EOF_114329324912'
{TEST_PATCH}
EOF_114329324912
: '>>>>> Start Test Output'
PYTHONPATH=/testbed python -m pytest -p no:cacheprovider -rA {TEST_FILE}
: '>>>>> End Test Output'
git checkout {base_commit} {TEST_FILE}
"""


def make_dataset(root: Path) -> tuple[Path, Path, dict]:
    """(the dataset file, the folder of instance folders, the row)."""
    folders = root / "instances"
    context = folders / INSTANCE
    marker = uuid.uuid4().hex
    commit = git_repo(
        context / "testbed",
        {"calc.py": CALC, TEST_FILE: TESTS, "README": f"instance {marker}\n"},
    )
    (context / "Dockerfile").write_text(DOCKERFILE)
    (context / "eval.sh").write_text(eval_script(commit))
    row = {
        "instance_id": INSTANCE,
        "repo": "acme/calc",
        "base_commit": commit,
        "patch": GOLD_PATCH,
        "test_patch": TEST_PATCH,
        "problem_statement": "calc has no sub()",
        "version": "1.0",
        "FAIL_TO_PASS": json.dumps([f"{TEST_FILE}::test_sub"]),
        "PASS_TO_PASS": json.dumps([f"{TEST_FILE}::test_add"]),
    }
    dataset = root / "dataset.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    return dataset, folders, row


def remove_images(folders: Path) -> None:
    """Remove the images built from the instance folders under ``folders``."""
    from sandbox.environments import dockerfile

    for context in folders.iterdir():
        try:
            text = dockerfile.dockerfile_text(context)
            key = dockerfile.context_key(context, dockerfile_text=text)
        except dockerfile.DockerfileBuildError:
            continue
        subprocess.run(
            ["docker", "image", "rm", "-f", dockerfile.tag_for(key)], capture_output=True
        )
