"""Unified diffs parsed into files and lines, highlighted server-side with pygments.

Rendering is capped: a file over ``MAX_FILE_LINES`` is listed but not rendered, and once
``MAX_TOTAL_LINES`` lines have been rendered the remaining files are listed only, so a
10,000-line patch gives a page a browser can handle (the full patch is a download).

A huge change set (a sandbox that left 200,000 new files made a 100 MB page that took 40 s a
view) is summarised: only the first ``MAX_PARSE_CHARS`` of the patch are parsed and only its
first ``MAX_FILES_SHOWN`` files listed, with the count of all of them; the page's bytes and
time stay bounded whatever the patch's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

MAX_FILE_LINES = 2000
MAX_TOTAL_LINES = 8000
COLLAPSE_OVER_LINES = 400
MAX_FILES_SHOWN = 300
MAX_PARSE_CHARS = 2 * 1024 * 1024
GIT_FILE_HEADER = "diff --git "

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_GIT_HEADER = re.compile(r"^diff --git (?:a/)?(\S+) (?:b/)?(\S+)")
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="")


@dataclass
class DiffLine:
    kind: str  # "ctx" | "add" | "del" | "hunk" | "note"
    text: str
    old_no: int | None = None
    new_no: int | None = None
    html: SafeString = field(default_factory=lambda: mark_safe(""))

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-", "ctx": " "}.get(self.kind, "")


@dataclass
class DiffFile:
    old_path: str = ""
    new_path: str = ""
    lines: list[DiffLine] = field(default_factory=list)
    additions: int = 0
    deletions: int = 0
    is_binary: bool = False
    rendered: bool = True
    skipped_reason: str = ""

    @property
    def path(self) -> str:
        return self.new_path if self.new_path and self.new_path != "/dev/null" else self.old_path

    @property
    def status(self) -> str:
        if self.old_path == "/dev/null":
            return "added"
        if self.new_path == "/dev/null":
            return "deleted"
        if self.old_path and self.new_path and self.old_path != self.new_path:
            return "renamed"
        return "modified"

    @property
    def collapsed(self) -> bool:
        return len(self.lines) > COLLAPSE_OVER_LINES

    @property
    def anchor(self) -> str:
        return "file-" + re.sub(r"[^A-Za-z0-9_-]", "-", self.path)[:120]

    def split_rows(self) -> list[tuple[DiffLine | None, DiffLine | None]]:
        """Side-by-side rows: removals on the left paired with the additions that follow."""
        rows: list[tuple[DiffLine | None, DiffLine | None]] = []
        dels: list[DiffLine] = []
        adds: list[DiffLine] = []

        def flush() -> None:
            for i in range(max(len(dels), len(adds))):
                rows.append(
                    (dels[i] if i < len(dels) else None, adds[i] if i < len(adds) else None)
                )
            dels.clear()
            adds.clear()

        for line in self.lines:
            if line.kind == "del":
                if adds:
                    flush()
                dels.append(line)
            elif line.kind == "add":
                adds.append(line)
            else:
                flush()
                rows.append((line, line))
        flush()
        return rows


@dataclass
class ParsedDiff:
    files: list[DiffFile]  # the files shown (the first MAX_FILES_SHOWN at most)
    total_lines: int
    capped: bool
    # Files in the whole patch, and whether the page shows only part of it (files left out,
    # or the patch parsed only up to MAX_PARSE_CHARS).
    total_files: int = 0
    partial: bool = False
    total_chars: int = 0

    @property
    def additions(self) -> int:
        return sum(f.additions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)


def parse_diff(text: str, *, max_files: int | None = None) -> list[DiffFile]:
    """Split a unified diff (git or plain) into files with numbered lines; with
    ``max_files``, stop once that many files are read."""
    files: list[DiffFile] = []
    current: DiffFile | None = None
    old_left = new_left = 0
    old_no = new_no = 0
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        in_hunk = old_left > 0 or new_left > 0
        if in_hunk and current is not None and line[:1] in (" ", "+", "-", ""):
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
            body = line[1:]
            if kind == "add":
                current.lines.append(DiffLine("add", body, None, new_no))
                current.additions += 1
                new_no += 1
                new_left -= 1
            elif kind == "del":
                current.lines.append(DiffLine("del", body, old_no, None))
                current.deletions += 1
                old_no += 1
                old_left -= 1
            else:
                current.lines.append(DiffLine("ctx", body, old_no, new_no))
                old_no += 1
                new_no += 1
                old_left -= 1
                new_left -= 1
            i += 1
            continue
        if line.startswith("\\"):
            if current is not None:
                current.lines.append(DiffLine("note", line))
            i += 1
            continue
        git = _GIT_HEADER.match(line)
        if git:
            if max_files is not None and len(files) >= max_files:
                break
            current = DiffFile(old_path=git.group(1), new_path=git.group(2))
            files.append(current)
            old_left = new_left = 0
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_path = _strip_prefix(line[4:], "a/")
            new_path = _strip_prefix(lines[i + 1][4:], "b/")
            if current is None or current.lines:
                if max_files is not None and len(files) >= max_files:
                    break
                current = DiffFile()
                files.append(current)
            current.old_path, current.new_path = old_path, new_path
            i += 2
            continue
        hunk = _HUNK.match(line)
        if hunk and current is not None:
            old_no, new_no = int(hunk.group(1)), int(hunk.group(3))
            old_left = int(hunk.group(2)) if hunk.group(2) is not None else 1
            new_left = int(hunk.group(4)) if hunk.group(4) is not None else 1
            current.lines.append(DiffLine("hunk", line))
            i += 1
            continue
        if current is not None and line.startswith("Binary files"):
            current.is_binary = True
        i += 1
    return files


def _strip_prefix(path: str, prefix: str) -> str:
    path = path.split("\t", 1)[0].strip()
    return path[len(prefix) :] if path.startswith(prefix) else path


def patch_head(text: str, limit: int = MAX_PARSE_CHARS) -> str:
    """The start of a patch to parse: whole files up to ``limit`` characters (at least the
    first file's first ``limit`` characters, cut at a line)."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n" + GIT_FILE_HEADER, 0, limit)
    if cut <= 0:
        cut = text.rfind("\n", 0, limit)
    return text[: cut + 1] if cut > 0 else text[:limit]


def count_files(text: str) -> int:
    """Files of a git diff: its header lines (a line of a hunk starts with a sign or a space,
    never with the header). Linear, in C."""
    return text.count("\n" + GIT_FILE_HEADER) + text.startswith(GIT_FILE_HEADER)


def render_diff(
    text: str, *, total_chars: int | None = None, total_files: int | None = None
) -> ParsedDiff:
    """Parse and highlight a diff within the rendering caps. ``text`` may be the start of a
    longer patch (``total_chars`` long, of ``total_files`` files: a page reads only the start
    of a huge one from the database); only its first ``MAX_PARSE_CHARS`` are parsed."""
    head = patch_head(text)
    files = parse_diff(head, max_files=MAX_FILES_SHOWN)
    total_chars = max(total_chars or 0, len(text))
    if total_files is None:
        total_files = count_files(text) if total_chars == len(text) else 0
    total_files = max(total_files, len(files))
    partial = total_files > len(files) or len(head) < total_chars
    rendered = 0
    capped = False
    for diff_file in files:
        count = len(diff_file.lines)
        if count > MAX_FILE_LINES:
            diff_file.rendered = False
            diff_file.skipped_reason = f"{count} lines: too large to show here"
            continue
        if rendered + count > MAX_TOTAL_LINES:
            diff_file.rendered = False
            diff_file.skipped_reason = "not shown: the page's line limit was reached"
            capped = True
            continue
        rendered += count
        _highlight(diff_file)
    return ParsedDiff(
        files=files,
        total_lines=sum(len(f.lines) for f in files),
        capped=capped,
        total_files=total_files,
        partial=partial,
        total_chars=total_chars,
    )


def _lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _highlight(diff_file: DiffFile) -> None:
    code_lines = [ln for ln in diff_file.lines if ln.kind in ("ctx", "add", "del")]
    for ln in diff_file.lines:
        if ln.kind not in ("ctx", "add", "del"):
            ln.html = mark_safe(escape(ln.text))
    if not code_lines:
        return
    source = "\n".join(ln.text for ln in code_lines) + "\n"
    # pygments escapes the text and closes every span at the end of a line, so the output
    # splits back into one safe fragment per input line.
    out = highlight(source, _lexer(diff_file.path), _FORMATTER).split("\n")
    if len(out) < len(code_lines):
        for ln in code_lines:
            ln.html = mark_safe(escape(ln.text))
        return
    for ln, html in zip(code_lines, out, strict=False):
        ln.html = mark_safe(html)
