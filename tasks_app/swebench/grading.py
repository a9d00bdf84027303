"""SWE-bench grading as pure functions of stored output: FULL, PARTIAL or NO.

The rules are the official harness's (``get_eval_tests_report`` / ``get_resolution_status``):

* a FAIL_TO_PASS test succeeds when PASSED or XFAIL, fails when FAILED, ERROR, SKIPPED or
  missing from the log;
* a PASS_TO_PASS test is kept when PASSED, XFAIL or SKIPPED, fails when FAILED, ERROR or
  missing;
* a test with any other status (a parser can read one from a stray line, e.g. ``ERROR:``) is
  in neither list, as in the official harness;
* FULL: every FAIL_TO_PASS and PASS_TO_PASS test succeeds (an empty list counts as all);
  PARTIAL: some but not all FAIL_TO_PASS succeed and every PASS_TO_PASS does; NO otherwise.
* resolved only for FULL.
* the repositories the package grades "fail only" (``FAIL_ONLY_REPOS``: Chart.js, p5.js,
  marked, whose parsers read failures alone): a test fails only when FAILED, else succeeds.

The SKIPPED rules are swebench 5.x's. The pinned 4.1.0 puts a SKIPPED test in neither list,
so a patch that makes every FAIL_TO_PASS test skip grades FULL there and NO here; for
PASS_TO_PASS the grade is the same either way, only the lists differ (the test is a success
here, in no list there). Everything else equals 4.1.0
(``tests/tasks_app/swebench/test_swebench_official.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks_app.swebench.parsers import (
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    XFAIL,
    StatusMap,
    parse_test_output,
)

FAIL_TO_PASS = "FAIL_TO_PASS"
PASS_TO_PASS = "PASS_TO_PASS"


class Grade(enum.StrEnum):
    FULL = "FULL"
    PARTIAL = "PARTIAL"
    NO = "NO"


@dataclass(frozen=True)
class GradeResult:
    """``test_results`` is stored as ``Attempt.test_results``:
    ``{"FAIL_TO_PASS": {"success": [...], "failure": [...]}, "PASS_TO_PASS": {...}}``."""

    grade: str
    resolved: bool
    test_results: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @property
    def fail_to_pass_rate(self) -> float:
        return _rate(self.test_results.get(FAIL_TO_PASS, {}))

    @property
    def pass_to_pass_rate(self) -> float:
        return _rate(self.test_results.get(PASS_TO_PASS, {}))


def _rate(lists: Mapping[str, list[str]]) -> float:
    success = len(lists.get("success", []))
    total = success + len(lists.get("failure", []))
    return 1.0 if total == 0 else success / total


def grade_test_results(test_results: dict[str, dict[str, list[str]]]) -> GradeResult:
    """The grade of success/failure lists (the harness's resolution status)."""
    f2p = _rate(test_results.get(FAIL_TO_PASS, {}))
    p2p = _rate(test_results.get(PASS_TO_PASS, {}))
    if f2p == 1 and p2p == 1:
        grade = Grade.FULL
    elif 0 < f2p < 1 and p2p == 1:
        grade = Grade.PARTIAL
    else:
        grade = Grade.NO
    return GradeResult(grade=grade.value, resolved=grade is Grade.FULL, test_results=test_results)


def grade_status_map(
    statuses: StatusMap,
    *,
    fail_to_pass: Iterable[str],
    pass_to_pass: Iterable[str],
    fail_only: bool = False,
) -> GradeResult:
    """Grade per-test statuses against an instance's two test lists (``fail_only``: the
    package's rule for ``FAIL_ONLY_REPOS``)."""
    if fail_only:
        return grade_test_results(
            {
                FAIL_TO_PASS: _split_fail_only(fail_to_pass, statuses),
                PASS_TO_PASS: _split_fail_only(pass_to_pass, statuses),
            }
        )
    results = {
        FAIL_TO_PASS: _split(
            fail_to_pass, statuses, kept=(PASSED, XFAIL), failed=(FAILED, ERROR, SKIPPED)
        ),
        PASS_TO_PASS: _split(
            pass_to_pass, statuses, kept=(PASSED, XFAIL, SKIPPED), failed=(FAILED, ERROR)
        ),
    }
    return grade_test_results(results)


def _split(
    tests: Iterable[str],
    statuses: StatusMap,
    *,
    kept: tuple[str, ...],
    failed: tuple[str, ...],
) -> dict:
    success: list[str] = []
    failure: list[str] = []
    for test in tests:
        status = statuses.get(test)
        if status in kept:
            success.append(test)
        elif status is None or status in failed:
            failure.append(test)
    return {"success": success, "failure": failure}


def _split_fail_only(tests: Iterable[str], statuses: StatusMap) -> dict:
    names = list(tests)
    return {
        "success": [test for test in names if statuses.get(test) != FAILED],
        "failure": [test for test in names if statuses.get(test) == FAILED],
    }


def grade_attempt_output(
    output: str,
    *,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    repo: str,
    instance_id: str = "",
    version: str = "",
) -> GradeResult:
    """Grade the output of an eval script (the pipeline calls this after the final tests),
    read by the official parser of ``repo``, whatever its language.

    Output with no test section (a marker missing: the script was cut short) has no
    statuses, so every test fails, as in the official harness.
    """
    from swebench.harness.constants import FAIL_ONLY_REPOS

    statuses = parse_test_output(output, repo, instance_id=instance_id, version=version)
    return grade_status_map(
        statuses or {},
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        # Without a test section the package reports nothing applied: unresolved, even here.
        fail_only=repo in FAIL_ONLY_REPOS and statuses is not None,
    )


def grade_from_tests_status(tests_status: Mapping[str, Any]) -> GradeResult:
    """Grade a harness report's ``tests_status`` (its success/failure lists as recorded)."""
    results = {
        name: {
            "success": list((tests_status.get(name) or {}).get("success") or []),
            "failure": list((tests_status.get(name) or {}).get("failure") or []),
        }
        for name in (FAIL_TO_PASS, PASS_TO_PASS)
    }
    return grade_test_results(results)


def status_map_from_tests_status(tests_status: Mapping[str, Any]) -> StatusMap:
    """Per-test statuses implied by a report: its successes passed, its failures failed."""
    statuses: StatusMap = {}
    for lists in tests_status.values():
        if not isinstance(lists, Mapping):
            continue
        for test in lists.get("failure") or []:
            statuses[test] = "FAILED"
        for test in lists.get("success") or []:
            statuses[test] = PASSED
    return statuses
