"""Log parsers and grading on real SWE-bench logs and reports (pure functions, no database)."""

from __future__ import annotations

import json

import pytest

from tasks_app.swebench.fields import decode_test_list, image_key, image_name
from tasks_app.swebench.grading import (
    GradeResult,
    grade_attempt_output,
    grade_from_tests_status,
    grade_status_map,
    status_map_from_tests_status,
)
from tasks_app.swebench.parsers import (
    END_MARKER,
    START_MARKER,
    marked_section,
    parse_log,
    parse_test_output,
)
from tasks_app.swebench.test_commands import command_for, directives_for
from tests.support.swebench_fixtures import LEGACY_LOGS, REPORTS, VERIFIED, rows


def legacy(prefix: str) -> str:
    return next(LEGACY_LOGS.glob(f"{prefix}*.eval.log")).read_text()


# --- The six published reports re-grade to their recorded outcome ----------------------------


@pytest.mark.parametrize("instance", rows(VERIFIED), ids=lambda r: r["instance_id"])
def test_each_sample_report_regrades_to_its_recorded_resolved(instance):
    report = json.loads((REPORTS / f"{instance['instance_id']}.report.json").read_text())
    statuses = status_map_from_tests_status(report["tests_status"])

    result = grade_status_map(
        statuses,
        fail_to_pass=decode_test_list(instance["FAIL_TO_PASS"]),
        pass_to_pass=decode_test_list(instance["PASS_TO_PASS"]),
    )

    assert result.resolved is report["resolved"]
    assert (result.grade == "FULL") is report["resolved"]
    # The same verdict straight from the report's lists.
    assert grade_from_tests_status(report["tests_status"]).resolved is report["resolved"]
    # The per-test split agrees with what the harness recorded.
    assert sorted(result.test_results["FAIL_TO_PASS"]["failure"]) == sorted(
        report["tests_status"]["FAIL_TO_PASS"]["failure"]
    )


def test_the_sample_reports_split_three_resolved_three_not():
    graded = {
        path.name.removesuffix(".report.json"): grade_from_tests_status(
            json.loads(path.read_text())["tests_status"]
        )
        for path in REPORTS.glob("*.report.json")
    }
    assert {k for k, g in graded.items() if g.resolved} == {
        "django__django-10097",
        "psf__requests-1142",
        "psf__requests-1724",
    }
    # astropy-13977 fixed 12 of its 20 FAIL_TO_PASS tests but broke a PASS_TO_PASS one: NO.
    partial = graded["astropy__astropy-13977"]
    assert partial.grade == "NO" and partial.fail_to_pass_rate == pytest.approx(0.6)
    assert partial.pass_to_pass_rate < 1


# --- Grading rules --------------------------------------------------------------------------


def test_full_partial_and_no_follow_the_harness_rules():
    f2p = ["a", "b"]
    p2p = ["c", "d"]
    full = grade_status_map(
        {"a": "PASSED", "b": "XFAIL", "c": "PASSED", "d": "SKIPPED"},
        fail_to_pass=f2p,
        pass_to_pass=p2p,
    )
    assert (full.grade, full.resolved) == ("FULL", True)
    partial = grade_status_map(
        {"a": "PASSED", "b": "FAILED", "c": "PASSED", "d": "PASSED"},
        fail_to_pass=f2p,
        pass_to_pass=p2p,
    )
    assert (partial.grade, partial.resolved) == ("PARTIAL", False)
    # A PASS_TO_PASS test missing from the log fails: NO, even with every FAIL_TO_PASS fixed.
    broke = grade_status_map(
        {"a": "PASSED", "b": "PASSED", "c": "PASSED"}, fail_to_pass=f2p, pass_to_pass=p2p
    )
    assert broke.grade == "NO"
    assert broke.test_results["PASS_TO_PASS"] == {"success": ["c"], "failure": ["d"]}
    # A skipped FAIL_TO_PASS test is not a fix; a missing one (an XPASS line is read as no
    # status) is not either.
    skipped = grade_status_map(
        {"a": "SKIPPED", "c": "PASSED", "d": "PASSED"}, fail_to_pass=f2p, pass_to_pass=p2p
    )
    assert skipped.grade == "NO" and skipped.test_results["FAIL_TO_PASS"]["failure"] == f2p
    # A status no rule names (a stray "ERROR: ..." line reads as status "ERROR:") puts its
    # test in neither list, as the official harness does.
    stray = grade_status_map(
        {"a": "PASSED", "b": "ERROR:", "c": "PASSED", "d": "PASSED"},
        fail_to_pass=f2p,
        pass_to_pass=p2p,
    )
    assert stray.test_results["FAIL_TO_PASS"] == {"success": ["a"], "failure": []}
    assert stray.grade == "FULL"


