"""Test-log parsers: a log in, ``{test name: status}`` out. Pure functions, no Django.

The parsing is the official harness's (swebench 4.1.0, pinned in pyproject.toml): the repo's
parser from ``swebench.harness.log_parsers.MAP_REPO_TO_PARSER``, for every language the package
ships (``languages``; ``parse_log_pytest`` for a repo it does not list), on the text between
the markers, read as ``get_logs_eval`` reads it.
FAIL_TO_PASS / PASS_TO_PASS were made with these parsers, so any other reading could change a
grade. Where ours differed, the official reading was kept (README, "SWE-bench", has the table):

* sympy: the last test of a file shares its line with the file's verdict
  (``test_x ok      [OK]``); the official parser does not see it, so it is missing.
* pytest: a nested run's summary lines (pytester output captured by ``-rA``) are read like
  the outer run's; so are ``SKIPPED [N] file:line: reason`` lines (a "test" named ``[N]``:
  some PASS_TO_PASS lists hold such names, e.g. ``[100%]``); verbose ``name STATUS`` lines
  and colour codes are read only by the parser of astropy, scikit-learn and sphinx.
* XPASS is no status: the test is missing, so it neither passes nor is kept.
* A test id containing spaces is cut at the first one, as the lists have it.
* ``FAILED name - message`` and ``ERROR name - message`` lines give ``name``.
* A log without both markers, or with one of the harness's error codes, has no statuses.
"""

from __future__ import annotations

from typing import Final

from tasks_app.swebench.eval_script import END_MARKER, START_MARKER
from tasks_app.swebench.languages import parser_for, parser_spec

PASSED: Final = "PASSED"
FAILED: Final = "FAILED"
SKIPPED: Final = "SKIPPED"
ERROR: Final = "ERROR"
XFAIL: Final = "XFAIL"
STATUSES: Final = (PASSED, FAILED, SKIPPED, ERROR, XFAIL)

StatusMap = dict[str, str]

__all__ = [
    "END_MARKER",
    "START_MARKER",
    "STATUSES",
    "StatusMap",
    "marked_section",
    "parse_log",
    "parse_test_output",
    "parser_for",
]


def parse_log(text: str, repo: str, *, instance_id: str = "", version: str = "") -> StatusMap:
    """Statuses of the tests in ``text``, all of it, with the repo's official parser.

    The parsers get the ``TestSpec`` fields they read (jekyll's and immutable-js's pick a
    runner by ``instance_id``: ``languages.repo_problems`` refuses at import one they cannot).
    """
    spec = parser_spec(repo=repo, instance_id=instance_id, version=version)
    return dict(parser_for(repo)(text, spec))


def marked_section(log: str) -> str | None:
    """The text between the start and end markers, or None when the log has no complete test
    section (a marker missing, or one of the harness's error codes present)."""
    from swebench.harness.constants import (
        APPLY_PATCH_FAIL,
        RESET_FAILED,
        TESTS_ERROR,
        TESTS_TIMEOUT,
    )

    # get_logs_eval: a log holding one of these has no results (the harness's own codes for a
    # patch or reset that failed, tests that errored or timed out).
    if any(code in log for code in (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)):
        return None
    if START_MARKER not in log or END_MARKER not in log:
        return None
    return log.split(START_MARKER)[1].split(END_MARKER)[0]


def parse_test_output(
    log: str, repo: str, *, instance_id: str = "", version: str = ""
) -> StatusMap | None:
    """Statuses of an eval script's output, as ``get_logs_eval`` reads them; None when the log
    has no test section. A section with no results falls back to the whole log: some runners
    write their report to a stream that lands outside the markers."""
    section = marked_section(log)
    if section is None:
        return None
    who = {"instance_id": instance_id, "version": version}
    return parse_log(section, repo, **who) or parse_log(log, repo, **who)
