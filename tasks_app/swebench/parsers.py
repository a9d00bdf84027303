"""Test-log parsers: a log in, ``{test name: status}`` out. Pure functions, no Django.

One parser per runner format, chosen by repo as the SWE-bench harness does. Statuses are
PASSED, FAILED, SKIPPED, ERROR, XFAIL and XPASS. Only the text between the harness markers
is read when they are present (``marked_section``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

START_MARKER: Final = ">>>>> Start Test Output"
END_MARKER: Final = ">>>>> End Test Output"

PASSED: Final = "PASSED"
FAILED: Final = "FAILED"
SKIPPED: Final = "SKIPPED"
ERROR: Final = "ERROR"
XFAIL: Final = "XFAIL"
XPASS: Final = "XPASS"
STATUSES: Final = (PASSED, FAILED, SKIPPED, ERROR, XFAIL, XPASS)

StatusMap = dict[str, str]
Parser = Callable[[str], StatusMap]

_STATUS_ALT = "|".join(STATUSES)
# "-rA" summary lines: "PASSED tests/a.py::t", "FAILED tests/a.py::t - assert 0".
_STATUS_FIRST = re.compile(rf"^({_STATUS_ALT})\s+(\S+)")
# Verbose lines: "tests/a.py::t PASSED   [ 10%]".
_TEST_FIRST = re.compile(rf"^(\S+)\s+({_STATUS_ALT})(?:\s|$)")
# "SKIPPED [2] tests/a.py:10: reason" counts skips, it does not name a test.
_SKIP_COUNT = re.compile(r"^\[\d+\]")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[(\d+)m")
_CONTROL = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))


def marked_section(log: str) -> str:
    """The text between the harness's start and end markers, or the whole log without them."""
    start = log.find(START_MARKER)
    if start == -1:
        return log
    start = log.find("\n", start)
    body = log[start + 1 :] if start != -1 else ""
    end = body.find(END_MARKER)
    if end != -1:
        # Drop the rest of the line that carries the marker (e.g. "+ : '" from set -x).
        body = body[: body.rfind("\n", 0, end) + 1] if "\n" in body[:end] else ""
    return body


def _pytest_line(line: str) -> tuple[str, str] | None:
    match = _STATUS_FIRST.match(line)
    if match:
        status, name = match.groups()
        if status == SKIPPED and _SKIP_COUNT.match(name):
            return None
        return name, status
    match = _TEST_FIRST.match(line)
    if match:
        name, status = match.groups()
        return name, status
    return None


def _strip_colour(line: str) -> str:
    return _ANSI.sub("", line).translate(_CONTROL)


def parse_pytest(log: str) -> StatusMap:
    """pytest ``-rA`` output (summary lines and verbose lines); colour codes are ignored."""
    statuses: StatusMap = {}
    for raw in log.splitlines():
        parsed = _pytest_line(_strip_colour(raw))
        if parsed:
            statuses[parsed[0]] = parsed[1]
    return statuses


_OPTION = re.compile(r"^(.*?)\[(.*)\]$")


def _short_option(name: str) -> str:
    """Parametrised ids holding an absolute path keep its last part, as the harness does."""
    match = _OPTION.match(name)
    if not match:
        return name
    main, option = match.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{main}[{option}]"


def parse_pytest_options(log: str) -> StatusMap:
    """pytest output of repos whose parametrised ids embed paths (requests, pydicom, pylint)."""
    return {_short_option(name): status for name, status in parse_pytest(log).items()}


def parse_matplotlib(log: str) -> StatusMap:
    """pytest output with matplotlib's enum reprs normalised (the dataset spells them 1 and 3)."""
    statuses: StatusMap = {}
    for raw in log.splitlines():
        line = raw.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
        if not line.startswith(STATUSES):
            continue
        if line.startswith(FAILED):
            line = line.replace(" - ", " ")
        parts = line.split()
        if len(parts) > 1 and parts[0] in STATUSES:
            statuses[parts[1]] = parts[0]
    return statuses


def parse_seaborn(log: str) -> StatusMap:
    statuses: StatusMap = {}
    for line in log.splitlines():
        parts = line.split()
        if line.startswith(FAILED) and len(parts) > 1:
            statuses[parts[1]] = FAILED
        elif f" {PASSED} " in line and len(parts) > 1 and parts[1] == PASSED:
            statuses[parts[0]] = PASSED
        elif line.startswith(PASSED) and len(parts) > 1:
            statuses[parts[1]] = PASSED
    return statuses