def test_grade_result_is_a_frozen_dataclass_with_the_agreed_shape():
    result = grade_attempt_output(
        f"{START_MARKER}\nPASSED t.py::a\nFAILED t.py::b - boom\n{END_MARKER}\n",
        fail_to_pass=["t.py::a"],
        pass_to_pass=["t.py::b"],
        repo="pallets/flask",
    )
    assert isinstance(result, GradeResult)
    assert result.test_results == {
        "FAIL_TO_PASS": {"success": ["t.py::a"], "failure": []},
        "PASS_TO_PASS": {"success": [], "failure": ["t.py::b"]},
    }
    with pytest.raises(AttributeError):
        result.grade = "FULL"  # type: ignore[misc]


def test_only_the_marked_section_is_read():
    log = (
        "PASSED t.py::a\n"  # before the markers: setup noise, ignored
        f"+ : '{START_MARKER}'\n"
        "FAILED t.py::a - assert 0\nPASSED t.py::b\n"
        f"+ : '{END_MARKER}'\n"
        "PASSED t.py::c\n"
    )
    # Cut at the markers themselves, as the official get_logs_eval cuts.
    assert marked_section(log) == "'\nFAILED t.py::a - assert 0\nPASSED t.py::b\n+ : '"
    assert parse_test_output(log, "pytest-dev/pytest") == {
        "t.py::a": "FAILED",
        "t.py::b": "PASSED",
    }
    result = grade_attempt_output(
        log, fail_to_pass=["t.py::a"], pass_to_pass=["t.py::b", "t.py::c"], repo="psf/requests"
    )
    assert result.grade == "NO"
    assert result.test_results["PASS_TO_PASS"]["failure"] == ["t.py::c"]


# --- The five legacy logs parse into per-test statuses ---------------------------------------


def test_the_django_log_parses_every_test_ok():
    statuses = parse_log(legacy("django__django-11099"), "django/django")
    assert len(statuses) == 22 and set(statuses.values()) == {"PASSED"}
    assert (
        statuses["test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)"]
        == "PASSED"
    )
    assert (
        statuses["test_validate_password (auth_tests.test_validators.PasswordValidationTest)"]
        == "PASSED"
    )


def test_the_sympy_log_parses_without_the_last_test_of_a_file():
    statuses = parse_log(legacy("sympy__sympy-24152"), "sympy/sympy")
    assert statuses["test_tensor_product_expand"] == "PASSED"
    # "test_eval_trace ok      [OK]": the file's verdict shares the line and the official
    # parser, which the test lists were made with, does not see the test (decided: official).
    assert "test_eval_trace ok" in legacy("sympy__sympy-24152")
    assert "test_eval_trace" not in statuses
    assert len(statuses) == 7


def test_the_requests_log_parses_its_one_failure():
    statuses = parse_log(legacy("psf__requests-2317"), "psf/requests")
    assert statuses["test_requests.py::RequestsTestCase::test_conflicting_post_params"] == (
        "FAILED"
    )
    assert statuses["test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_ALTERNATIVE"] == (
        "PASSED"
    )
    assert sum(s == "PASSED" for s in statuses.values()) == 142


