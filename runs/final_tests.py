"""The final test stage's log as the attempt page shows it beside the per-test table: the part
between the harness's markers (``>>>>> Start Test Output`` / ``>>>>> End Test Output``, what
the grading read), numbered as in the whole file, and the line each test's verdict is on.

Pure (no Django): ``read(text)`` gives a ``LogSection``; ``locate(log, names)`` maps test names
to line numbers. A log without both markers (our own suites' test commands) is shown whole.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tasks_app.swebench.eval_script import END_MARKER, START_MARKER

# The log read for the page: past this the file stays a download.
MAX_READ_BYTES = 4 * 1024 * 1024
# What the page shows of it: each line carries its anchor and number (~70 characters of
# markup), so both the lines and their text are capped to keep the attempt page small (its
# whole HTML stays under 400 KB with a huge log, tests/runs/web/test_pages_attempt.py); the rest is
# counted as cut (the page says how many) and stays in the download.
MAX_LINES = 2_000
MAX_SHOWN_CHARS = 100_000
MAX_LINE_CHARS = 2_000

# A line that states a verdict: pytest's -rA summary and verbose lines, django's
# "name (module.Class) ... ok", sympy's "test_name ok" / "F" / "E".
_STATUS_WORDS = r"PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS|ok|FAIL|skipped|F|E|expected failure"
_LEADING = re.compile(rf"^\s*(?:{_STATUS_WORDS})\b")
_TRAILING = re.compile(rf"^\s*(?:\.\.\.\s*)?(?:{_STATUS_WORDS})(?:\s|$|\[)")


@dataclass
class LogSection:
    lines: list[tuple[int, str]]  # (line number in the whole file, text), the shown part
    marked: bool  # the lines between the markers (else the whole log)
    cut: int = 0  # lines of that part not shown (past MAX_LINES)
    total_lines: int = 0  # lines in the text read
    where: dict[str, int] = field(default_factory=dict)  # test name -> its line number


def read(text: str) -> LogSection:
    """The test part of a final test stage's log: the lines strictly between the first start
    marker and the end marker after it, numbered from 1 as in the whole text; the whole text
    when it lacks either marker."""
    all_lines = text.splitlines()
    start = next((i for i, line in enumerate(all_lines) if START_MARKER in line), None)
    end = None
    if start is not None:
        end = next(
            (i for i in range(start + 1, len(all_lines)) if END_MARKER in all_lines[i]), None
        )
    if start is not None and end is not None:
        first, last, marked = start + 1, end, True
    else:
        first, last, marked = 0, len(all_lines), False
    shown: list[tuple[int, str]] = []
    budget = MAX_SHOWN_CHARS
    for n in range(first, min(last, first + MAX_LINES)):
        text = all_lines[n][:MAX_LINE_CHARS]
        if len(text) > budget:
            break
        budget -= len(text)
        shown.append((n + 1, text))
    return LogSection(
        lines=shown, marked=marked, cut=(last - first) - len(shown), total_lines=len(all_lines)
    )


def locate(log: LogSection, names: Iterable[str]) -> dict[str, int]:
    """The line each test's verdict is on: among the shown lines holding the name, one that
    states a status (the last such, as pytest's summary comes last), else the first; a test
    whose name is on no line is left out. One pass over the lines, whatever the test count."""
    by_token: dict[str, list[int]] = defaultdict(list)
    text_of: dict[int, str] = {}
    for number, text in log.lines:
        text_of[number] = text
        for token in set(text.split()):
            by_token[token].append(number)
    found: dict[str, int] = {}
    for name in names:
        words = name.split()
        if not words:
            continue
        candidates = [n for n in by_token.get(words[0], ()) if name in text_of[n]]
        if not candidates:
            continue
        stated = [n for n in candidates if _states_verdict(text_of[n], name)]
        found[name] = stated[-1] if stated else candidates[0]
    log.where = found
    return found


def _states_verdict(line: str, name: str) -> bool:
    before, _, after = line.partition(name)
    return bool(_LEADING.search(before) and not before.strip().split()[1:]) or bool(
        _TRAILING.match(after)
    )