_DJANGO_INTERRUPTED = (
    # A long print can split "name ... ok" over lines; these are the forms seen in the wild.
    re.compile(
        r"^(.*?)\s\.\.\.\sTesting against Django installed in (?s:.*?) silenced\)\.\nok$",
        re.MULTILINE,
    ),
    re.compile(r"^(.*?)\s\.\.\.\sInternal Server Error: /(.*)/\nok$", re.MULTILINE),
    re.compile(
        r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$", re.MULTILINE
    ),
)


def parse_django(log: str) -> StatusMap:
    """Django's runner at verbosity 2: ``name (module.Class) ... ok|FAIL|ERROR|skipped``.

    A test whose docstring is printed puts the docstring on the next line; its status then
    follows it (``name (module.Class)\\nDocstring ... ok``), which the `` ... `` rule covers.
    A status alone on a later line belongs to the last test that printed `` ... ``.
    """
    statuses: StatusMap = {}
    previous: str | None = None
    for raw in log.splitlines():
        line = raw.strip()
        if "--version is equivalent to version" in line:
            statuses["--version is equivalent to version"] = PASSED
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in (" ... ok", " ... OK", " ...  OK"):
            if line.endswith(suffix):
                if line.startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()
                statuses[line.rsplit(suffix, 1)[0]] = PASSED
                break
        if " ... skipped" in line:
            statuses[line.split(" ... skipped")[0]] = SKIPPED
        if line.endswith(" ... FAIL"):
            statuses[line.split(" ... FAIL")[0]] = FAILED
        if line.startswith("FAIL:") and len(line.split()) > 1:
            statuses[line.split()[1].strip()] = FAILED
        if line.endswith(" ... ERROR"):
            statuses[line.split(" ... ERROR")[0]] = ERROR
        if line.startswith("ERROR:") and len(line.split()) > 1:
            statuses[line.split()[1].strip()] = ERROR
        if line.startswith("ok") and previous is not None:
            statuses[previous] = PASSED
    for pattern in _DJANGO_INTERRUPTED:
        for match in pattern.finditer(log):
            statuses[match.group(1)] = PASSED
    return statuses


_SYMPY_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")


_SYMPY_FILE_VERDICT = re.compile(r"\s+\[(OK|FAIL)\]$")


def parse_sympy(log: str) -> StatusMap:
    """sympy's ``bin/test --verbose``: ``test_name ok|F|E``; failure headers mark failures.

    The last test of a file shares its line with the file's verdict (``test_x ok   [OK]``);
    the harness's parser misses that test, we strip the verdict first.
    """
    statuses: StatusMap = {}
    for match in _SYMPY_FAILURE_HEADER.findall(log):
        statuses[f"{match[1]}.py:{match[2]}"] = FAILED
    for raw in log.splitlines():
        line = _SYMPY_FILE_VERDICT.sub("", raw.strip())
        if not line.startswith("test_"):
            continue
        name = line.split()[0]
        if line.endswith(" E"):
            statuses[name] = ERROR
        if line.endswith(" F"):
            statuses[name] = FAILED
        if line.endswith(" ok"):
            statuses[name] = PASSED
    return statuses


REPO_PARSERS: dict[str, Parser] = {
    "astropy/astropy": parse_pytest,
    "django/django": parse_django,
    "marshmallow-code/marshmallow": parse_pytest,
    "matplotlib/matplotlib": parse_matplotlib,
    "mwaskom/seaborn": parse_seaborn,
    "pallets/flask": parse_pytest,
    "psf/requests": parse_pytest_options,
    "pvlib/pvlib-python": parse_pytest,
    "pydata/xarray": parse_pytest,
    "pydicom/pydicom": parse_pytest_options,
    "pylint-dev/astroid": parse_pytest,
    "pylint-dev/pylint": parse_pytest_options,
    "pytest-dev/pytest": parse_pytest,
    "pyvista/pyvista": parse_pytest,
    "scikit-learn/scikit-learn": parse_pytest,
    "sphinx-doc/sphinx": parse_pytest,
    "sqlfluff/sqlfluff": parse_pytest,
    "sympy/sympy": parse_sympy,
}


def parser_for(repo: str) -> Parser:
    """The repo's parser; pytest for a repo the harness does not list (most Python repos)."""
    return REPO_PARSERS.get(repo, parse_pytest)


def parse_log(log: str, repo: str) -> StatusMap:
    """Statuses of the tests in ``log`` (only its marked test section when it has one).

    Like the harness, a marked section with no results falls back to the whole log: some
    runners write their report to a stream that lands outside the markers.
    """
    parser = parser_for(repo)
    statuses = parser(marked_section(log))
    if not statuses and START_MARKER in log:
        statuses = parser(log)
    return statuses
