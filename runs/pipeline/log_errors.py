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
