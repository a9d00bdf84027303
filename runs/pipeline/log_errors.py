"""The first error of a log, for verdicts that explain themselves without opening the log
(gold validation, suite validation). Pure."""

from __future__ import annotations

import re

# The first error of a test log: a pytest "E   SomeError: ..." line, else a line that starts
# with an exception name (a traceback's last line, "ImportError while loading conftest"), else
# an interpreter or shell that could not start the tests ("/testbed/.tox/py39/bin/python: No
# module named pytest", "tox: command not found"), else a line saying ERROR.
_ERROR_LINES = (
    re.compile(r"^E\s+((?:[\w.]+\.)?\w*(?:Error|Exception)\b.*)$"),
    re.compile(r"^((?:[\w.]+\.)?\w*(?:Error|Exception)(?::| while ).*)$"),
    re.compile(
        r"^(\S*python[\d.]*: (?:No module named|can't open file|Error while finding module) .*"
        r"|(?:\S+: )?(?:line \d+: )?\S+: command not found)$"
    ),
    re.compile(r"^(.*\bERROR\b.*)$"),
)
_START = ">>>>> Start Test Output"
_END = ">>>>> End Test Output"


def first_error(log: str) -> str:
    """The first error line of ``log`` (its test section when it has one), at most 240
    characters, or "" when there is none."""
    if _START in log:
        log = log.split(_START, 1)[1].split(_END, 1)[0]
    lines = [line.rstrip() for line in log.splitlines()]
    for pattern in _ERROR_LINES:
        for line in lines:
            match = pattern.match(line.strip() if pattern is not _ERROR_LINES[0] else line)
            if match:
                return match.group(1).strip()[:240]
    return ""


# pytest's short summary (-rA) names a skipped test by where it was skipped, never by its id:
# "SKIPPED [1] tests/test_self.py:1234: Need 2 or more cores for test to be meaningful"; its
# verbose line (-v) names the id with the reason cut short: "tests/x.py::test_y SKIPPED (...)".
_SKIP_SUMMARY = re.compile(r"^SKIPPED \[\d+\] (?P<file>[^\s:]+):(?P<line>\d+): (?P<reason>.*)$")
_SKIP_VERBOSE = re.compile(r"^(?P<test>\S+::\S+) SKIPPED(?: \((?P<reason>.*?)\))?(?:\s+\[.*)?$")


def skipped_tests(log: str, tests: list[str]) -> dict[str, str]:
    """The tests among ``tests`` that ``log`` shows skipped, each with its skip message
    (``file:line: reason``). A test the log names as skipped (verbose) counts; so does one the
    log has no result for when its file has skips in the short summary (where pytest names no
    test): its file's skip messages are given, several joined with " | "."""
    summary: dict[str, list[str]] = {}
    verbose: dict[str, str] = {}
    for raw in log.splitlines():
        line = raw.rstrip()
        if match := _SKIP_SUMMARY.match(line):
            where = f"{match['file']}:{match['line']}: {match['reason'].strip()}"
            found = summary.setdefault(match["file"], [])
            if where not in found:
                found.append(where)
        elif match := _SKIP_VERBOSE.match(line):
            verbose[match["test"]] = (match["reason"] or "").removesuffix("...")
    named = {}
    for test in tests:
        in_file = summary.get(test.split("::", 1)[0], [])
        if test in verbose:
            short = verbose[test]
            full = [w for w in in_file if w.split(": ", 1)[-1].startswith(short)]
            named[test] = (full[0] if full else short or "no reason given")[:240]
        elif in_file and not _has_result(log, test):
            named[test] = " | ".join(in_file[:3])[:240]
    return named


def _has_result(log: str, test: str) -> bool:
    """Whether ``log`` holds a line naming ``test`` with a status (it ran, and was not
    skipped)."""
    return any(
        test in line and ("PASSED" in line or "FAILED" in line or "ERROR" in line)
        for line in log.splitlines()
    )
