"""The final-test script of a SWE-bench instance: the official harness's eval script.

The steps are those of ``swebench.harness.test_spec.python.make_eval_script_list_py``
(swebench 4.1.0, pinned in pyproject.toml), from the official specification of the
instance's (repo, version) (``MAP_REPO_VERSION_TO_SPECS``: ``eval_commands``, ``install``,
``test_cmd``) and the official ``get_test_directives``:

    activate the environment; cd /testbed; the spec's eval_commands; git status / show / diff
    (a record only); activate again; the spec's reinstall; reset the files the test patch
    touches to base_commit; apply the test patch; ": '>>>>> Start Test Output'"; the test
    command on the test files; ": '>>>>> End Test Output'"; reset the same files again.

run under ``#!/bin/bash`` / ``set -uxo pipefail`` with stdout and stderr merged, so the log
parsers and the grading read the same text as in the official harness. (A spec's
``pre_install`` belongs to building the instance image, not to this script.)

Two differences from the official script, both on purpose (the tests assert exactly these):

1. Activation. Each ``source /opt/miniconda3/bin/activate`` + ``conda activate testbed`` pair
   is one ``ENV_ACTIVATION`` line: those same two commands when the image has conda (the
   published images), the venv ``/opt/venv`` when the image has one (the images built offline
   by ``ab swebench build``), nothing otherwise.
2. Reset files. The files reset to base_commit are the ones the test patch's ``b/`` side
   names, new files included, as in the ``eval_script`` column SWE-bench publishes (checked on
   all 23 Lite dev rows). 4.1.0's own helper resets the ``a/`` side and leaves new files out,
   which differs on 3 of those 23 rows.

An instance whose (repo, version) the specification does not list (a custom dataset) gets the
same steps with the task's own test command and no eval commands or reinstall.

Any other language (Go, Java, JavaScript/TypeScript, Rust, C/C++, PHP, Ruby: ``languages``)
runs the package's own script unchanged (``make_eval_script_list``, joined as
``TestSpec.eval_script`` joins it): those images are only the official ones, which it was
written for. Its ``git apply`` is ``--verbose --reject``.

Pure: no Django. The official package is imported when a script is made, not at import.
"""

from __future__ import annotations

import re
from typing import Any, Final

TESTBED: Final = "/testbed"
START_MARKER: Final = ">>>>> Start Test Output"
END_MARKER: Final = ">>>>> End Test Output"
# The official heredoc delimiter (a test patch cannot contain it on a line of its own).
HEREDOC: Final = "EOF_114329324912"
CONDA_ACTIVATION: Final = ("source /opt/miniconda3/bin/activate", "conda activate testbed")
OFFLINE_VENV: Final = "/opt/venv"
ENV_ACTIVATION: Final = (
    f"if [ -f /opt/miniconda3/bin/activate ]; then {CONDA_ACTIVATION[0]}; {CONDA_ACTIVATION[1]}; "
    f"elif [ -f {OFFLINE_VENV}/bin/activate ]; then source {OFFLINE_VENV}/bin/activate; fi"
)
HEADER: Final = ("#!/bin/bash", "set -uxo pipefail")

_DIFF_TARGET = re.compile(r"diff --git a/.* b/(.*)")
# With ``set -x`` bash traces each command to stderr as "+ command".
_APPLY_TRACES = ("+ git apply -v -", "+ git apply --verbose --reject -")


def official_specs(repo: str, version: str) -> dict[str, Any]:
    """The official specification of (repo, version), or {} when it lists none (or no test
    command, as for dbt-core)."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    specs = MAP_REPO_VERSION_TO_SPECS.get(repo, {}).get(version) or {}
    return specs if specs.get("test_cmd") else {}


def official_directives(repo: str, test_patch: str) -> list[str]:
    """What the test command runs: the official ``get_test_directives``."""
    from swebench.harness.test_spec.python import get_test_directives

    return list(get_test_directives({"repo": repo, "test_patch": test_patch}))


def reset_files(test_patch: str) -> list[str]:
    """The files reset to base_commit before and after the tests (``b/`` side, in order)."""
    return _DIFF_TARGET.findall(test_patch)


def eval_script_lines(
    *, repo: str, version: str, base_commit: str, test_patch: str, test_command: str = ""
) -> list[str]:
    """The script's commands, one string each (the test patch's heredoc is one command).

    ``test_command`` is used only when the specification lists no (repo, version); then it
    must be given.
    """
    specs = official_specs(repo, version)
    if specs:
        test = " ".join([specs["test_cmd"], *official_directives(repo, test_patch)])
    elif test_command.strip():
        test = test_command
    else:
        raise ValueError(
            f"no official specification for {repo} {version} and no test command given"
        )
    reset = f"git checkout {base_commit} {' '.join(reset_files(test_patch))}"
    return [
        ENV_ACTIVATION,
        f"cd {TESTBED}",
        *specs.get("eval_commands", []),
        f"git config --global --add safe.directory {TESTBED}",
        f"cd {TESTBED}",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base_commit}",
        ENV_ACTIVATION,
        *([specs["install"]] if "install" in specs else []),
        reset,
        f"git apply -v - <<'{HEREDOC}'\n{test_patch}\n{HEREDOC}",
        f": '{START_MARKER}'",
        test,
        f": '{END_MARKER}'",
        reset,
    ]


def official_eval_script(
    *, instance_id: str, repo: str, version: str, base_commit: str, test_patch: str
) -> str:
    """The package's own eval script of a non-Python instance, unchanged."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
    from swebench.harness.test_spec.create_scripts import make_eval_script_list

    from tasks_app.swebench.languages import ENV_NAME

    instance = {
        "instance_id": instance_id,
        "repo": repo,
        "version": version,
        "base_commit": base_commit,
        "test_patch": test_patch,
    }
    specs = MAP_REPO_VERSION_TO_SPECS[repo][version]
    lines = make_eval_script_list(instance, specs, ENV_NAME, TESTBED, base_commit, test_patch)
    return "\n".join([*HEADER, *lines]) + "\n"


def eval_script(
    *,
    repo: str,
    version: str,
    base_commit: str,
    test_patch: str,
    test_command: str = "",
    instance_id: str = "",
) -> str:
    """The whole script, as the official ``TestSpec.eval_script`` joins it: the package's own
    for a non-Python repository, ours (``eval_script_lines``) for a Python one."""
    from tasks_app.swebench.languages import is_python

    if not is_python(repo):
        return official_eval_script(
            instance_id=instance_id,
            repo=repo,
            version=version,
            base_commit=base_commit,
            test_patch=test_patch,
        )
    lines = eval_script_lines(
        repo=repo,
        version=version,
        base_commit=base_commit,
        test_patch=test_patch,
        test_command=test_command,
    )
    return "\n".join([*HEADER, *lines]) + "\n"


def with_conda_activation(script: str) -> str:
    """``script`` with each ``ENV_ACTIVATION`` line back as the official two conda lines."""
    return script.replace(ENV_ACTIVATION, "\n".join(CONDA_ACTIVATION))


def patch_apply_failed(output: str) -> bool:
    """Whether the script's ``git apply`` of the test patch failed (the official script goes
    on to run the tests anyway): git's "error: ..." lines between its trace and the start
    marker's."""
    start = min((i for i in map(output.find, _APPLY_TRACES) if i != -1), default=-1)
    if start == -1:
        return False
    end = output.find(START_MARKER, start)
    applied = output[start : end if end != -1 else len(output)]
    return any(line.startswith("error: ") for line in applied.splitlines())
