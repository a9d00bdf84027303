"""Patch text handling for ``apply_patch``: pure functions, no sandbox and no file system.

Models send diffs in many shapes: fenced in Markdown, preceded by prose, without ``a/``/``b/``
prefixes, with CRLF line ends, or in the ``*** Begin Patch`` format. Unless strict mode is on,
``normalize_patch`` turns all of those into one plain unified diff that ``git apply`` takes.
``patch_paths`` lists every path a diff touches so that each one can be checked before anything
is applied: a path that could leave the workspace refuses the whole patch.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
MAX_PATCH_CHARS = 1_000_000

_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_DIFF_START = re.compile(r"^(diff --git |--- |\*\*\* Begin Patch)", re.MULTILINE)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_SYMLINK_MODE = re.compile(r"^(new file mode|new mode|old mode|deleted file mode) 120000", re.M)


class PatchError(ValueError):
    """The patch cannot be used as given; the message is shown to the agent."""


@dataclass(frozen=True, slots=True)
class NormalizedPatch:
    text: str
    strip: int  # the -p level for git apply: 1 with a/ b/ prefixes, 0 without
    paths: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())  # what normalization changed, for the agent


def extract_diff(text: str) -> str | None:
    """The first diff in a free-text answer (fenced or bare), or None when there is none."""
    for match in _FENCE.finditer(text):
        body = match.group(1)
        if _DIFF_START.search(body) and ("@@" in body or BEGIN_PATCH in body):
            return body
    start = _DIFF_START.search(text)
    if start is None:
        return None
    body = text[start.start() :]
    if "@@" not in body and BEGIN_PATCH not in body:
        return None
    return body


def normalize_patch(
    text: str, *, strict: bool, read_text: Callable[[str], str | None] | None = None
) -> NormalizedPatch:
    """Return a unified diff ready for ``git apply`` or raise PatchError.

    ``read_text(path)`` returns a file's current content (None when missing); it is needed only
    to convert ``*** Begin Patch`` blocks, which carry no line numbers.
    """
    if not isinstance(text, str) or not text.strip():
        raise PatchError("the patch is empty")
    if len(text) > MAX_PATCH_CHARS:
        raise PatchError(f"the patch is larger than {MAX_PATCH_CHARS} characters")
    if "\x00" in text:
        raise PatchError("the patch contains a NUL byte")
    notes: list[str] = []
    if strict:
        if BEGIN_PATCH in text:
            raise PatchError("strict patch mode: '*** Begin Patch' blocks are not accepted")
        if not text.lstrip().startswith(("diff --git ", "--- ")):
            raise PatchError("strict patch mode: the patch must start with 'diff --git' or '--- '")
    else:
        if "\r\n" in text:
            text = text.replace("\r\n", "\n")
            notes.append("converted CRLF line ends")
        extracted = extract_diff(text)
        if extracted is None:
            raise PatchError("no unified diff found (expected 'diff --git', '--- ' and '@@')")
        if extracted != text:
            notes.append("removed text around the diff")
            text = extracted
        if text.lstrip().startswith(BEGIN_PATCH):
            if read_text is None:
                raise PatchError("'*** Begin Patch' needs the current file contents")
            text = begin_patch_to_unified(text, read_text)
            notes.append("converted '*** Begin Patch' to a unified diff")
        if _has_loose_hunks(text):
            if read_text is None:
                raise PatchError("hunks without line numbers need the current file contents")
            text = _loose_to_unified(text, read_text)
            notes.append("recomputed hunks that had no line numbers")
    if not text.endswith("\n"):
        text += "\n"
    if "GIT binary patch" in text or re.search(r"^Binary files .* differ$", text, re.M):
        raise PatchError("binary patches are not supported")
    if _SYMLINK_MODE.search(text):
        raise PatchError("patches may not create or change symbolic links")
    hunks = any(_HUNK.match(line) for line in text.splitlines())
    if not hunks and not re.search(r"^(rename from|new file mode|deleted file mode) ", text, re.M):
        raise PatchError("the diff has no hunks ('@@ -a,b +c,d @@' lines)")
    strip = _strip_level(text)
    paths = patch_paths(text, strip=strip)
    if not paths:
        raise PatchError("the diff names no files ('--- a/path' and '+++ b/path' lines)")
    for path in paths:
        check_relative_path(path)
    return NormalizedPatch(text=text, strip=strip, paths=tuple(paths), notes=tuple(notes))


def _has_loose_hunks(text: str) -> bool:
    return any(line.startswith("@@") and not _HUNK.match(line) for line in text.splitlines())


def _loose_to_unified(text: str, read_text: Callable[[str], str | None]) -> str:
    """Rebuild a diff whose hunks are bare '@@' lines by locating their lines in the file."""
    lines = text.splitlines()
    files: list[tuple[str | None, str | None, list[str]]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("--- ") and following.startswith("+++ "):
            old, new = _header_path(line[4:]), _header_path(following[4:])
            strip = 1 if all(p is None or p.startswith(("a/", "b/")) for p in (old, new)) else 0
            files.append(
                (
                    None if old is None else _strip(old, strip),
                    None if new is None else _strip(new, strip),
                    [],
                )
            )
            index += 2
            continue
        if files and (line.startswith(("@@", " ", "+", "-")) or line == ""):
            files[-1][2].append(line)
        index += 1
    pieces = []
    for old, new, body in files:
        if new is None and old is not None:
            current = read_text(check_relative_path(old))
            pieces.append(_unified(current, None, old, old))
            continue
        assert new is not None
        check_relative_path(new)
        if old is None:
            added = [line[1:] for line in body if line.startswith("+")]
            pieces.append(_unified(None, "\n".join(added) + "\n", new, new))
            continue
        current = read_text(check_relative_path(old))
        if current is None:
            raise PatchError(f"{old}: no such file")
        while body and body[-1] == "":
            body.pop()
        updated = _apply_chunks(old, current, body)
        pieces.append(_unified(current, updated, old, new))
    if not pieces:
        raise PatchError("no file headers ('--- a/path', '+++ b/path') found")
    return "".join(pieces)


def check_relative_path(path: str) -> str:
    """Refuse a path that could leave the workspace; return it normalized."""
    if not path or "\x00" in path:
        raise PatchError(f"invalid path {path!r}")
    if path.startswith(("/", "~")):
        raise PatchError(f"absolute path refused: {path!r}")
    parts = path.split("/")
    if ".." in parts:
        raise PatchError(f"path escapes the workspace: {path!r}")
    if ".git" in parts:
        raise PatchError(f"paths inside .git are refused: {path!r}")
    return posixpath.normpath(path)


def _header_path(rest: str) -> str | None:
    """The path of a '--- ' or '+++ ' header line (timestamps after a tab dropped)."""
    rest = rest.split("\t", 1)[0].rstrip()
    if rest.startswith('"') and rest.endswith('"') and len(rest) >= 2:
        rest = rest[1:-1]
        if "\\" in rest:
            raise PatchError(f"quoted paths with escapes are not supported: {rest!r}")
    if rest == "/dev/null":
        return None
    return rest


def _strip_level(text: str) -> int:
    """1 when every header path carries a/ or b/ (git style), else 0."""
    lines = text.splitlines()
    headers = [
        path
        for index, line in enumerate(lines[:-1])
        if line.startswith("--- ") and lines[index + 1].startswith("+++ ")
        for header in (line, lines[index + 1])
        if (path := _header_path(header[4:])) is not None
    ]
    if text.lstrip().startswith("diff --git "):
        return 1
    if headers and all(p.startswith(("a/", "b/")) for p in headers):
        return 1
    return 0


def _strip(path: str, strip: int) -> str:
    if strip == 0:
        return path
    parts = path.split("/", strip)
    if len(parts) <= strip:
        raise PatchError(f"cannot strip {strip} leading component(s) from {path!r}")
    return parts[strip]


def patch_paths(text: str, *, strip: int = 1) -> list[str]:
    """Every path the diff reads or writes, in order, without duplicates."""
    found: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("diff --git "):
            rest = line[len("diff --git ") :]
            match = re.fullmatch(r"(\S+) (\S+)", rest)
            if match is None:
                raise PatchError(f"cannot parse the header {line!r} (paths with spaces?)")
            found += [_strip(match.group(1), strip), _strip(match.group(2), strip)]
        # A removed line may itself start with "-- "; a header is always followed by "+++ ".
        elif line.startswith("--- ") and following.startswith("+++ "):
            for header in (line, following):
                path = _header_path(header[4:])
                if path is not None:
                    found.append(_strip(path, strip))
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            found.append(line.split(" ", 2)[2].strip())
    unique: list[str] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


# --- "*** Begin Patch" (the apply_patch format some models are trained on) -------------------


@dataclass
class _FileOp:
    kind: str  # update | add | delete
    path: str
    move_to: str | None = None
    lines: list[str] = field(default_factory=list)


def _parse_begin_patch(text: str) -> list[_FileOp]:
    lines = text.strip("\n").split("\n")
    if not lines or lines[0].strip() != BEGIN_PATCH:
        raise PatchError(f"expected {BEGIN_PATCH!r} on the first line")
    ops: list[_FileOp] = []
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == END_PATCH:
            break
        for marker, kind in (
            ("*** Update File: ", "update"),
            ("*** Add File: ", "add"),
            ("*** Delete File: ", "delete"),
        ):
            if line.startswith(marker):
                ops.append(_FileOp(kind, line[len(marker) :].strip()))
                break
        else:
            if line.startswith("*** Move to: "):
                if not ops or ops[-1].kind != "update":
                    raise PatchError(f"line {number}: 'Move to' outside an 'Update File'")
                ops[-1].move_to = line[len("*** Move to: ") :].strip()
            elif line.strip() == "*** End of File":
                continue
            elif not ops:
                raise PatchError(f"line {number}: expected '*** Update/Add/Delete File: path'")
            else:
                ops[-1].lines.append(line)
    else:
        raise PatchError(f"missing {END_PATCH!r}")
    if not ops:
        raise PatchError("the patch changes no file")
    return ops


def _find(haystack: list[str], needle: list[str], start: int) -> int:
    """Index of ``needle`` in ``haystack`` at or after ``start``: exact, then ignoring
    trailing and then surrounding whitespace (models often get indentation of blank lines wrong).
    """
    if not needle:
        return start
    for key in (lambda s: s, str.rstrip, str.strip):
        wanted = [key(s) for s in needle]
        for index in range(start, len(haystack) - len(needle) + 1):
            if [key(s) for s in haystack[index : index + len(needle)]] == wanted:
                return index
    return -1


def _apply_chunks(path: str, content: str, body: list[str]) -> str:
    old_lines = content.split("\n")
    trailing_newline = content.endswith("\n")
    if trailing_newline:
        old_lines.pop()
    chunks: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in body:
        if line.startswith("@@"):
            chunks.append((line[2:].strip() or None, []))
        else:
            chunks[-1][1].append(line)
    result: list[str] = []
    cursor = 0
    for anchor, chunk in chunks:
        if not chunk:
            continue
        before: list[str] = []
        after: list[str] = []
        for line in chunk:
            tag, rest = (line[:1], line[1:]) if line else (" ", "")
            if tag == " ":
                before.append(rest)
                after.append(rest)
            elif tag == "-":
                before.append(rest)
            elif tag == "+":
                after.append(rest)
            else:
                raise PatchError(f"{path}: a change line must start with ' ', '-' or '+': {line!r}")
        search_from = cursor
        if anchor:
            at = _find(old_lines, [anchor], cursor)
            if at >= 0:
                search_from = at
        index = _find(old_lines, before, search_from)
        if index < 0:
            shown = "\n".join(before[:6])
            raise PatchError(f"{path}: these lines were not found in the file:\n{shown}")
        result += old_lines[cursor:index] + after
        cursor = index + len(before)
    result += old_lines[cursor:]
    return "\n".join(result) + ("\n" if trailing_newline or not result else "")


def _unified(old: str | None, new: str | None, old_path: str, new_path: str) -> str:
    a = [] if old is None else old.splitlines(keepends=True)
    b = [] if new is None else new.splitlines(keepends=True)
    from_file = "/dev/null" if old is None else f"a/{old_path}"
    to_file = "/dev/null" if new is None else f"b/{new_path}"
    out = [f"diff --git a/{old_path} b/{new_path}\n"]
    if old is None:
        out.append("new file mode 100644\n")
    if new is None:
        out.append("deleted file mode 100644\n")
    for line in difflib.unified_diff(a, b, from_file, to_file):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def begin_patch_to_unified(text: str, read_text: Callable[[str], str | None]) -> str:
    """Convert a ``*** Begin Patch`` block to a git-style unified diff."""
    pieces: list[str] = []
    for op in _parse_begin_patch(text):
        check_relative_path(op.path)
        if op.kind == "add":
            if read_text(op.path) is not None:
                raise PatchError(f"{op.path}: 'Add File' but the file exists")
            body = [line[1:] if line.startswith("+") else line for line in op.lines]
            pieces.append(_unified(None, "\n".join(body) + "\n", op.path, op.path))
            continue
        current = read_text(op.path)
        if current is None:
            raise PatchError(f"{op.path}: no such file")
        if op.kind == "delete":
            pieces.append(_unified(current, None, op.path, op.path))
            continue
        updated = _apply_chunks(op.path, current, op.lines)
        if op.move_to:
            check_relative_path(op.move_to)
            pieces.append(_unified(current, None, op.path, op.path))
            pieces.append(_unified(None, updated, op.move_to, op.move_to))
        elif updated != current:
            pieces.append(_unified(current, updated, op.path, op.path))
    if not pieces:
        raise PatchError("the patch changes nothing")
    return "".join(pieces)