def test_the_pytest_log_parses_xfail_and_errors():
    statuses = parse_log(legacy("pytest-dev__pytest-7373"), "pytest-dev/pytest")
    assert statuses["testing/test_mark.py::TestKeywordSelection::test_keyword_extra_dash"] == (
        "XFAIL"
    )
    assert statuses["testing/test_mark.py::test_marked_class_run_twice"] == "PASSED"
    assert statuses["testing/test_mark.py::TestFunctional::test_mark_closest"] == "PASSED"
    # Nested pytest runs print their own summaries; like the harness we read them too.
    assert statuses["test_select_simple.py::test_one"] == "FAILED"


def test_the_sphinx_log_parses_through_its_colour_codes():
    statuses = parse_log(legacy("sphinx-doc__sphinx-8713"), "sphinx-doc/sphinx")
    name = "tests/test_ext_napoleon_docstring.py::TestNumpyDocstring::test_token_type_invalid"
    assert statuses[name] == "FAILED"
    passed = "tests/test_ext_napoleon_docstring.py::NumpyDocstringTest::test_docstrings"
    assert statuses[passed] == "PASSED"
    assert sum(s == "PASSED" for s in statuses.values()) == 46


def test_the_legacy_requests_log_grades_against_lists():
    log = legacy("psf__requests-2317")
    ok = "test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_ALTERNATIVE"
    bad = "test_requests.py::RequestsTestCase::test_conflicting_post_params"
    statuses = parse_log(log, "psf/requests")
    assert grade_status_map(statuses, fail_to_pass=[ok], pass_to_pass=[]).resolved
    assert not grade_status_map(statuses, fail_to_pass=[ok], pass_to_pass=[bad]).resolved
    # As attempt output it has no test section (the old harness wrote no markers): like the
    # official get_logs_eval, no statuses, so nothing passes.
    assert parse_test_output(log, "psf/requests") is None
    graded = grade_attempt_output(log, fail_to_pass=[ok], pass_to_pass=[], repo="psf/requests")
    assert graded.grade == "NO" and graded.test_results["FAIL_TO_PASS"]["failure"] == [ok]


# --- Other runner formats --------------------------------------------------------------------


def test_pytest_reads_summary_lines_as_the_official_parser_does():
    log = (
        "tests/a.py::test_x PASSED\n"
        "FAILED tests/a.py::test_y - assert 1 == 2\n"
        "SKIPPED [2] tests/a.py:10: no network\n"
        "SKIPPED tests/a.py::test_z\n"
        "XPASS tests/a.py::test_w reason\n"
        "ERROR tests/a.py::test_v - fixture 'db' not found\n"
        "PASSED tests/a.py::test_u[a b]\n"
    )
    assert parse_log(log, "pytest-dev/pytest") == {
        # A verbose line is not read (only astropy's, scikit-learn's and sphinx's parser
        # reads them); "[2]" is a skip count read as a test; XPASS is no status; an id with
        # a space is cut there, as the test lists have it.
        "tests/a.py::test_y": "FAILED",
        "[2]": "SKIPPED",
        "tests/a.py::test_z": "SKIPPED",
        "tests/a.py::test_v": "ERROR",
        "tests/a.py::test_u[a": "PASSED",
    }
    assert parse_log(log, "sphinx-doc/sphinx")["tests/a.py::test_x"] == "PASSED"


def test_pytest_options_keep_only_the_last_part_of_a_path_parameter():
    log = "PASSED pydicom/tests/test_fs.py::test_read[/opt/data/ct_small.dcm]\n"
    assert parse_log(log, "pydicom/pydicom") == {
        "pydicom/tests/test_fs.py::test_read[/ct_small.dcm]": "PASSED"
    }


def test_django_reads_docstring_variants_and_failure_headers():
    log = (
        "test_a (app.tests.T) ... ok\n"
        "test_b (app.tests.T)\n"
        "Docstring of b. ... FAIL\n"
        "test_c (app.tests.T) ... skipped 'no db'\n"
        "test_d (app.tests.T) ... Some output printed by the test\n"
        "ok\n"
        "test_e (app.tests.T) ... ERROR\n"
        "FAIL: test_f (app.tests.T)\n"
    )
    statuses = parse_log(log, "django/django")
    assert statuses["test_a (app.tests.T)"] == "PASSED"
    assert statuses["Docstring of b."] == "FAILED"
    assert statuses["test_c (app.tests.T)"] == "SKIPPED"
    assert statuses["test_d (app.tests.T)"] == "PASSED"
    assert statuses["test_e (app.tests.T)"] == "ERROR"
    assert statuses["test_f"] == "FAILED"


