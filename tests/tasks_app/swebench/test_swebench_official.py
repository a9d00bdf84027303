"""Differential tests against the official SWE-bench package (swebench 4.1.0, the pinned
reference), on the real public data in ../shared/swebench: every instance's test command,
test files and eval script; every log's status map; every report's grade.

Equal everywhere except the cases decided on purpose, each asserted here as that difference:
the eval script's activation line and reset file list (``eval_script``'s docstring), and a
SKIPPED test's place in the graded lists (``grading``'s docstring).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import swebench
from swebench.harness import grading as official
from swebench.harness.constants import (
    END_TEST_OUTPUT,
    MAP_REPO_TO_EXT,
    MAP_REPO_VERSION_TO_SPECS,
    START_TEST_OUTPUT,
)
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
from swebench.harness.log_parsers import python as official_parsers
from swebench.harness.test_spec.python import get_test_directives, make_eval_script_list_py
from swebench.harness.test_spec.test_spec import TestSpec as OfficialSpec
from swebench.harness.utils import get_modified_files

from tasks_app.swebench.eval_script import (
    CONDA_ACTIVATION,
    END_MARKER,
    ENV_ACTIVATION,
    START_MARKER,
    eval_script,
    eval_script_lines,
    reset_files,
    with_conda_activation,
)
from tasks_app.swebench.fields import decode_test_list
from tasks_app.swebench.grading import (
    grade_attempt_output,
    grade_from_tests_status,
    grade_status_map,
    status_map_from_tests_status,
)
from tasks_app.swebench.parsers import parse_log, parse_test_output, parser_for
from tasks_app.swebench.test_commands import command_line, directives_for, runner_for
from tests.conftest import REPO_ROOT
from tests.support.swebench_fixtures import SHARED_SWEBENCH, rows

LITE_DEV = SHARED_SWEBENCH / "lite_dev.jsonl"
LITE_DEV_HARNESS = SHARED_SWEBENCH / "lite_dev_harness.jsonl"
VERIFIED = SHARED_SWEBENCH / "verified_sample.jsonl"
MINI_RUN = SHARED_SWEBENCH / "mini_swe_agent_run"
INSTANCE_FILES = (LITE_DEV, LITE_DEV_HARNESS, VERIFIED, MINI_RUN / "instances.jsonl")
F2P, P2P = "FAIL_TO_PASS", "PASS_TO_PASS"
PIN = "4.1.0"


def shared_rows(path: Path) -> list[dict]:
    # CI runs from a fresh clone with shared/ beside it. Without it the parametrised tests
    # below have no cases and test_the_shared_data_is_here fails, naming the folder (an
    # error while collecting would stop the whole suite instead).
    return rows(path) if path.exists() else []


def test_the_shared_data_is_here():
    for path in (*INSTANCE_FILES, SHARED_SWEBENCH / "legacy_logs", MINI_RUN / "logs"):
        assert path.exists(), f"{path} is missing: set AB_SHARED_DIR to the shared folder"


def all_instances() -> list[dict]:
    return [row for path in INSTANCE_FILES for row in shared_rows(path)]


def instance_id(row: dict) -> str:
    return row["instance_id"]


def official_spec(row: dict) -> OfficialSpec:
    """The official TestSpec of an instance, without make_test_spec's environment scripts
    (those download requirement files from GitHub)."""
    return OfficialSpec(
        instance_id=row["instance_id"],
        repo=row["repo"],
        version=row["version"],
        repo_script_list=[],
        eval_script_list=[],
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=decode_test_list(row[F2P]),
        PASS_TO_PASS=decode_test_list(row[P2P]),
        language="py",
        docker_specs={},
        namespace=None,
    )


def official_report(spec: OfficialSpec, log_path: Path) -> dict:
    prediction = {"instance_id": spec.instance_id, "model_patch": "x", "model_name_or_path": "m"}
    return official.get_eval_report(spec, prediction, str(log_path), include_tests_status=True)[
        spec.instance_id
    ]


def test_it_pins_the_official_package_it_is_compared_with():
    assert swebench.__version__ == PIN
    assert (START_MARKER, END_MARKER) == (START_TEST_OUTPUT, END_TEST_OUTPUT)
    assert f'"swebench=={PIN}"' in (REPO_ROOT / "pyproject.toml").read_text()
    assert len(all_instances()) == 23 + 23 + 6 + 20


# --- Test commands, test files and eval scripts -----------------------------------------------


@pytest.mark.parametrize("row", all_instances(), ids=instance_id)
def test_it_runs_the_official_test_command_on_the_official_test_files(row):
    specs = MAP_REPO_VERSION_TO_SPECS[row["repo"]][row["version"]]
    official_files = get_test_directives(row)

    assert directives_for(row["repo"], row["test_patch"]) == official_files
    assert command_line(row["repo"], row["version"], row["test_patch"]) == " ".join(
        [specs["test_cmd"], *official_files]
    )
    official_lines = make_eval_script_list_py(
        row, specs, "testbed", "/testbed", row["base_commit"], row["test_patch"]
    )
    start = official_lines.index(f": '{START_MARKER}'")
    assert official_lines[start + 1] == command_line(row["repo"], row["version"], row["test_patch"])


@pytest.mark.parametrize("row", all_instances(), ids=instance_id)
def test_its_eval_script_is_the_official_one_but_for_activation_and_reset_files(row):
    specs = MAP_REPO_VERSION_TO_SPECS[row["repo"]][row["version"]]
    base = row["base_commit"]
    ours = eval_script_lines(
        repo=row["repo"], version=row["version"], base_commit=base, test_patch=row["test_patch"]
    )
    theirs = make_eval_script_list_py(row, specs, "testbed", "/testbed", base, row["test_patch"])

    # Decided difference 1: each conda pair is one activation line that also knows /opt/venv.
    joined = "\n".join(theirs).replace("\n".join(CONDA_ACTIVATION), ENV_ACTIVATION)
    theirs = joined.split("\n")
    ours = "\n".join(ours).split("\n")
    assert len(ours) == len(theirs)
    # Decided difference 2: the files reset are the test patch's b/ side, new files included.
    our_reset = f"git checkout {base} {' '.join(reset_files(row['test_patch']))}"
    their_reset = f"git checkout {base} {' '.join(get_modified_files(row['test_patch']))}"
    differing = [(o, t) for o, t in zip(ours, theirs, strict=True) if o != t]
    assert differing == ([(our_reset, their_reset)] * 2 if our_reset != their_reset else [])
    adds_or_renames = re.search(r"^(new file mode|rename to) ", row["test_patch"], re.M)
    assert (our_reset != their_reset) == bool(adds_or_renames)


def test_the_reset_rule_decides_three_lite_dev_scripts():
    differing = [
        row["instance_id"]
        for row in shared_rows(LITE_DEV_HARNESS)
        if reset_files(row["test_patch"]) != get_modified_files(row["test_patch"])
    ]
    assert sorted(differing) == [
        "pydicom__pydicom-901",
        "sqlfluff__sqlfluff-1733",
        "sqlfluff__sqlfluff-2419",
    ]


@pytest.mark.parametrize("row", shared_rows(LITE_DEV_HARNESS), ids=instance_id)
def test_its_eval_script_equals_the_published_eval_script_column(row):
    script = eval_script(
        repo=row["repo"],
        version=row["version"],
        base_commit=row["base_commit"],
        test_patch=row["test_patch"],
    )

    assert script.count(ENV_ACTIVATION) == 2
    assert with_conda_activation(script) == row["eval_script"]
    # The published log_parser column names the official parser we use for the repo.
    assert getattr(official_parsers, row["log_parser"]) is parser_for(row["repo"])
    assert row["eval_type"] == "pass_and_fail"


def test_its_runner_table_equals_every_python_spec_of_the_official_table():
    checked = 0
    for repo, versions in MAP_REPO_VERSION_TO_SPECS.items():
        if MAP_REPO_TO_EXT.get(repo) != "py" or repo == "swe-bench/humaneval":
            continue
        for version, specs in versions.items():
            if "test_cmd" in specs:  # dbt-core lists none
                assert runner_for(repo, version) == specs["test_cmd"], (repo, version)
                checked += 1
    assert checked == 282


# --- Log parsers: status maps of real logs ----------------------------------------------------

LEGACY_LOGS = sorted((SHARED_SWEBENCH / "legacy_logs").glob("*.eval.log"))
# The old harness's markers around the tests of the test patch: where a log of the current
# harness has its start and end markers.
_LEGACY_TESTS = re.compile(
    r"(>>>>> Applied Patch \(test\)\n)(.*?)(>>>>> (?:All Tests Passed|Some Tests Failed))", re.S
)


def legacy_instance(path: Path) -> tuple[str, str, str]:
    """(instance id, repo, version) of a legacy log, read from its name and its testbed."""
    iid = path.name.split(".", 1)[0]
    owner, rest = iid.split("__", 1)
    repo = f"{owner}/{rest.rsplit('-', 1)[0]}"
    version = re.search(
        rf"{re.escape(owner)}__{re.escape(rest.rsplit('-', 1)[0])}__([\d.]+)", path.read_text()
    ).group(1)
    return iid, repo, version


def test_there_are_five_legacy_logs():
    assert len(LEGACY_LOGS) == 5


@pytest.mark.parametrize("path", LEGACY_LOGS, ids=lambda p: p.name.split(".")[0])
def test_each_legacy_log_parses_to_the_official_status_map(path, tmp_path):
    iid, repo, version = legacy_instance(path)
    log = path.read_text()
    official_map = MAP_REPO_TO_PARSER[repo](log, None)
    assert official_map  # real statuses, not two empty maps
    assert parse_log(log, repo) == official_map

    # Without the current harness's markers there is no test section, for both.
    row = {"instance_id": iid, "repo": repo, "version": version, F2P: "[]", P2P: "[]"}
    assert official.get_logs_eval(official_spec(row), str(path)) == ({}, False)
    assert parse_test_output(log, repo) is None

    # The same output between the markers, set -x style: the same statuses, the same grade.
    marked = _LEGACY_TESTS.sub(
        lambda m: f"{m[1]}+ : '{START_MARKER}'\n{m[2]}+ : '{END_MARKER}'\n{m[3]}", log
    )
    assert marked != log
    marked_path = tmp_path / "test_output.txt"
    marked_path.write_text(marked)
    official_map, found = official.get_logs_eval(official_spec(row), str(marked_path))
    assert found and official_map
    assert parse_test_output(marked, repo) == official_map

    # No test lists come with these logs: grade against lists drawn from the log itself, half
    # of its tests each side plus one that never ran.
    names = sorted(official_map)
    row[F2P] = json.dumps([*names[::2], "never::ran"])
    row[P2P] = json.dumps(names[1::2])
    spec = official_spec(row)
    report = official_report(spec, marked_path)
    ours = grade_attempt_output(
        marked, fail_to_pass=spec.FAIL_TO_PASS, pass_to_pass=spec.PASS_TO_PASS, repo=repo
    )
    assert ours.resolved is report["resolved"] is False
    assert_same_lists(ours.test_results, report["tests_status"], official_map)


def assert_same_lists(ours: dict, theirs: dict, statuses: dict[str, str]) -> None:
    """Our success/failure lists equal the official ones, but for the decided SKIPPED rule:
    4.1.0 puts a SKIPPED test in neither list; we count it failed (FAIL_TO_PASS) or kept
    (PASS_TO_PASS), as swebench 5.x does."""
    for name, skipped_goes_to in ((F2P, "failure"), (P2P, "success")):
        for side in ("success", "failure"):
            expected = list(theirs[name][side])
            if side == skipped_goes_to:
                expected = [
                    t for t in ours[name][side] if statuses.get(t) == "SKIPPED" or t in expected
                ]
            assert ours[name][side] == expected, (name, side)


# --- Grades of real reports ------------------------------------------------------------------


def report_cases() -> list[tuple[str, dict, Path]]:
    cases = []
    for row in shared_rows(VERIFIED):
        cases.append(
            (
                "sample",
                row,
                SHARED_SWEBENCH / "sample_reports" / f"{row['instance_id']}.report.json",
            )
        )
    for row in shared_rows(MINI_RUN / "instances.jsonl"):
        cases.append(("mini", row, MINI_RUN / "logs" / row["instance_id"] / "report.json"))
    return cases


def test_every_report_is_checked():
    assert len(report_cases()) == 6 + 20
    assert len(list((SHARED_SWEBENCH / "sample_reports").glob("*.report.json"))) == 6
    assert len(list((MINI_RUN / "logs").glob("*/report.json"))) == 20


@pytest.mark.parametrize("case", report_cases(), ids=lambda c: f"{c[0]}-{c[1]['instance_id']}")
def test_each_report_grades_as_the_official_harness_graded_it(case):
    _, row, path = case
    report = json.loads(path.read_text())
    report = report.get(row["instance_id"], report)  # wrapped or not
    tests_status = report["tests_status"]
    f2p, p2p = decode_test_list(row[F2P]), decode_test_list(row[P2P])

    # The recorded lists re-grade to the recorded verdict, with both resolution functions.
    assert official.get_resolution_status(tests_status) == (
        "RESOLVED_" + grade_from_tests_status(tests_status).grade
    )
    assert grade_from_tests_status(tests_status).resolved is report["resolved"]

    # The statuses the report implies, graded against the instance's lists by both.
    statuses = status_map_from_tests_status(tests_status)
    theirs = official.get_eval_tests_report(statuses, {F2P: f2p, P2P: p2p})
    ours = grade_status_map(statuses, fail_to_pass=f2p, pass_to_pass=p2p)
    assert ours.test_results[F2P] == theirs[F2P] and ours.test_results[P2P] == theirs[P2P]
    for name in (F2P, P2P):
        assert ours.test_results[name] == {k: tests_status[name][k] for k in ("success", "failure")}
    assert ours.resolved is report["resolved"]
    assert f"RESOLVED_{ours.grade}" == official.get_resolution_status(theirs)


def test_the_reports_hold_resolved_and_unresolved_instances():
    resolved = [json.loads(p.read_text())["resolved"] for _, _, p in report_cases()]
    assert resolved.count(True) == 3 + 11 and resolved.count(False) == 3 + 9


# --- Grading rules, status by status ---------------------------------------------------------


@pytest.mark.parametrize("status", ["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", None])
@pytest.mark.parametrize("side", [F2P, P2P])
def test_each_status_grades_as_the_official_harness_but_skipped(status, side):
    statuses = {"other": "PASSED"} | ({"t": status} if status else {})
    lists = {F2P: ["other"], P2P: ["other"]}
    lists[side] = ["t", "other"]

    theirs = official.get_eval_tests_report(statuses, lists)
    ours = grade_status_map(statuses, fail_to_pass=lists[F2P], pass_to_pass=lists[P2P])

    if status == "SKIPPED":
        # Decided: 4.1.0 puts it in neither list; F2P it fails here (so the grade differs:
        # PARTIAL here, FULL there), P2P it is kept (the same grade).
        assert "t" not in theirs[side]["success"] + theirs[side]["failure"]
        kept = side == P2P
        assert ("t" in ours.test_results[side]["success"]) is kept
        assert ("t" in ours.test_results[side]["failure"]) is not kept
        assert official.get_resolution_status(theirs) == "RESOLVED_FULL"
        assert ours.grade == ("FULL" if kept else "PARTIAL")
    else:
        assert ours.test_results[F2P] == theirs[F2P] and ours.test_results[P2P] == theirs[P2P]
        assert f"RESOLVED_{ours.grade}" == official.get_resolution_status(theirs)


def test_a_fail_to_pass_list_that_only_skips_is_no_here_and_full_in_4_1_0():
    statuses = {"a": "SKIPPED", "b": "SKIPPED", "c": "PASSED"}
    lists = {F2P: ["a", "b"], P2P: ["c"]}
    assert official.get_resolution_status(official.get_eval_tests_report(statuses, lists)) == (
        "RESOLVED_FULL"
    )
    assert grade_status_map(statuses, fail_to_pass=["a", "b"], pass_to_pass=["c"]).grade == "NO"


# --- Reading the test section ----------------------------------------------------------------

SECTION_CASES = {
    "both markers": f"x\n+ : '{START_MARKER}'\nPASSED a.py::t\n+ : '{END_MARKER}'\n"
    "PASSED a.py::u\n",
    "no end marker": f"+ : '{START_MARKER}'\nPASSED a.py::t\n",
    "no markers": "PASSED a.py::t\n",
    "an error code": f">>>>> Tests Timed Out\n{START_MARKER}\nPASSED a.py::t\n{END_MARKER}\n",
    "empty section": f"PASSED a.py::t\n{START_MARKER}\n{END_MARKER}\nFAILED a.py::u - x\n",
    "two sections": f"{START_MARKER}\nPASSED a.py::t\n{END_MARKER}\n{START_MARKER}\n"
    f"FAILED a.py::t\n{END_MARKER}\n",
}


@pytest.mark.parametrize("name", SECTION_CASES)
def test_the_test_section_is_read_as_get_logs_eval_reads_it(name, tmp_path):
    log = SECTION_CASES[name]
    path = tmp_path / "test_output.txt"
    path.write_text(log)
    row = {"instance_id": "psf__requests-1", "repo": "psf/requests", "version": "2.4"}
    statuses, found = official.get_logs_eval(official_spec(row | {F2P: "[]", P2P: "[]"}), str(path))

    ours = parse_test_output(log, "psf/requests")

    assert ours == (statuses if found else None)