def test_sympy_reads_failures_and_errors():
    log = (
        "test_one ok\ntest_two F\ntest_three E\n"
        "________ sympy/core/tests/test_basic.py:test_four ________\n"
    )
    assert parse_log(log, "sympy/sympy") == {
        "test_one": "PASSED",
        "test_two": "FAILED",
        "test_three": "ERROR",
        "sympy/core/tests/test_basic.py:test_four": "FAILED",
    }


def test_matplotlib_normalises_mouse_buttons_and_seaborn_reads_its_lines():
    matplotlib = "PASSED lib/t.py::test_click[MouseButton.LEFT]\n"
    assert parse_log(matplotlib, "matplotlib/matplotlib") == {"lib/t.py::test_click[1]": "PASSED"}
    # Decided (official): a skip count is a "test" named [N]; a message after " - " is dropped
    # from a FAILED line; an id with a space is cut there.
    summary = (
        "SKIPPED [1] lib/t.py:10: needs a display\n"
        "FAILED lib/t.py::test_draw - AssertionError: images differ\n"
        "PASSED lib/t.py::test_font[DejaVu Sans]\n"
    )
    assert parse_log(summary, "matplotlib/matplotlib") == {
        "[1]": "SKIPPED",
        "lib/t.py::test_draw": "FAILED",
        "lib/t.py::test_font[DejaVu": "PASSED",
    }
    seaborn = "tests/t.py::test_a PASSED [50%]\nFAILED tests/t.py::test_b - x\n"
    assert parse_log(seaborn, "mwaskom/seaborn") == {
        "tests/t.py::test_a": "PASSED",
        "tests/t.py::test_b": "FAILED",
    }


# --- Test commands and image names -----------------------------------------------------------


def test_test_commands_follow_the_harness_per_repo():
    path = "tests/auth_tests/test_validators.py"
    patch = f"diff --git a/{path} b/{path}\n"
    assert directives_for("django/django", patch) == ["auth_tests.test_validators"]
    assert command_for("django/django", "3.0", patch).endswith(
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
        "auth_tests.test_validators"
    )
    assert command_for("django/django", "1.9", patch).endswith(
        "./tests/runtests.py --verbosity 2 auth_tests.test_validators"
    )
    sympy = "diff --git a/sympy/core/tests/test_a.py b/sympy/core/tests/test_a.py\n"
    assert command_for("sympy/sympy", "1.12", sympy).endswith(
        "bin/test -C --verbose sympy/core/tests/test_a.py"
    )
    sphinx = (
        "diff --git a/tests/test_x.py b/tests/test_x.py\ndiff --git a/tests/r.txt b/tests/r.txt\n"
    )
    assert command_for("sphinx-doc/sphinx", "4.0", sphinx).endswith(
        "tox --current-env -epy39 -v -- tests/test_x.py"
    )
    assert command_for("mwaskom/seaborn", "0.12", sphinx).endswith(
        "pytest --no-header -rA tests/test_x.py"
    )
    assert command_for("astropy/astropy", "1.3", sphinx).endswith(
        "pytest -rA -vv -o console_output_style=classic --tb=no tests/test_x.py"
    )
    for repo in ("pylint-dev/pylint", "pydata/xarray", "matplotlib/matplotlib", "pallets/flask"):
        assert command_for(repo, "1.0", sphinx).endswith("; pytest -rA tests/test_x.py")


def test_image_names_follow_the_published_scheme():
    assert image_key("django__django-10973") == "django_1776_django-10973"
    assert image_name("django__django-10973") == (
        "swebench/sweb.eval.x86_64.django_1776_django-10973:latest"
    )
    assert image_name("Foo__Bar-1", "local/{instance_id}:{version}", version="2.0") == (
        "local/Foo__Bar-1:2.0"
    )
